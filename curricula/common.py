"""Pieces shared by the dataset builders: splits by problem, example records, writing
Hugging Face datasets atomically."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from codeexecutor.atomic import replacing
from codeexecutor.execution.interpreters import dataset_python  # noqa: F401  (this module's name for it, kept)
from codeexecutor.execution.records import ExecResult, ExecStatus

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class BuildSetup:
    """How a build runs, whatever it builds: executor workers, which shard of the units is
    this process's (`(index, count)`), the mutation seed, a cap on units (`limit`, for a
    quick look), and each run's limits (seconds, traced steps). A resume must match it."""

    workers: int = 2
    shard: tuple[int, int] = (0, 1)
    seed: int = 0
    limit: int | None = None
    timeout: float = 1.0
    max_steps: int = 1024


def assign_splits(groups: Iterable[str], test_pct: int = 5, valid_pct: int = 5) -> dict[str, str]:
    """Split by group (problem): a stable hash decides, so every machine and every shard
    agrees, and no group is in two splits. With few groups, the two smallest hashes go
    to test and valid so that neither is empty."""
    groups = sorted(set(groups))
    ranked = sorted(groups, key=lambda g: hashlib.sha256(g.encode()).hexdigest())
    out = {}
    for g in groups:
        bucket = int(hashlib.sha256(g.encode()).hexdigest()[:8], 16) % 100
        out[g] = "test" if bucket < test_pct else "valid" if bucket < test_pct + valid_pct else "train"
    if len(ranked) >= 3:
        if "test" not in out.values():
            out[ranked[0]] = "test"
        if "valid" not in out.values():
            out[next(g for g in ranked if out[g] != "test")] = "valid"
    return out


def max_states(result: ExecResult) -> int:
    return max((len(s.state) for s in result.steps), default=0)


class RowKey(NamedTuple):
    """Where a dataset row belongs: its id, its split group (a problem, a module), its
    split, its task, and the id of the program it was made from (default: its own)."""

    id: str
    group: str
    split: str
    task: str
    source: str = ""


def make_example(key: RowKey, code: str, result: ExecResult, kind: str, operators: tuple[str, ...] = ()) -> dict:
    """One dataset row (`key` says where it belongs): the program, its structured steps, status, error and output. The
    model's input and target texts are not stored: a run serializes them from these columns
    in its own format profile when it tokenizes (`Profile.example`), and storing the
    default profile's text beside them made every row about twice its size."""
    return {
        "id": key.id,
        "problem_id": key.group,
        "split": key.split,
        "task": key.task,
        "kind": kind,  # original | mutant | snippet | singleline
        "source_id": key.source or key.id,
        "code": code,
        "steps": json.dumps([s.to_json() for s in result.steps], ensure_ascii=False),
        "status": result.status.value,
        "error": json.dumps(result.error.to_json()) if result.error else "",
        "stdout": result.stdout,
        "operators": list(operators),
        "n_lines": sum(1 for line in code.splitlines() if line.strip()),
        "n_steps": len(result.steps),
        "max_states": max_states(result),
    }


def run_to_its_end(pool, code: str) -> ExecResult:
    """A bug's run: traced; where the trace's step cap stops it before its end, run again
    untraced, and its ending (a crash, the output) kept with the steps the trace has. A
    recursion that never ends reaches about 340 levels in 1,024 traced steps, short of
    Python's 1,000 levels: untraced, it ends as a contest judge sees it, a RecursionError
    at the recursive call. The errors sets are a crash detector's (type and line), never a
    trace model's targets, so the cut steps teach nothing wrong."""
    import dataclasses

    result = pool.execute(code)
    if result.status is not ExecStatus.TRACE_LIMIT:
        return result
    plain = pool.execute(code, trace=False)
    if not is_error_trace(plain):
        return result
    return dataclasses.replace(result, status=plain.status, error=plain.error, stdout=plain.stdout)


def is_error_trace(result: ExecResult) -> bool:
    return result.status in (ExecStatus.ERROR, ExecStatus.MEMORY) and result.error is not None


def ending(result: ExecResult) -> str:
    """How a run ended: `ok`, `error:Type` for a crash, or the status (`timeout`, ...)."""
    if is_error_trace(result):
        return f"error:{result.error.type}"
    return result.status.value


STRING_COLUMNS = (
    "id",
    "problem_id",
    "split",
    "task",
    "kind",
    "source_id",
    "code",
    "steps",
    "status",
    "error",
    "stdout",
)
INT_COLUMNS = ("n_lines", "n_steps", "max_states")


def features(extra: tuple[str, ...] = ()):
    """The one schema of every curriculum dataset (see make_example), with a builder's
    `extra` string columns (the functions set's provenance and licence)."""
    import datasets

    cols = {c: datasets.Value("string") for c in STRING_COLUMNS + tuple(extra)}
    cols["operators"] = datasets.Sequence(datasets.Value("string"))
    cols.update({c: datasets.Value("int64") for c in INT_COLUMNS})
    return datasets.Features(cols)


def save_dataset(rows_by_split: dict[str, list[dict]], out_dir: str, extra: tuple[str, ...] = ()) -> dict[str, int]:
    """Save a DatasetDict of the non-empty splits atomically: written aside, then renamed.
    (An empty split is left out: `datasets` cannot load an empty split back from disk.)"""
    import datasets

    schema = features(extra)
    parts = {}
    for split in SPLITS:
        rows = sorted(rows_by_split.get(split, []), key=lambda r: r["id"])
        if rows:
            parts[split] = datasets.Dataset.from_dict(
                {name: [r[name] for r in rows] for name in schema}, features=schema
            )
    _replace(datasets.DatasetDict(parts), out_dir)
    return {s: len(parts[s]) if s in parts else 0 for s in SPLITS}


def save_journal_datasets(
    journal: str, out: str, names: tuple[str, ...], extra: tuple[str, ...] = (), keep: set[int] | None = None
) -> dict:
    """The datasets of a build (`names`: the `_set` its records name) written from its
    journal with bounded memory: one pass over the journal parses each record once and
    sends the rows of every set to Arrow in batches (`Dataset.from_generator`, the set in
    a column of its own), then each set's splits are found and sorted by id with Arrow
    compute on the columns (never row by row) and saved aside and renamed, as
    `save_dataset` does. `keep`: the ordinals (0-based, among the journal's records) of the
    records to write; all when None. Returns the sizes per dataset and split."""
    import tempfile

    import datasets
    import pyarrow.compute

    from curricula.journal import read_journal

    schema = features(extra)
    wanted = set(names)
    sizes = {}

    def rows():
        ordinal = -1
        for kind, obj in read_journal(journal):
            if kind != "record":
                continue
            ordinal += 1
            if obj.get("_set") in wanted and (keep is None or ordinal in keep):
                yield {"_set": obj["_set"], **{c: obj[c] for c in schema}}

    work = tempfile.mkdtemp(prefix=".datasets-", dir=os.path.dirname(os.path.abspath(journal)))
    try:
        if next(rows(), None) is None:
            table = None
        else:
            table = datasets.Dataset.from_generator(
                rows, features=datasets.Features({"_set": datasets.Value("string"), **schema}), cache_dir=work
            )
        columns = (
            table.data if table is not None else None
        )  # Arrow columns, memory-mapped: no row becomes a Python object
        for name in names:
            parts = {}
            for split in SPLITS if table is not None else ():
                mask = pyarrow.compute.and_(
                    pyarrow.compute.equal(columns.column("_set"), name),
                    pyarrow.compute.equal(columns.column("split"), split),
                )
                rows_at = pyarrow.compute.indices_nonzero(mask)
                if len(rows_at):
                    order = pyarrow.compute.sort_indices(pyarrow.compute.take(columns.column("id"), rows_at))
                    parts[split] = table.select(
                        pyarrow.compute.take(rows_at, order).to_numpy().astype("int64"),
                        indices_cache_file_name=os.path.join(work, f"{name}-{split}.arrow"),
                    ).remove_columns("_set")
            _replace(datasets.DatasetDict(parts), os.path.join(out, name))
            sizes[name] = {s: len(parts[s]) if s in parts else 0 for s in SPLITS}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return sizes


def _replace(dd, out_dir: str) -> None:
    """Save a DatasetDict aside, then rename it into place (the old one removed after)."""
    with replacing(out_dir) as tmp:
        dd.save_to_disk(tmp)


def built_datasets(folder: str, what: str = "dataset folder") -> dict[str, str]:
    """The datasets (name -> path) a `codeexecutor build` output folder holds; UsageError
    (naming the fix) when the folder is missing, not a folder, holds none, or holds one
    that cannot be read."""
    from codeexecutor.errors import UsageError

    if not os.path.exists(folder):
        raise UsageError(f"{what} not found: {folder} (build one first: codeexecutor build ... --out DIR)")
    if not os.path.isdir(folder):
        raise UsageError(f"{what} {folder} is a file, not a folder written by `codeexecutor build ... --out DIR`")
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        if "dataset_dict.json" in filenames:
            try:
                with open(os.path.join(dirpath, "dataset_dict.json")) as f:
                    json.load(f)
            except (ValueError, UnicodeDecodeError) as exc:
                raise UsageError(f"{dirpath} is a broken dataset (dataset_dict.json: {exc}); build it again") from None
            found[os.path.basename(dirpath)] = dirpath
            dirnames[:] = []
    if not found:
        raise UsageError(
            f"no built datasets in {folder} (expected folders written by `codeexecutor build ... --out {folder}`)"
        )
    return dict(sorted(found.items()))


def log_to_build_folder(out: str) -> None:
    """Create a build's output folder and send the builders' log lines to its build.log."""
    import logging

    os.makedirs(out, exist_ok=True)
    handler = logging.FileHandler(os.path.join(out, "build.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger("curricula").addHandler(handler)
    logging.getLogger("curricula").setLevel(logging.INFO)


__all__ = [
    "SPLITS",
    "assign_splits",
    "built_datasets",
    "dataset_python",
    "save_journal_datasets",
    "log_to_build_folder",
    "make_example",
    "is_error_trace",
    "max_states",
    "save_dataset",
]
