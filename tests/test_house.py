"""What the layout promises: the product package neither imports nor reads the folders
beside it (benchmarks/ measures the product, gpu_run/ drives it on a lent GPU), and the
GPU run stays a thin script over the product's commands."""

import ast

from .conftest import ROOT

PRODUCT = ("codeexecutor", "eval", "curricula", "mutation")
BESIDE = ("benchmarks", "gpu_run")


def _modules():
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "demo" not in path.relative_to(ROOT).parts[1:2]:  # curricula/demo: programs, not the product
                yield path, ast.parse(path.read_text(), str(path))


def _docstrings(tree) -> set[int]:
    """ids of the docstring constants of a module and its functions and classes."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_the_product_neither_imports_nor_reads_the_folders_beside_it():
    found = []
    for path, tree in _modules():
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            hit = [n for n in names if n.split(".")[0] in BESIDE]
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                first = node.value.strip("/").split("/")[0]
                hit += [node.value] if first in BESIDE and len(node.value.split()) == 1 else []  # a path, not prose
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {h}" for h in hit]
    assert not found, found


def test_the_gpu_run_stays_a_thin_script():
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "gpu_run").iterdir() if p.is_file())
    assert lines <= 1200, lines
    assert not (ROOT / "codeexecutor" / "campaign").exists()
