"""CodeNetMut: mutants of CodeNet Python submissions, executed on their sample inputs.

Reads Project CodeNet's directory layout:

    data/pXXXXX/Python/sXXXXXXXXX.py                      submissions
    metadata/pXXXXX.csv                                   status per submission (optional)
    derived/input_output/data/pXXXXX/input.txt            CodeNet's one sample input, or
    derived/input_output/data/pXXXXX/input_K.txt          several samples (K = 0, 1, ...)

For each submission of one or more corpora in that layout (in a fixed order; `--shard I/N`
takes every N-th from I): keep Python 3 programs that parse and (where metadata says)
were accepted; inline the first sample input; trace the inlined program (must end `ok`
within 1 s and 1024 steps). Problems are split train/valid/test by a stable hash. Every
program contributes its original (kind `original`) and its mutants (n attempts,
deduplicated, executed: `ok` ones become examples, crashing ones go to the separate
error-trace set), so that valid/test hold mutants of held-out problems beside their
originals, reported apart by `evaluate` (`--no-heldout-mutants`: originals only there;
train problems give only mutants, as the paper's). The outputs of several `--shard`
builds merge into one dataset (`merge_shards`, `codeexecutor build merge`).

Work is journaled per program (curricula/journal.py): `kill -9` and the same command
again continues where it stopped, losing and duplicating nothing. At the end the
journal becomes two Hugging Face datasets, `codenetmut/` and `errors/`, plus `stats.json`.
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import glob
import json
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass

from codeexecutor.atomic import write_json
from curricula.common import (
    BuildSetup,
    RowKey,
    assign_splits,
    is_error_trace,
    log_to_build_folder,
    make_example,
    save_journal_datasets,
)
from curricula.journal import Journal, read_journal, record_units, traced_by
from curricula.shards import check_shards, record_build

log = logging.getLogger("curricula.codenet")
TASK = "codenet"


@dataclass(frozen=True)
class Submission:
    problem_id: str
    submission_id: str
    path: str
    status: str | None  # from metadata, when present


def read_layout(root: str) -> tuple[list[Submission], dict[str, list[str]]]:
    """All Python submissions (sorted) and each problem's sample input files (sorted)."""
    if not os.path.isdir(os.path.join(root, "data")):
        from codeexecutor.errors import UsageError

        raise UsageError(
            f"{root} does not look like Project CodeNet: no data/ folder (expected data/pXXXXX/Python/sXXXXXXXXX.py)"
        )
    statuses: dict[str, str] = {}
    for meta in glob.glob(os.path.join(root, "metadata", "p*.csv")):
        with open(meta, newline="") as f:
            for row in csv.DictReader(f):
                if row.get("language", "Python") == "Python":
                    statuses[row["submission_id"]] = row.get("status", "")
    subs = []
    for path in sorted(glob.glob(os.path.join(root, "data", "p*", "Python", "*.py"))):
        pid = path.split(os.sep)[-3]
        sid = os.path.basename(path)[:-3]
        subs.append(Submission(pid, sid, path, statuses.get(sid)))
    inputs: dict[str, list[str]] = {}
    io_root = os.path.join(root, "derived", "input_output", "data")
    for pid in {s.problem_id for s in subs}:
        files = sorted(glob.glob(os.path.join(io_root, pid, "input*.txt")))
        inputs[pid] = files
    return subs, inputs


def _read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


def read_source(path: str) -> str | None:
    with open(path, "rb") as f:
        data = f.read()
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def read_layouts(roots: list[str]) -> tuple[list[Submission], dict[str, list[str]]]:
    """`read_layout` over several CodeNet-layout corpora, in the order given (a problem's
    input files are taken from the first corpus that has them)."""
    subs: list[Submission] = []
    inputs: dict[str, list[str]] = {}
    seen: set[str] = set()
    for root in roots:
        more, files = read_layout(root)
        for sub in more:
            if sub.submission_id not in seen:  # the same submission in two corpora counts once
                seen.add(sub.submission_id)
                subs.append(sub)
        for pid, paths in files.items():
            if paths and not inputs.get(pid):
                inputs[pid] = paths
            inputs.setdefault(pid, paths)
    return subs, inputs


class CodeNetBuilder:
    KIND = "codenetmut"  # the build's name in its record and log
    SETS = ("codenetmut", "errors")  # the datasets a build writes, by a row's `_set`

    def __init__(
        self,
        codenet: str | list[str],
        out: str,
        mutants: int = 20,
        setup: BuildSetup | None = None,
        accepted_only: bool = True,
        heldout_mutants: bool = True,
    ) -> None:
        self.codenet = [codenet] if isinstance(codenet, str) else list(codenet)
        self.out, self.n_mutants, self.setup = out, mutants, setup or BuildSetup()
        self.heldout_mutants, self.accepted_only = heldout_mutants, accepted_only
        run = self.setup
        self.workers, self.shard, self.seed, self.limit = run.workers, run.shard, run.seed, run.limit
        self.timeout, self.max_steps = run.timeout, run.max_steps
        self.counts: Counter = Counter()

    def build_options(self) -> dict:
        """What a subclass adds to the options its record keeps (and a resume must match)."""
        return {}

    # -- one program ------------------------------------------------------------------
    def process(self, pool, sub: Submission, split: str, stdin_path: str | None) -> tuple[list[dict], Counter, Counter]:
        from mutation import MutationError, mutate

        counts, op_status = Counter(), Counter()
        rows: list[dict] = []
        inlined = self.inlined(pool, sub, stdin_path, counts)
        if inlined is None:
            return rows, counts, op_status
        code = inlined.source
        original = pool.execute(code)
        if original.status.value != "ok":
            counts[f"skip:original:{original.status.value}"] += 1
            if split != "train" and is_error_trace(original):
                rows.append(self._row(sub, split, code, original, "original", (), error=True))
            return rows, counts, op_status
        if len(code.splitlines()) > 200:
            counts["skip:too_many_lines"] += 1
            return rows, counts, op_status
        counts["programs_used"] += 1
        if split != "train":  # held-out problems: the original, and its mutants (reported apart by `kind`)
            rows.append(self._row(sub, split, code, original, "original", ()))
            counts["examples"] += 1
            if not self.heldout_mutants:
                return rows, counts, op_status
        try:
            mutants = mutate(code, n=self.n_mutants, seed=self.seed, protected=inlined.literal_spans)
        except MutationError:
            counts["skip:mutation_parse"] += 1
            return rows, counts, op_status
        counts["mutants"] += len(mutants)
        for k, m in enumerate(mutants):
            result = pool.execute(m.code)
            status = result.status.value
            counts[f"mutant:{status}"] += 1
            for op in set(m.operators):
                op_status[f"{op}:{status}"] += 1
            if status == "ok":
                rows.append(self._row(sub, split, m.code, result, "mutant", m.operators, k))
                counts["examples"] += 1
            elif is_error_trace(result):
                rows.append(self._row(sub, split, m.code, result, "mutant", m.operators, k, error=True))
                counts["error_examples"] += 1
        return rows, counts, op_status

    def inlined(self, pool, sub: Submission, stdin_path: str | None, counts: Counter):
        """The submission with its first sample input inlined (execution/inline.py), or
        None with the reason counted: not UTF-8, not Python 3, not accepted, not inlinable."""
        from codeexecutor.execution.inline import InlineError, inline_stdin
        from codeexecutor.source import newer_python

        source = read_source(sub.path)
        if source is None:
            counts["skip:binary_or_not_utf8"] += 1
            return None
        try:
            compile(source, sub.submission_id, "exec", dont_inherit=True)
        except SyntaxError as exc:  # written for a newer interpreter, or not Python 3 at all
            counts["skip:newer_python" if newer_python(source, exc) else "skip:not_python3"] += 1
            return None
        except ValueError:
            counts["skip:not_python3"] += 1
            return None
        if self.accepted_only and sub.status is not None and sub.status != "Accepted":
            counts["skip:not_accepted"] += 1
            return None
        stdin = _read_text(stdin_path) if stdin_path else ""
        try:
            return inline_stdin(source, stdin, pool=pool)
        except InlineError as exc:
            counts[f"skip:inline:{exc.reason}"] += 1
            return None

    def _row(self, sub, split, code, result, kind, operators, k=None, error=False) -> dict:
        rid = sub.submission_id if k is None else f"{sub.submission_id}_m{k:02d}"
        row = make_example(
            RowKey(rid, sub.problem_id, split, TASK, sub.submission_id), code, result, kind, tuple(operators)
        )
        row["_set"] = "errors" if error else "codenetmut"
        return row

    # -- the whole build ---------------------------------------------------------------------
    def run(self, progress: bool = True) -> dict:
        from codeexecutor.execution import ExecutorPool, Limits

        log_to_build_folder(self.out)
        subs, inputs = read_layouts(self.codenet)
        splits = assign_splits(s.problem_id for s in subs)
        index, count = self.shard
        mine = [s for i, s in enumerate(subs) if i % count == index]
        if self.limit is not None:
            mine = mine[: self.limit]
        options = {
            "mutants": self.n_mutants,
            "seed": self.seed,
            "timeout": self.timeout,
            "max_steps": self.max_steps,
            "all_statuses": not self.accepted_only,
            "no_heldout_mutants": not self.heldout_mutants,
            **self.build_options(),
        }
        record_build(self.out, self.KIND, self.shard, options, self.codenet, len(mine))
        journal = Journal(os.path.join(self.out, "journal.jsonl"))
        journal.check_python()
        todo = [s for s in mine if s.submission_id not in journal.done]
        log.info(
            "%s: %d submissions in %s, shard %d/%d has %d, %d already done (%d records kept), %d to do",
            self.KIND,
            len(subs),
            ", ".join(self.codenet),
            index,
            count,
            len(mine),
            len(mine) - len(todo),
            journal.records_kept,
            len(todo),
        )
        if len(mine) != len(todo):
            print(f"resuming: {len(mine) - len(todo)} of {len(mine)} programs already done")
        start = time.perf_counter()
        limits = Limits(timeout=self.timeout, max_steps=self.max_steps)
        with (
            ExecutorPool(self.workers, limits, prestart=("numpy",)) as pool,
            cf.ThreadPoolExecutor(self.workers + 1) as threads,
        ):

            def task(sub):
                files = inputs.get(sub.problem_id) or [None]
                rows, counts, op_status = self.process(pool, sub, splits[sub.problem_id], files[0])
                return sub.submission_id, rows, {"counts": dict(counts), "ops": dict(op_status)}

            self.counts.update(
                record_units(
                    journal,
                    threads.map(task, todo),
                    len(mine),
                    len(mine) - len(todo),
                    self.KIND,
                    "prog",
                    progress,
                    log,
                )
            )
        return self.finalize(time.perf_counter() - start, len(mine))

    def finalize(self, seconds: float, programs: int) -> dict:
        journal = os.path.join(self.out, "journal.jsonl")
        counts, ops = Counter(), Counter()
        for kind, obj in read_journal(journal):
            if kind == "done":
                counts.update(obj.get("counts", {}))
                ops.update(obj.get("ops", {}))
        sizes = save_journal_datasets(journal, self.out, self.SETS)  # streamed: memory flat in the rows
        per_op: dict[str, dict[str, int]] = {}
        for key, n in ops.items():
            op, status = key.split(":", 1)
            per_op.setdefault(op, {})[status] = n
        stats = {
            "python": traced_by(os.path.join(self.out, "journal.jsonl")),  # the interpreter that traced it
            "programs": programs,
            "counts": dict(sorted(counts.items())),
            "datasets": sizes,
            "per_operator_status": per_op,
            "seconds_this_run": round(seconds, 1),
            "mutants_executed_this_run": sum(v for k, v in self.counts.items() if k.startswith("mutant:")),
            "mutants_executed_per_s_this_run": round(
                sum(v for k, v in self.counts.items() if k.startswith("mutant:")) / max(seconds, 1e-9), 1
            ),
        }
        write_json(os.path.join(self.out, "stats.json"), stats, ensure_ascii=False)
        log.info("%s done: %s", self.KIND, stats["datasets"])
        return stats


def merge_shards(out: str, shards: list[str], partial: bool = False) -> dict:
    """One dataset from the outputs of `--shard I/N` builds (one per SLURM array task):
    their journals' complete units, concatenated into OUT's journal (a unit already there
    is kept once: a merge killed midway is run again and goes on), then the datasets
    written as a single build writes them. The shards must make one whole build
    (`shards.check_shards`); `partial` merges the finished units of those given."""
    from codeexecutor.errors import UsageError

    journals = [os.path.join(d, "journal.jsonl") for d in shards]
    missing = [j for j in journals if not os.path.isfile(j)]
    if missing:
        raise UsageError(
            f"not a shard build folder (no journal.jsonl): {', '.join(os.path.dirname(m) for m in missing)}"
        )
    traced = {d: traced_by(j) for d, j in zip(shards, journals)}
    if len(set(traced.values())) > 1:
        named = "; ".join(f"{d}: Python {v}" for d, v in traced.items())
        raise UsageError(
            f"the shards were traced by different interpreters ({named}): build every shard with one Python"
        )
    check_shards(shards, partial)
    os.makedirs(out, exist_ok=True)
    programs, functions = 0, False
    with Journal(os.path.join(out, "journal.jsonl")) as merged:
        if merged.pythons and merged.pythons != set(traced.values()):
            raise UsageError(
                f"{out} already holds units traced by Python {', '.join(sorted(merged.pythons))} and the shards "
                f"were traced by Python {next(iter(traced.values()))}: merge into a new folder"
            )
        for path in journals:
            records: list[dict] = []
            for kind, obj in read_journal(path):
                if kind == "record":
                    records.append(obj)
                    functions = functions or obj.get("_set", "").startswith("functions")
                    continue
                unit = obj.pop("_done")
                programs += 1
                if unit not in merged.done:
                    merged.write_unit(unit, records, obj, sync=False)
                records = []
            merged.sync()  # a shard's units are committed together
    if functions:  # shards of `build functions`
        from curricula.functions import finalize

        meta = {}
        for d in shards:
            if os.path.isfile(os.path.join(d, "stats.json")):
                with open(os.path.join(d, "stats.json")) as f:
                    stats = json.load(f)
                meta = {k: stats[k] for k in ("sources", "humaneval_filter") if k in stats}
                break
        return finalize(out, 0.0, programs, meta)
    return CodeNetBuilder(shards, out).finalize(0.0, programs)


def shard_arg(text: str) -> tuple[int, int]:
    from codeexecutor.errors import UsageError

    try:
        i, n = (int(x) for x in text.split("/"))
        if not 0 <= i < n:
            raise ValueError
    except ValueError as exc:
        raise UsageError(f"--shard wants I/N with 0 <= I < N (e.g. 0/4), got {text!r}") from exc
    return i, n
