"""SingleLine: (values of the variables a line reads) + the line -> the state after it.

Derived from traced real programs (a built codenetmut or tutorial folder): for every
step whose line is one simple statement (assignment, augmented assignment, expression)
inside the same function as the step before it, the variables the line reads are
taken from the state after the previous step; when every one of them is a literal
(`ast.literal_eval` accepts its rendering), the example code is

    c = 98
    z = 3
    c += z

and its target is the state after the last line, obtained by running the example in
the sandbox (so the target is ground truth, not copied from the source trace).
Examples are deduplicated on their code and keep the split of their source program.

A hot loop yields one distinct example per iteration: one program of p02983
(`mn = min(mn, i * j % 2019)` over all pairs) once gave 991 of 5,895 test examples,
and one problem 53% of the test split. So each statement of a program (its mutants
included) contributes at most `per_line` examples (default 4), chosen by a hash of
their code; the dataset then spans the programs' statements instead of a few loops.

`--kaggle FILE` converts the original python-state-changes data instead: JSON or JSONL
records with `start` (the variables before: a dict, or a dict literal string), `code`
(one line) and `end` (ignored: the target is recomputed the same way). Records in
another shape are counted as skipped, never guessed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import time
from collections import Counter

from codeexecutor.atomic import replacing, write_json
from codeexecutor.progress import bar as progress_bar
from codeexecutor.source import parse_quietly
from curricula.common import SPLITS, RowKey, make_example, save_dataset
from curricula.journal import Journal, read_journal, traced_by

TASK = "singleline"
CHUNK = 512  # candidate programs per journal unit
PER_LINE = 4  # examples per statement of a program, at most
AUGMENTED = "_aug"  # id infix of a variant of a training program (`--augment`)
log = logging.getLogger("curricula.singleline")
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)


def _reads(stmt: ast.stmt) -> list[str]:
    names = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in names:
            names.append(node.id)
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id not in names:
        names.insert(0, stmt.target.id)
    return names


def _scopes(tree: ast.Module) -> dict[int, int]:
    """line -> id of the innermost function containing it (0 for module level)."""
    out: dict[int, int] = {}

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inner = child.lineno * 1000 + child.col_offset + 1
            if hasattr(child, "lineno"):
                for ln in range(child.lineno, (getattr(child, "end_lineno", None) or child.lineno) + 1):
                    out.setdefault(ln, inner) if inner == scope else out.__setitem__(ln, inner)
            visit(child, inner)

    visit(tree, 0)
    return out


def candidates(code: str, steps: list[dict]) -> list[str]:
    """SingleLine example programs from one traced program."""
    try:
        tree = parse_quietly(code)
    except SyntaxError:
        return []
    lines = code.splitlines()
    scopes = _scopes(tree)
    by_line: dict[int, ast.stmt] = {}
    for node in ast.walk(tree):
        if isinstance(node, _SIMPLE) and node.lineno == node.end_lineno:
            by_line.setdefault(node.lineno, node)
    out = []
    for prev, step in zip(steps, steps[1:]):
        stmt = by_line.get(step["line"])
        if stmt is None or scopes.get(prev["line"]) != scopes.get(step["line"]):
            continue
        if isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Call):
            continue
        state = prev["state"]
        assigns = []
        for name in _reads(stmt):
            if name not in state:
                if name in __builtins__ if isinstance(__builtins__, dict) else hasattr(__builtins__, name):
                    continue  # a builtin (len, range, ...)
                break
            try:
                ast.literal_eval(state[name])
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                break
            assigns.append(f"{name} = {state[name]}")
        else:
            value = getattr(stmt, "value", None)
            if not assigns and value is not None and _is_literal(value):
                continue  # `z = 3` reads nothing: a trivial example
            out.append("\n".join(assigns + [lines[step["line"] - 1].strip()]) + "\n")
    return out


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, SyntaxError, TypeError):
        return False


def _kaggle_records(path: str):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        data = json.loads(text)
        records = data if isinstance(data, list) else data.get("data", [data])
    except ValueError:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    yield from records


def kaggle_program(rec) -> str | None:
    """Example code from one python-state-changes record, or None if it is not of that shape."""
    if not isinstance(rec, dict) or not isinstance(rec.get("code"), str):
        return None
    start = rec.get("start", {})
    if isinstance(start, str):
        try:
            start = ast.literal_eval(start) if start.strip() else {}
        except (ValueError, SyntaxError):
            return None
    if not isinstance(start, dict) or not all(isinstance(k, str) and k.isidentifier() for k in start):
        return None
    lines = [f"{k} = {v!r}" for k, v in start.items()] + [rec["code"].strip()]
    return "\n".join(lines) + "\n"


def cap_per_statement(programs: dict[str, tuple[str, str, str]], per_line: int) -> dict[str, tuple[str, str, str]]:
    """Keep at most `per_line` example programs per (source program, statement), the
    ones with the smallest hash of their code (a choice that depends on nothing else).
    A source program's mutants count as the same program (ids `sXXX_mYY_...`)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for code, (rid, _, _) in programs.items():
        groups.setdefault((rid.split("_")[0], code.rstrip("\n").rsplit("\n", 1)[-1]), []).append(code)
    keep = set()
    for codes in groups.values():
        keep.update(sorted(codes, key=lambda c: hashlib.sha1(c.encode()).hexdigest())[:per_line])
    return {c: meta for c, meta in programs.items() if c in keep}


def augmented_programs(items: list[tuple[str, tuple[str, str, str]]], k: int) -> list[tuple[str, tuple[str, str, str]]]:
    """Up to `k` variants (curricula/augment.py) of every training program, with the
    names of the training programs as the pool of new names; never of valid or test."""
    from curricula.augment import assigned_names, variants

    train = [(code, meta) for code, meta in items if meta[2] == "train"]
    names: Counter = Counter()
    for code, _ in train:
        try:
            names.update(assigned_names(code))
        except SyntaxError:
            continue
    pool = sorted(names, key=lambda n: (-names[n], n))[:5000]
    seen = {code for code, _ in items}
    out = []
    for code, (rid, group, split) in train:
        for j, v in enumerate(variants(code, k, rid, pool)):
            if v not in seen:
                seen.add(v)
                out.append((v, (f"{rid}{AUGMENTED}{j}", group, split)))
    return out


def built_params(out: str) -> dict:
    """The options a SingleLine build in `out` was started with ({} before they were kept)."""
    path = os.path.join(out, "params.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _check_params(out: str, params: dict) -> None:
    """A build resumes only with the options it started with: its journal's chunks are
    slices of one candidate list, which other options change."""
    before = built_params(out)
    if os.path.exists(os.path.join(out, "journal.jsonl")) and before:
        if before != params:
            from codeexecutor.errors import UsageError

            changed = ", ".join(f"{k} {before.get(k)!r} -> {v!r}" for k, v in params.items() if before.get(k) != v)
            raise UsageError(
                f"{out} holds a SingleLine build with other options ({changed}): give the same options "
                "to resume it, or delete the folder to build anew"
            )
    if before != params and os.path.exists(os.path.join(out, CANDIDATES)):  # scanned for other options
        os.remove(os.path.join(out, CANDIDATES))
    write_json(os.path.join(out, "params.json"), params, ensure_ascii=False)


def build_singleline(
    out: str,
    source: str | None = None,
    kaggle: str | None = None,
    workers: int = 2,
    limit: int | None = None,
    progress: bool = True,
    per_line: int | None = PER_LINE,
    augment: int = 0,
) -> dict:
    os.makedirs(out, exist_ok=True)
    _check_params(out, {"source": source, "kaggle": kaggle, "limit": limit, "per_line": per_line, "augment": augment})
    start = time.perf_counter()
    saved = _load_candidates(out)
    if saved is not None:  # a resumed build: the candidate scan was done once, before the first chunk
        items, counts = saved
    else:
        items, counts = _candidate_items(source, kaggle, limit, per_line, augment)
        _save_candidates(out, items, counts)
    return _trace_chunks(out, items, counts, source or kaggle, workers, progress, start)


def _candidate_items(
    source: str | None, kaggle: str | None, limit: int | None, per_line: int | None, augment: int
) -> tuple[list, Counter]:
    """Every SingleLine candidate program (code, (id, group, split)) in id order, and the counts."""
    counts = Counter()
    programs: dict[str, tuple[str, str, str]] = {}  # code -> (id, group, split)
    if kaggle:
        for i, rec in enumerate(_kaggle_records(kaggle)):
            code = kaggle_program(rec)
            if code is None:
                counts["skip:kaggle_record_shape"] += 1
                continue
            group = f"kaggle{i // 1000}"
            programs.setdefault(code, (f"kaggle_{i:08d}", group, ""))
    else:
        import datasets

        for name in sorted(os.listdir(source)):
            path = os.path.join(source, name)
            if not os.path.isfile(os.path.join(path, "dataset_dict.json")) or name == "errors":
                continue
            dd = datasets.load_from_disk(path)
            for split in dd:
                for row in dd[split]:
                    for k, code in enumerate(candidates(row["code"], json.loads(row["steps"]))):
                        counts["candidates"] += 1
                        programs.setdefault(code, (f"{row['id']}_s{k:03d}", row["problem_id"], split))
    if kaggle:  # kaggle groups get splits by hash
        from curricula.common import assign_splits

        splits = assign_splits({g for _, g, _ in programs.values()})
        programs = {c: (i, g, splits[g]) for c, (i, g, _) in programs.items()}
    elif per_line:
        programs = cap_per_statement(programs, per_line)
        counts["capped_per_statement"] = len(programs)
    items = sorted(programs.items(), key=lambda kv: kv[1][0])
    if limit is not None:
        items = items[:limit]
    counts["unique_programs"] = len(items)
    if augment:
        extra = augmented_programs(items, augment)
        counts["augmented_programs"] = len(extra)
        items = sorted(items + extra, key=lambda kv: kv[1][0])
    return items, counts


CANDIDATES = "candidates.jsonl.gz"  # the scanned candidate list, kept so a resume does not scan again


def _save_candidates(out: str, items: list, counts: Counter) -> None:
    import gzip

    path = os.path.join(out, CANDIDATES)
    with replacing(path) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"counts": dict(counts), "items": len(items)}) + "\n")
        for code, meta in items:
            f.write(json.dumps([code, list(meta)], ensure_ascii=False) + "\n")


def _load_candidates(out: str) -> tuple[list, Counter] | None:
    """The saved candidate list where one was written whole, else None (scan again)."""
    import gzip

    path = os.path.join(out, CANDIDATES)
    if not os.path.exists(path):
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            head = json.loads(f.readline())
            items = [(code, tuple(meta)) for code, meta in map(json.loads, f)]
    except (OSError, EOFError, ValueError):
        return None
    return (items, Counter(head["counts"])) if len(items) == head["items"] else None


def _trace_chunks(
    out: str, items: list, counts: Counter, origin: str, workers: int, progress: bool, start: float
) -> dict:
    """Trace the candidates chunk by chunk into the journal, then write the dataset."""
    from codeexecutor.execution import ExecutorPool

    rows_by_split: dict[str, list[dict]] = {s: [] for s in SPLITS}
    chunks = [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]
    # Journaled per chunk of candidates (one fsync'ed write each): kill -9 and the same
    # command again redo at most the chunk that was running.
    with Journal(os.path.join(out, "journal.jsonl")) as journal:
        journal.check_python()
        todo = [k for k in range(len(chunks)) if f"chunk{k}" not in journal.done]
        log.info(
            "singleline: %d candidate programs in %d chunks, %d already done",
            len(items),
            len(chunks),
            len(chunks) - len(todo),
        )
        pending = set(todo)
        bar = (
            progress_bar(
                total=len(items),
                initial=sum(len(chunks[k]) for k in range(len(chunks)) if k not in pending),
                desc="singleline",
                unit="prog",
                logger=log,
            )
            if progress
            else None
        )
        if todo:
            with ExecutorPool(workers) as pool:
                for k in todo:
                    rows, chunk_counts = [], Counter()
                    for (code, (rid, group, split)), result in _ordered(pool, chunks[k]):
                        if result.status.value != "ok" or not result.steps:
                            chunk_counts[f"skip:{result.status.value}"] += 1
                            continue
                        row = make_example(
                            RowKey(rid, group, split, TASK),
                            code,
                            result,
                            "augmented" if AUGMENTED in rid else "singleline",
                        )
                        row["n_steps"] = 1  # the target is the one state after the line (Profile.example)
                        rows.append(row)
                        chunk_counts["examples"] += 1
                    journal.write_unit(f"chunk{k}", rows, {"counts": dict(chunk_counts)})
                    if bar is not None:
                        bar.update(len(chunks[k]))
        if bar is not None:
            bar.close()
    for kind, obj in read_journal(os.path.join(out, "journal.jsonl")):
        if kind == "record":
            rows_by_split[obj["split"]].append(obj)
        else:
            counts.update(obj.get("counts", {}))
    if not any(rows_by_split.values()):
        from codeexecutor.errors import UsageError

        raise UsageError(
            f"no SingleLine examples came out of {origin} ({dict(counts)}); "
            "give a built dataset whose programs ran (codeexecutor build codenetmut ...)"
        )
    sizes = save_dataset(rows_by_split, os.path.join(out, TASK))
    stats = {
        "python": traced_by(os.path.join(out, "journal.jsonl")),
        "source": origin,
        "counts": dict(sorted(counts.items())),
        "datasets": {TASK: sizes},
        "seconds": round(time.perf_counter() - start, 1),
    }
    write_json(os.path.join(out, "stats.json"), stats, ensure_ascii=False)
    return stats


def _ordered(pool, items):
    """Execute all items on the pool; yield ((code, meta), result) in input order."""
    from codeexecutor.execution import Program

    results = dict(pool.execute_many(Program(code, "", i) for i, (code, _) in enumerate(items)))
    for i, item in enumerate(items):
        yield item, results[i]
