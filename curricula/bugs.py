"""The errors set of realistic bugs: contest programs with one mistake each, run on their input.

For each submission of CodeNet-layout corpora (every status: a submission that failed
with a runtime error on its sample input is a real crash): inline its first sample input
(execution/inline.py), run it, and keep it (kind `original`); then make up to `per_bug`
variants for each bug class of mutation/bugs.py (kind `bug`, the class in `operators`)
and run each. A variant that crashes is a crash example, with its type and line; one that
ends `ok` is kept as a clean program that had a bug put in and survived it; timeouts and
other endings are counted and dropped. Problems split train/valid/test by the same
stable hash as CodeNetMut, so a problem's programs are never on both sides.

The rows are CodeNetMut's (curricula/common.py make_example) in one dataset, `bugs/`;
`stats.json` counts how each crash came about (`per_operator_status`: bug class ->
ending and exception type) and sets the build's mix of exception types beside Bieber et
al.'s CodeNet runtime errors (`class_mix`). Journaled and resumable as CodeNetMut.
"""

from __future__ import annotations

import os
from collections import Counter

from codeexecutor.atomic import write_json
from curricula.codenet import CodeNetBuilder, Submission
from curricula.common import RowKey, ending, is_error_trace, make_example, run_to_its_end
from curricula.functions import FunctionsBuilder

TASK = "bugs"

# Bieber et al. (2022), Table 1, training split: the crashing submissions of CodeNet's Python
# runtime-error dataset by the error they end with (120 k of 2.4 M submissions; the 15 classes
# under 1,000 each, 1,350 in all, are "other").
BIEBER_TRAIN = {
    "ValueError": 25087,
    "NameError": 21540,
    "TypeError": 21414,
    "AttributeError": 10026,
    "UnboundLocalError": 8585,
    "Timeout": 7816,
    "EOFError": 7676,
    "ImportError": 7645,
    "IndexError": 7505,
    "ModuleNotFoundError": 1876,
    "other": 1350,
}


CAPPED = "rerun_untraced"  # a variant the step cap stops is run again untraced (run_to_its_end)


class BugsBuilder(CodeNetBuilder):
    KIND = "bugs"
    SETS = ("bugs",)

    def __init__(self, codenet, out: str, per_bug: int = 2, **kw) -> None:
        super().__init__(codenet, out, mutants=per_bug, accepted_only=False, **kw)
        self.per_bug = per_bug

    def build_options(self) -> dict:
        return {"capped": CAPPED}

    def process(self, pool, sub: Submission, split: str, stdin_path: str | None):
        from mutation.bugs import inject

        counts, by_bug = Counter(), Counter()
        rows: list[dict] = []
        inlined = self.inlined(pool, sub, stdin_path, counts)
        if inlined is None:
            return rows, counts, by_bug
        code = inlined.source
        if len(code.splitlines()) > 200:
            counts["skip:too_many_lines"] += 1
            return rows, counts, by_bug
        original = pool.execute(code)
        if not self._keep(original):
            counts[f"skip:original:{original.status.value}"] += 1
            return rows, counts, by_bug
        counts["programs_used"] += 1
        counts[f"original:{ending(original)}"] += 1
        rows.append(self._bug_row(sub, split, code, original, "original", ()))
        variants = inject(code, per_bug=self.per_bug, seed=self.seed, protected=inlined.literal_spans)
        for k, v in enumerate(variants):
            result = run_to_its_end(pool, v.code)
            ended = ending(result)
            by_bug[f"{v.bug}:{ended}"] += 1
            counts[f"variant:{ended.split(':')[0]}"] += 1
            if self._keep(result):
                rows.append(self._bug_row(sub, split, v.code, result, "bug", (v.bug,), k))
        return rows, counts, by_bug

    @staticmethod
    def _keep(result) -> bool:
        return result.status.value == "ok" or is_error_trace(result)

    def _bug_row(self, sub, split, code, result, kind, bugs, k=None) -> dict:
        rid = sub.submission_id if k is None else f"{sub.submission_id}_b{k:02d}"
        row = make_example(RowKey(rid, sub.problem_id, split, TASK, sub.submission_id), code, result, kind, tuple(bugs))
        row["_set"] = "bugs"
        return row

    def finalize(self, seconds: float, programs: int) -> dict:
        stats = super().finalize(seconds, programs)
        stats["class_mix"] = class_mix(stats["per_operator_status"], stats["counts"])
        write_json(os.path.join(self.out, "stats.json"), stats, ensure_ascii=False)
        return stats


class FunctionBugsBuilder(FunctionsBuilder):
    """The errors set of the functions: each program a package's doctests and tests make
    (curricula/functions.py), run as it is (kind `original`), then with one realistic bug
    at a time in its definitions (kind `bug`, the call that drives it untouched). The rows
    are a functions build's: `functions_errors/` (crashes) and `functions/` (clean runs),
    split by module; `stats.json` gains `per_operator_status` and `class_mix`. A variant's
    NameError, UnboundLocalError or ImportError is kept: its original ran, so it is the bug's (a misspelt name, a
    removed import), where an original's is a definition the extraction missed. Puzzle and
    documentation roots make their own drivers, which a bug may touch."""

    BUILD = "function_bugs"

    def __init__(self, roots: list[str], out: str, per_bug: int = 2, **kw) -> None:
        super().__init__(roots, out, mutants=0, input_mutants=0, **kw)
        self.per_bug = per_bug

    def build_options(self) -> dict:
        return {"per_bug": self.per_bug, "capped": CAPPED}

    def variants(self, program: str, start: int, keep_driver: bool, counts: Counter) -> list[tuple[str, str, tuple]]:
        from mutation.bugs import inject

        size = len(program.encode("utf-8"))
        made = inject(program, per_bug=self.per_bug, seed=self.seed, protected=((start, size),) if keep_driver else ())
        return [(v.code, "bug", (v.bug,)) for v in made]

    def finalize(self, seconds: float, modules: int) -> dict:
        stats = super().finalize(seconds, modules)
        per_bug: dict[str, Counter] = {}
        for key, n in stats["counts"].items():
            if key.startswith("bug_class:"):
                _, name, ended = key.split(":", 2)
                per_bug.setdefault(name, Counter())[ended] += n
        stats["per_operator_status"] = {k: dict(sorted(v.items())) for k, v in sorted(per_bug.items())}
        crashed = "original_crash:"  # the originals' crashes by type (FunctionsBuilder.trace)
        counts = {f"original:error:{k[len(crashed) :]}": n for k, n in stats["counts"].items() if k.startswith(crashed)}
        stats["class_mix"] = class_mix(stats["per_operator_status"], counts)
        write_json(os.path.join(self.out, "stats.json"), stats, ensure_ascii=False)
        return stats


def class_mix(per_bug: dict, counts: dict) -> dict:
    """Exception types of the crashing variants and originals, in % of the crashes, beside
    Bieber et al.'s shares of their crashes (timeouts included there, none here)."""
    ours: Counter = Counter()  # a type of theirs under 1,000 is in their "other", so it is in ours too
    for endings in per_bug.values():
        for ended, n in endings.items():
            if ended.startswith("error:"):
                ours[ended[6:] if ended[6:] in BIEBER_TRAIN else "other"] += n
    for key, n in counts.items():
        if key.startswith("original:error:"):
            kind = key[len("original:error:") :]
            ours[kind if kind in BIEBER_TRAIN else "other"] += n
    total, theirs = sum(ours.values()) or 1, sum(BIEBER_TRAIN.values())
    names = sorted(set(ours) | set(BIEBER_TRAIN), key=lambda t: -(ours[t] / total + BIEBER_TRAIN.get(t, 0) / theirs))
    return {
        "crashes": sum(ours.values()),
        "percent": {
            t: {"ours": round(100 * ours[t] / total, 1), "bieber": round(100 * BIEBER_TRAIN.get(t, 0) / theirs, 1)}
            for t in names
        },
    }
