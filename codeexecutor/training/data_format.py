"""What tokenized ids are bound to: the data fingerprint of a committed dataset.

Ids made once (training/tokenized.py) and carried far from the code that made them (the
committed GPU data under curricula/packed/, unpacked on a lent GPU) are valid exactly while
the tokenizer and the code that turns dataset rows into ids are the same. Edits elsewhere
(the training loop, the evaluation, a benchmark's docstring) leave them valid.

The code that makes ids declares a version, `DATA_FORMAT`, and records the digest of
its own source at that version, `DATA_FORMAT_CODE`: the syntax trees of `ID_MODULES`
(comments, docstrings and layout left out). tests/test_data_format.py fails when the
digest moves without the record: whoever changes that code decides whether ids change
(then `DATA_FORMAT` goes up, and packs and committed ids of the old version are refused),
and records the new digest either way (`python -m codeexecutor.training.data_format`).

The fingerprint of a set of ids is a hash of the tokenizer's fingerprint, the format
profile, the lengths it was cut to and `DATA_FORMAT`: what `data.packed` compares
before anything is unpacked.
"""

from __future__ import annotations

import ast
import hashlib
import json
import pathlib

DATA_FORMAT = 2  # 1: ids cut at the model's code window; 2: ids keep `tokenizer.keep_code_length` code tokens
DATA_FORMAT_CODE = "b6cd8c723273799b"  # digest of ID_MODULES at DATA_FORMAT (see the module docstring)
ROOT = pathlib.Path(__file__).resolve().parents[2]
# The modules whose code decides a row's ids: the structured steps' records, their
# serialization in a profile, the tokenizer and the code window, the tokenize pass and
# the packed ids file.
ID_MODULES = (
    "codeexecutor/execution/records.py",
    "codeexecutor/modeling/compact.py",
    "codeexecutor/modeling/lexical.py",
    "codeexecutor/modeling/format.py",
    "codeexecutor/modeling/profiles.py",
    "codeexecutor/modeling/tokenizer.py",
    "codeexecutor/training/tokenized.py",
    "codeexecutor/training/ids.py",
)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def _canonical(node) -> str:
    """A syntax tree as text that every interpreter writes alike: each node's kind and its
    fields by name, empty ones left out (`ast.dump` differs from 3.11 to 3.13: 3.12 adds
    `type_params`, 3.13 leaves empty fields out)."""
    if isinstance(node, ast.AST):
        fields = sorted(
            (k, _canonical(v)) for k, v in ast.iter_fields(node) if v is not None and v != [] and k != "type_comment"
        )
        return f"{type(node).__name__}({','.join(f'{k}={v}' for k, v in fields)})"
    if isinstance(node, list):
        return "[" + ",".join(_canonical(x) for x in node) + "]"
    return repr(node)


def code_digest(root: pathlib.Path = ROOT) -> str:
    """A hash of what ID_MODULES do: their syntax trees, docstrings, comments and layout left
    out; the same under Python 3.11, 3.12 and 3.13 (the device runs 3.12)."""
    h = hashlib.sha256()
    for name in ID_MODULES:
        tree = _without_docstrings(ast.parse((root / name).read_text(), name))
        h.update(name.encode() + b"\0" + _canonical(tree).encode() + b"\0")
    return h.hexdigest()[:16]


def fingerprint(identity: dict) -> str:
    """The data fingerprint of ids of this identity (tokenized.identity: the tokenizer's
    fingerprint, the profile, the lengths) at this DATA_FORMAT."""
    keys = {k: identity[k] for k in ("tokenizer", "profile", "max_code_length", "max_trace_length")}
    blob = json.dumps({"data_format": DATA_FORMAT, **keys}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def format_problem(data_format, where: str, fix: str) -> str | None:
    """Why ids of `data_format` at `where` cannot be read by this checkout (`fix`: what to do
    about another format), or None: another format, or id code changed without its record."""
    if data_format != DATA_FORMAT:
        return f"{where} holds ids of data format {data_format} and this checkout makes format {DATA_FORMAT}: {fix}"
    if code_digest() != DATA_FORMAT_CODE:
        return (
            "the code that makes ids changed without its version (training/data_format.py): bump DATA_FORMAT if ids "
            "change, then record the digest (python -m codeexecutor.training.data_format)"
        )
    return None


if __name__ == "__main__":
    digest = code_digest()
    same = digest == DATA_FORMAT_CODE
    print(
        f"DATA_FORMAT {DATA_FORMAT}; code digest {digest} "
        f"({'as recorded' if same else 'recorded: ' + DATA_FORMAT_CODE})"
    )
