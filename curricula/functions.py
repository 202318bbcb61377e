"""Functions: real functions called on real inputs, traced and mutated.

    codeexecutor build functions --from DIR [DIR ...] --out OUT

For every module of each folder (in a fixed order; `--shard I/N` takes every N-th), each
doctest example and each test assertion that calls a function becomes a self-contained
program (curricula/function_calls.py: the definitions it needs, inlined across the
package, then `print(repr(call))`). A program that imports `random` (or `secrets`,
`uuid`) is skipped: the sandbox draws the same numbers every run, so its trace holds
values no reader of the code can know. The program is traced in the sandbox twice: a
run that does not end in the same way both times (the clock) is skipped; one
that ends cleanly is an example, one that ends in an uncaught exception goes to the
crash set, except a NameError or ImportError, which says the extraction missed a
definition. Then mutants: the twelve operators on the definitions (the call kept), and
new inputs by replacing the call's literal arguments (CRP on the call alone); each is
executed and kept as the originals are.

Splits are by the module that holds the call (a test file's call counts for the module
defining the called function), from a stable hash, so no module is in two splits.
Programs are deduplicated on their normalised source (a copy in a held-out split wins
over one in train). Calls of functions that HumanEval asks for (its entry points), or
whose definitions share most of their token 5-grams with a HumanEval solution, are
dropped and counted: HumanEval is the reranking benchmark. Every example carries its
provenance (corpus, path, line, commit) and the corpus licence.

Journaled per module, like the CodeNet builder: `kill -9` and the same command resume.
Output: `functions/` (clean runs) and `functions_errors/` (crashes), `stats.json`.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import gzip
import hashlib
import io
import json
import logging
import os
import re
import time
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from codeexecutor.atomic import write_json
from curricula.common import (
    BuildSetup,
    RowKey,
    assign_splits,
    ending,
    is_error_trace,
    log_to_build_folder,
    make_example,
    run_to_its_end,
    save_journal_datasets,
)
from curricula.doc_sessions import DocsCorpus, is_docs_root
from curricula.function_calls import (
    Call,
    Corpus,
    ModuleRef,
    Skip,
    assemble,
    assertion_calls,
    called_function,
    capped,
    doctest_calls,
    driver_statements,
    is_test_file,
    module_name,
    uses_locals,
)
from curricula.journal import Journal, read_journal, record_units, traced_by
from curricula.licences import find_licence
from curricula.puzzles import PuzzleCorpus, puzzle_src
from curricula.shards import record_build

log = logging.getLogger("curricula.functions")
TASK = "codenet"  # the model reads these programs as it reads any whole program
ARTIFACTS = (
    "NameError",
    "ImportError",
    "ModuleNotFoundError",
    "UnboundLocalError",
)  # a definition the extraction missed
HUMANEVAL = os.path.normpath(
    os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "humaneval", "HumanEval.jsonl.gz"
    )
)
NGRAM = 5
OVERLAP = 0.5  # share of a HumanEval solution's token 5-grams that marks a near-duplicate
RANDOM = frozenset(
    {"random", "secrets", "uuid"}
)  # draws a trace shows but no reader can know (the sandbox's seed is fixed)
MAX_PER_FUNCTION = 8  # calls of one function: a function with 60 doctests does not fill the set
MAX_PER_MODULE = 300  # calls of one module in all: a bound on one journal unit's work


def _ngrams(source: str) -> set[tuple[str, ...]]:
    try:
        toks = [
            t.string
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type
            not in (
                tokenize.COMMENT,
                tokenize.NL,
                tokenize.NEWLINE,
                tokenize.INDENT,
                tokenize.DEDENT,
                tokenize.ENDMARKER,
                tokenize.STRING,
            )
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return set()
    return {tuple(toks[i : i + NGRAM]) for i in range(len(toks) - NGRAM + 1)}


class HumanEvalFilter:
    """Which programs are HumanEval problems: an entry point's name, or a definition that
    holds most of a canonical solution's token 5-grams (strings left out)."""

    def __init__(self, path: str | None) -> None:
        self.entry_points: set[str] = set()
        self.solutions: list[set] = []
        self.path = path if path and os.path.exists(path) else None
        if self.path is None:
            return
        with gzip.open(self.path, "rt", encoding="utf-8") if self.path.endswith(".gz") else open(self.path) as f:
            for line in f:
                if line.strip():
                    p = json.loads(line)
                    self.entry_points.add(p["entry_point"])
                    grams = _ngrams(p["prompt"] + p["canonical_solution"])
                    if len(grams) >= 8:
                        self.solutions.append(grams)

    def reason(self, function: str | None, program: str) -> str | None:
        if function in self.entry_points:
            return "entry_point"
        grams = _ngrams(program)
        if any(len(s & grams) >= OVERLAP * len(s) for s in self.solutions):
            return "ngram_overlap"
        return None


def _provenance(root: str) -> dict:
    """Corpus name, commit and licence of a folder (curricula/licences.py): the commit from
    its MANIFEST.md (the shared corpora's) or from git."""
    name = os.path.basename(os.path.abspath(root))
    parent = os.path.dirname(os.path.abspath(root))
    if not os.path.exists(os.path.join(root, "MANIFEST.md")) and os.path.exists(os.path.join(parent, "MANIFEST.md")):
        name = f"{os.path.basename(parent)}/{name}"  # a corpus's sub-folder: python-library-reference/library
    info = {"corpus": name, "commit": "", "license": ""}
    manifest = os.path.join(root, "MANIFEST.md")
    if os.path.exists(manifest):
        m = re.search(r"\b[0-9a-f]{40}\b", open(manifest, encoding="utf-8", errors="replace").read())
        info["commit"] = m.group(0) if m else ""
    if not info["commit"] and os.path.isdir(os.path.join(root, ".git")):
        head = open(os.path.join(root, ".git", "HEAD")).read().strip()
        ref = os.path.join(root, ".git", head[5:]) if head.startswith("ref: ") else None
        info["commit"] = open(ref).read().strip() if ref and os.path.exists(ref) else head
    info["license"], info["license_from"] = find_licence(root)
    return info


def _call_span(program: str) -> tuple[int, int]:
    """UTF-8 byte range of the program's last line (the printed call)."""
    data = program.encode("utf-8")
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    return start, len(data)


@dataclass
class _Unit:
    """One unit being traced: its corpus (an index into the roots), its path, the build's
    splits, and the rows and counts its programs add."""

    ci: int
    relpath: str
    splits: dict[str, str]
    counts: Counter = field(default_factory=Counter)
    rows: list[dict] = field(default_factory=list)


class _Origin(NamedTuple):
    """What an original program and its variants share: the corpus, the call that drives
    them, the original's row id (each variant's `source_id`), its split group and split."""

    ci: int
    call: Call
    rid: str
    group: str
    split: str


class FunctionsBuilder:
    BUILD = "functions"  # the build's name in its manifest: a resume of another kind is refused

    def __init__(
        self,
        roots: list[str],
        out: str,
        mutants: int = 8,
        input_mutants: int = 4,
        setup: BuildSetup | None = None,
        humaneval: str | None = HUMANEVAL,
        lineage: bool = False,
        licence: str | None = None,
    ) -> None:
        self.roots, self.out = list(roots), out
        self.n_mutants, self.n_inputs, self.setup = mutants, input_mutants, setup or BuildSetup()
        run = self.setup
        self.workers, self.shard, self.seed, self.limit = run.workers, run.shard, run.seed, run.limit
        self.timeout, self.max_steps = run.timeout, run.max_steps
        self.filter = HumanEvalFilter(humaneval)
        self.lineage = lineage
        self.corpora = [_corpus(r) for r in self.roots]
        self.provenance = [_provenance(r) for r in self.roots]
        unlicensed = [r for r, p in zip(self.roots, self.provenance) if not p["license"]]
        if unlicensed and not licence:
            from codeexecutor.errors import UsageError

            raise UsageError(
                f"no licence found for {', '.join(unlicensed)} (no LICENSE, COPYING, PKG-INFO or dist-info "
                "METADATA in it or up to three folders above): pass --licence NAME if its licence lets you "
                "train on it"
            )
        for p in self.provenance:
            if not p["license"]:
                p["license"], p["license_from"] = licence, "--licence"
        self.counts: Counter = Counter()

    def build_options(self) -> dict:
        """What a subclass adds to the options its manifest records (and a resume must match)."""
        return {}

    # -- which modules, which split ---------------------------------------------------------
    def units(self) -> list[tuple[int, str]]:
        return [(i, p) for i, c in enumerate(self.corpora) for p in c.files]

    def module_key(self, ci: int, path: str) -> str:
        """A module's split group: its corpus and path; with `lineage` (the roots are versions
        of one repository: snapshots of its history) its path alone, so that every version of
        a module lands in the same split and none leaks a held-out module into training."""
        return path if self.lineage else f"{self.provenance[ci]['corpus']}/{path}"

    def group(self, ci: int, call: Call, mod) -> str:
        """The module a call belongs to: its own, or for a test the module defining the called function."""
        corpus = self.corpora[ci]
        if call.origin == "test":
            name = called_function(call)
            found = corpus.definition(mod, name) if name else None
            if found is not None and not isinstance(found[1], ModuleRef):
                return self.module_key(ci, found[0].path)
        return self.module_key(ci, call.path)

    def splits(self) -> dict[str, str]:
        groups = [
            self.module_key(ci, p)
            for ci, p in self.units()
            if isinstance(self.corpora[ci], Corpus) and not is_test_file(p)
        ]
        groups += [
            self.module_key(ci, g) for ci, c in enumerate(self.corpora) if not isinstance(c, Corpus) for g in c.groups()
        ]
        return assign_splits(groups, test_pct=8, valid_pct=5)

    # -- one module ---------------------------------------------------------------------------
    def process(self, pool, ci: int, relpath: str, splits: dict[str, str]) -> tuple[list[dict], Counter]:
        if not isinstance(self.corpora[ci], Corpus):
            return self.process_programs(pool, ci, relpath, splits)
        unit = _Unit(ci, relpath, splits)
        for call, program, group in self.call_programs(ci, relpath, unit.counts):
            self.trace(pool, unit, call, program, group)
        return unit.rows, unit.counts

    def call_programs(self, ci: int, relpath: str, counts: Counter, max_lines: int = 120):
        """(call, program, split group) of each call a module of a Corpus root makes into a
        program of at most `max_lines` lines."""
        corpus = self.corpora[ci]
        mod = corpus.parse(relpath)
        if mod is None:
            counts[f"skip_module:{corpus.unparsed.get(relpath, 'not_python3_or_not_utf8')}"] += 1
            return
        calls = assertion_calls(mod) if is_test_file(relpath) else doctest_calls(mod)
        counts["calls_found"] += len(calls)
        calls = capped(calls, MAX_PER_FUNCTION, MAX_PER_MODULE, counts)
        for call in calls:
            try:
                if call.origin == "test" and uses_locals(corpus, mod, call):
                    raise Skip("test_call_uses_locals")
                program = assemble(corpus, mod, driver_statements(call), max_lines)
                group = self.group(ci, call, mod)
            except Skip as exc:
                counts[f"skip:{exc.reason}"] += 1
                continue
            except RecursionError:
                counts["skip:recursion_in_extraction"] += 1
                continue
            yield call, program, group

    def process_programs(self, pool, ci: int, relpath: str, splits: dict[str, str]) -> tuple[list[dict], Counter]:
        """One unit of a source that makes its own programs (documentation sessions, puzzles)."""
        unit = _Unit(ci, relpath, splits)
        for prog in self.corpora[ci].programs(relpath, unit.counts):
            unit.counts["calls_found"] += 1
            self.trace(pool, unit, prog.call, prog.code, self.module_key(ci, prog.group), prog.driver, prog.keep_driver)
        return unit.rows, unit.counts

    def trace(
        self,
        pool,
        unit: _Unit,
        call: Call,
        program: str,
        group: str,
        driver: int | None = None,
        keep_driver: bool = True,
    ) -> None:
        """Filters, traces and mutates one program of `unit`; its rows and its fate go to the
        unit's. `driver`: the byte where the inputs start (default: the last line, the printed call)."""
        counts, rows = unit.counts, unit.rows
        split = unit.splits.get(group)
        if split is None:
            counts["skip:test_of_no_module"] += 1
            return
        try:
            drawn = _imports(program) & RANDOM
        except (SyntaxError, ValueError):  # an assembly the extraction got wrong: never run
            counts["skip:program_does_not_parse"] += 1
            return
        if drawn:
            counts[f"skip:random:{min(drawn)}"] += 1
            return
        reason = self.filter.reason(called_function(call), program)
        if reason is not None:
            counts[f"humaneval:{reason}"] += 1
            return
        first, second = pool.execute(program), pool.execute(program)
        status = first.status.value
        if (first.stdout, status) != (second.stdout, second.status.value):
            counts["skip:nondeterministic"] += 1
            return
        if first.error is not None and first.error.type in ARTIFACTS:
            counts[f"skip:original:{first.error.type}"] += 1
            return
        if status != "ok" and not is_error_trace(first):
            counts[f"skip:original:{status}"] += 1
            return
        counts["programs_used"] += 1
        counts[f"original:{status}"] += 1
        if status != "ok":
            counts[f"original_crash:{first.error.type}"] += 1
        origin = _Origin(
            unit.ci, call, f"{self.provenance[unit.ci]['corpus']}:{unit.relpath}:{call.line}", group, split
        )
        rows.append(self._row(origin, origin.rid, program, first, "original", ()))
        start = _call_span(program)[0] if driver is None else driver
        for k, (code, kind, operators) in enumerate(self.variants(program, start, keep_driver, counts)):
            result = run_to_its_end(pool, code) if kind == "bug" else pool.execute(code)
            counts[f"{kind}:{result.status.value}"] += 1
            if kind == "bug":  # how each bug class ended, as the contest programs' build counts it
                counts[f"bug_class:{operators[0]}:{ending(result)}"] += 1
            if kind != "bug" and result.error is not None and result.error.type in ARTIFACTS:
                continue  # a bug's NameError is the bug (a misspelt name, a removed import), not the extraction
            if result.status.value == "ok" or is_error_trace(result):
                rows.append(self._row(origin, f"{origin.rid}_m{k:02d}", code, result, kind, operators))

    def variants(self, program: str, start: int, keep_driver: bool, counts: Counter) -> list[tuple[str, str, tuple]]:
        """(code, kind, operators) of the program's variants: mutants of its definitions (the
        call from byte `start` on kept where `keep_driver`) and new literal arguments."""
        from mutation import MutationError, mutate

        size = len(program.encode("utf-8"))
        out = []
        try:
            protected = ((start, size),) if keep_driver else ()
            out += [
                (m.code, "mutant", m.operators)
                for m in mutate(program, n=self.n_mutants, seed=self.seed, protected=protected)
            ]
            if self.n_inputs:
                inputs = mutate(
                    program,
                    n=self.n_inputs,
                    seed=self.seed,
                    operators=["CRP"],
                    protected=((0, start),) if start else (),
                )
                out += [(m.code, "input", m.operators) for m in inputs]
        except MutationError:
            counts["skip:mutation_parse"] += 1
        return out

    def _row(self, origin: _Origin, rid: str, code: str, result, kind: str, operators) -> dict:
        call = origin.call
        row = make_example(
            RowKey(rid, origin.group, origin.split, TASK, origin.rid), code, result, kind, tuple(operators)
        )
        prov = self.provenance[origin.ci]
        row["provenance"] = json.dumps(
            {
                "corpus": prov["corpus"],
                "path": call.path,
                "line": call.line,
                "commit": prov["commit"],
                "origin": call.origin,
            }
        )
        row["license"] = prov["license"]
        row["_set"] = "functions_errors" if result.status.value != "ok" else "functions"
        return row

    # -- the whole build -------------------------------------------------------------------------
    def run(self, progress: bool = True) -> dict:
        from codeexecutor.execution import ExecutorPool, Limits

        log_to_build_folder(self.out)
        units = self.units()
        splits = self.splits()
        index, count = self.shard
        mine = [u for i, u in enumerate(units) if i % count == index]
        if self.limit is not None:
            mine = mine[: self.limit]
        key = lambda u: f"{self.provenance[u[0]]['corpus']}/{u[1]}"  # noqa: E731
        options = {
            "mutants": self.n_mutants,
            "input_mutants": self.n_inputs,
            "seed": self.seed,
            "timeout": self.timeout,
            "max_steps": self.max_steps,
            "lineage": self.lineage,
            "humaneval": os.path.basename(self.filter.path) if self.filter.path else None,
            **self.build_options(),
        }
        record_build(self.out, self.BUILD, self.shard, options, self.roots, len(mine))
        journal = Journal(os.path.join(self.out, "journal.jsonl"))
        journal.check_python()
        todo = [u for u in mine if key(u) not in journal.done]
        log.info(
            "functions: %d modules in %s, shard %d/%d has %d, %d already done, %d to do; HumanEval filter: %s",
            len(units),
            ", ".join(self.roots),
            index,
            count,
            len(mine),
            len(mine) - len(todo),
            len(todo),
            self.filter.path or "none (no HumanEval file)",
        )
        if len(mine) != len(todo):
            print(f"resuming: {len(mine) - len(todo)} of {len(mine)} modules already done")
        start = time.perf_counter()
        limits = Limits(timeout=self.timeout, max_steps=self.max_steps)
        with ExecutorPool(self.workers, limits) as pool, cf.ThreadPoolExecutor(self.workers + 1) as threads:

            def task(unit):
                rows, counts = self.process(pool, unit[0], unit[1], splits)
                return key(unit), rows, {"counts": dict(counts)}

            self.counts.update(
                record_units(
                    journal,
                    threads.map(task, todo),
                    len(mine),
                    len(mine) - len(todo),
                    "functions",
                    "module",
                    progress,
                    log,
                )
            )
        return self.finalize(time.perf_counter() - start, len(mine))

    def finalize(self, seconds: float, modules: int) -> dict:
        return finalize(
            self.out,
            seconds,
            modules,
            {
                "sources": [{**p, "root": r} for p, r in zip(self.provenance, self.roots)],
                "humaneval_filter": self.filter.path,
            },
        )


def finalize(out: str, seconds: float, modules: int, meta: dict) -> dict:
    """The datasets and stats.json of a functions build folder, from its journal, with memory
    bounded by the distinct programs, not the rows: a first pass finds, for each normalised
    program, the copy that stays (a copy in a held-out split wins, then the smallest id), a
    second writes those records (`save_journal_datasets`); clean runs and crashes apart."""
    journal = os.path.join(out, "journal.jsonl")
    counts: Counter = Counter()
    names = sorted((s["corpus"] for s in meta.get("sources", [])), key=len, reverse=True)
    per_source: dict[str, Counter] = {}
    order = ("test", "valid", "train")  # a copy in a held-out split wins
    rank = {split: i for i, split in enumerate(order)}
    best: dict[bytes, tuple[int, str, int, str, str, str]] = {}  # digest -> split rank, id, ordinal, group, source, set
    ordinal = -1
    for kind, obj in read_journal(journal):
        if kind == "done":
            counts.update(obj.get("counts", {}))
            unit = obj.get("_done", "")
            source = next((n for n in names if unit.startswith(n + "/")), unit.split("/")[0])
            per_source.setdefault(source, Counter()).update(
                {
                    k: v
                    for k, v in obj.get("counts", {}).items()
                    if k in _PER_SOURCE or k.startswith(("skip", "humaneval"))
                }
            )
            continue
        ordinal += 1
        digest = hashlib.blake2b(_normalized(obj["code"]).encode(), digest_size=16).digest()
        mine = (rank[obj["split"]], obj["id"], ordinal, obj["problem_id"], obj["id"].split(":")[0], obj["_set"])
        other = best.get(digest)
        if other is None:
            best[digest] = mine
            continue
        loser = max(other, mine)
        counts[f"dedup:dropped_{order[loser[0]]}"] += 1
        best[digest] = min(other, mine)
    keep = {v[2] for v in best.values()}
    groups = {split: len({v[3] for v in best.values() if v[0] == r}) for split, r in rank.items()}
    for v in best.values():
        per_source.setdefault(v[4], Counter())[
            "rows_kept_crashing" if v[5] == "functions_errors" else "rows_kept_clean"
        ] += 1
    del best
    sizes = save_journal_datasets(
        journal, out, ("functions", "functions_errors"), extra=("provenance", "license"), keep=keep
    )
    stats = {
        "python": traced_by(journal),
        "modules": modules,
        "counts": dict(sorted(counts.items())),
        "datasets": sizes,
        "modules_per_split": groups,
        "per_source": {k: dict(sorted(v.items())) for k, v in sorted(per_source.items())},
        **meta,
        "seconds_this_run": round(seconds, 1),
    }
    write_json(os.path.join(out, "stats.json"), stats, ensure_ascii=False)
    log.info("functions done: %s", sizes)
    return stats


_PER_SOURCE = (
    "calls_found",
    "programs_used",
    "original:ok",
    "original:error",
)  # with every skip: the per-source report


def _corpus(root: str):
    """The reader of a `--from` folder: a puzzle-generator tree, reST documentation, or
    Python modules (a package, a collection, an unpacked sdist, site-packages' folder)."""
    if puzzle_src(root) is not None:
        return PuzzleCorpus(root)
    if is_docs_root(root):
        return DocsCorpus(root)
    return Corpus(root)


def _imports(program: str) -> set[str]:
    """Top-level names of the modules a program imports."""
    names = set()
    for node in ast.walk(ast.parse(program)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _normalized(code: str) -> str:
    try:
        return ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError):
        return code


__all__ = ["FunctionsBuilder", "HumanEvalFilter", "finalize", "module_name"]
