"""`codeexecutor build values`: value-use events of real runs, the data guided execution learns from.

Each program of the shared corpora is run in the sandbox with its reads recorded
(codeexecutor/execution/value_record.py): the function-call programs of packages and
collections (their doctests and tests, assembled as `build functions` assembles them),
the documentation's sessions, and contest programs on their first sample input. Each
read of a name, an attribute or a call's result becomes an event

    {name, use, kind, literal, before, after, package, corpus}

(`before`/`after`: the code around the use, as guided execution shows a predictor).
Events are deduplicated as LExecutor does (one per distinct name, use, context and
kind) and split by *package*: a package's events are all in one split. `--test` and
`--valid` name the packages held out; everything else trains. The build journals each
finished module or problem and resumes after a kill; `stats.json` and a card
(README.md) give the counts per split, kind and use, and each corpus's licence.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from codeexecutor.atomic import replacing, write_json, write_text
from codeexecutor.execution.guided import context
from curricula.journal import Journal, read_journal, record_units

log = logging.getLogger("curricula.values")
TEST_PACKAGES = ("attrs", "marshmallow", "packaging", "requests", "tomlkit")
VALID_PACKAGES = ("glom", "humanize", "natsort", "semver", "tabulate")
MAX_EVENTS_PER_PROGRAM = 60
MAX_LINES = 600  # a call program's length: a trace model's bound, not this build's


def package_of(corpus: str, relpath: str) -> str:
    """A source's package: a PyPI folder's name without its version; a collection's top folder."""
    base = corpus.split("/")[0]
    head, _, version = base.rpartition("-")
    if head and version[:1].isdigit():
        return head
    top = relpath.split("/")[0] if "/" in relpath else relpath
    return f"{base}/{top}"


def events_of(source: str, result, package: str, corpus: str) -> list[dict]:
    """A recorded run's events, each with its context."""
    sites = (result.fill or {}).get("sites") or []
    rows, seen = [], set()
    for site, kind, literal in result.values or ():
        line, col, end_line, end_col, use, name = sites[site]
        before, after = context(source, line, col, end_col if end_line == line else col + len(name))
        key = (name, use, before, after, kind)
        if key in seen:
            continue
        seen.add(key)
        rows.append(
            {
                "name": name,
                "use": use,
                "kind": kind,
                "literal": literal,
                "before": before,
                "after": after,
                "package": package,
                "corpus": corpus,
            }
        )
        if len(rows) >= MAX_EVENTS_PER_PROGRAM:
            break
    return rows


class ValuesBuilder:
    def __init__(
        self,
        roots: list[str],
        codenet: list[str],
        out: str,
        test: tuple[str, ...] = TEST_PACKAGES,
        valid: tuple[str, ...] = VALID_PACKAGES,
        workers: int = 2,
        limit: int | None = None,
    ) -> None:
        from curricula.common import BuildSetup
        from curricula.functions import FunctionsBuilder

        setup = BuildSetup(workers=workers)
        self.functions = FunctionsBuilder(roots, out, setup=setup, humaneval=None) if roots else None
        self.codenet, self.out, self.workers, self.limit = codenet, out, workers, limit
        self.test, self.valid = tuple(test), tuple(valid)
        self.counts: Counter = Counter()

    def units(self) -> list[tuple]:
        units: list[tuple] = []
        if self.functions is not None:
            units += [("module", ci, p) for ci, p in self.functions.units()]
        if self.codenet:
            from curricula.codenet import read_layouts

            subs, inputs = read_layouts(self.codenet)
            by_problem: dict[str, list] = {}
            for sub in subs:
                by_problem.setdefault(sub.problem_id, []).append(sub)
            units += [("problem", pid, (by_problem[pid], inputs.get(pid) or [])) for pid in sorted(by_problem)]
        return units[: self.limit] if self.limit else units

    def programs(self, unit: tuple, counts: Counter) -> list[tuple[str, str, str, str]]:
        """(source, stdin, package, corpus) of each program of a unit."""
        if unit[0] == "problem":
            from curricula.codenet import read_source

            subs, inputs = unit[2]
            stdin = open(inputs[0]).read() if inputs else ""
            sources = [read_source(s.path) for s in subs]
            return [(s, stdin, f"contest/{unit[1]}", "contest") for s in sources if s]
        _, ci, relpath = unit
        fb = self.functions
        corpus_name = fb.provenance[ci]["corpus"]
        package = package_of(corpus_name, relpath)
        corpus = fb.corpora[ci]
        from curricula.function_calls import Corpus

        if isinstance(corpus, Corpus):
            made = [p for _, p, _ in fb.call_programs(ci, relpath, counts, MAX_LINES)]
        else:
            made = [prog.code for prog in corpus.programs(relpath, counts)]
        return [(p, "", package, corpus_name) for p in made]

    def unit_name(self, unit: tuple) -> str:
        return (
            f"problem:{unit[1]}"
            if unit[0] == "problem"
            else f"{self.functions.provenance[unit[1]]['corpus']}:{unit[2]}"
        )

    def run(self, progress: bool = True) -> dict:
        from codeexecutor.execution import ExecutorPool, Limits

        os.makedirs(self.out, exist_ok=True)
        started = time.monotonic()
        units = self.units()
        limits = Limits(timeout=1.0, max_steps=2048)
        journal = Journal(os.path.join(self.out, "events.journal"))
        todo = [u for u in units if self.unit_name(u) not in journal.done]
        with ExecutorPool(self.workers) as pool, ThreadPoolExecutor(self.workers) as threads:

            def results():
                for unit in todo:
                    counts: Counter = Counter()
                    programs = self.programs(unit, counts)

                    def run_one(item, counts=counts):
                        source, stdin, package, corpus = item
                        result = pool.execute(source, stdin, limits, record_values=True)
                        counts[f"status:{result.status.value}"] += 1
                        return events_of(source, result, package, corpus)

                    rows = [row for events in threads.map(run_one, programs) for row in events]
                    counts["programs"] += len(programs)
                    yield self.unit_name(unit), rows, {"counts": dict(counts)}

            record_units(journal, results(), len(units), len(units) - len(todo), "values", "unit", progress, log)
        return self.finalize(time.monotonic() - started)

    def finalize(self, seconds: float) -> dict:
        splits: dict[str, dict] = {"train": {}, "valid": {}, "test": {}}
        counts: Counter = Counter()
        for kind, record in read_journal(os.path.join(self.out, "events.journal")):
            if kind == "done":
                counts.update(record.get("counts", {}))
                continue
            pkg = record["package"]
            split = "test" if pkg in self.test else "valid" if pkg in self.valid else "train"
            key = (record["name"], record["use"], record["before"], record["after"], record["kind"])
            splits[split].setdefault(key, record)
        stats = {"seconds": round(seconds, 1), "runs": dict(counts), "splits": {}}
        for split, rows in splits.items():
            path = os.path.join(self.out, f"{split}.jsonl.gz")
            with replacing(path) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as f:
                for row in rows.values():
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
            stats["splits"][split] = {
                "events": len(rows),
                "packages": len({r["package"] for r in rows.values()}),
                "kinds": dict(Counter(r["kind"] for r in rows.values()).most_common()),
                "uses": dict(Counter(r["use"] for r in rows.values())),
            }
        stats["test_packages"], stats["valid_packages"] = list(self.test), list(self.valid)
        stats["licences"] = {}
        if self.functions is not None:
            stats["licences"] = {p["corpus"]: p["license"] for p in self.functions.provenance}
        if self.codenet:
            stats["licences"]["contest"] = "per program, permissive (the corpus's MANIFEST.md)"
        write_json(os.path.join(self.out, "stats.json"), stats, ensure_ascii=False)
        _write_card(self.out, stats)
        return stats


def _write_card(out: str, stats: dict) -> None:
    lines = [
        "# Value-use events (`codeexecutor build values`)",
        "",
        "Reads of names, attributes and call results on real runs, each with the kind of its value",
        "and the code around it; deduplicated, split by package (curricula/values.py).",
        "",
        "| split | events | packages | top kinds |",
        "|---|---|---|---|",
    ]
    for split, s in stats["splits"].items():
        top = ", ".join(f"{k} {v}" for k, v in list(s["kinds"].items())[:6])
        lines.append(f"| {split} | {s['events']:,} | {s['packages']} | {top} |")
    lines += [
        "",
        f"Held out: test {', '.join(stats['test_packages'])}; valid {', '.join(stats['valid_packages'])}.",
        "",
    ]
    lines += ["| corpus | licence |", "|---|---|"] + [
        f"| {c} | {lic} |" for c, lic in stats.get("licences", {}).items()
    ]
    write_text(os.path.join(out, "README.md"), "\n".join(lines) + "\n")
