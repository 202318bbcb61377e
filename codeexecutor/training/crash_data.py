"""The rows a crash detector learns from and is scored on: a `codeexecutor build bugs`
folder's programs with how each run ended, and the problems' resource descriptions."""

from __future__ import annotations

import json
import os


def read_rows(folder: str, split: str | None = None, name: str = "bugs") -> list[dict]:
    """The built rows ({"code", "crashed", "type", "line", "bug", "problem_id", "split", ...})
    of a bugs build (or another dataset of a build: `errors`, `codenetmut`, ...),
    optionally of one split."""
    from datasets import load_from_disk

    splits = load_from_disk(os.path.join(folder, name))
    names = [split] if split is not None else list(splits)
    return [_row(row) for name in names if name in splits for row in splits[name]]


def _row(row: dict) -> dict:
    err = json.loads(row["error"]) if row["error"] else None
    return {
        "id": row["id"],
        "source_id": row.get("source_id") or row["id"],  # a variant's original
        "problem_id": row["problem_id"],
        "split": row["split"],
        "code": row["code"],
        "kind": row["kind"],
        "bug": (row.get("operators") or [""])[0],
        "crashed": err is not None,
        "type": err["type"] if err else None,
        "line": err["line"] if err else None,
    }


DESCRIPTION_CHARS = 400  # of a problem's input format and constraints: the code window is 256 tokens


def read_descriptions(path: str) -> dict[str, str]:
    """{problem id: its input format and constraints} of a codenet-meta problems.jsonl."""
    if not os.path.isfile(path):
        from codeexecutor.errors import UsageError

        raise UsageError(f"{path}: no such file (give codenet-meta's problems.jsonl)")
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            spec = "\n".join(x for x in (rec.get("input_spec"), rec.get("constraints")) if x)
            if spec:
                out[rec["problem_id"]] = spec
    return out


def described(code: str, description: str | None) -> tuple[str, int]:
    """(code with the description in front as a docstring, the lines it adds); the code
    alone where there is none."""
    if not description:
        return code, 0
    text = description[:DESCRIPTION_CHARS].replace("\\", "\\\\").replace('"""', "'''").strip()
    doc = '"""' + text + '\n"""\n'  # backslashes doubled: a `\\u` in a formula would not compile
    return doc + code, len(doc.splitlines())
