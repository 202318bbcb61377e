"""Sources of the functions build beside packages: documentation sessions and puzzle generators."""

import ast
import json
import subprocess
import sys
from collections import Counter

import datasets
import pytest

from curricula.common import BuildSetup
from curricula.doc_sessions import DocsCorpus, literal_blocks, needed_setup, sessions
from curricula.functions import FunctionsBuilder
from curricula.puzzles import PuzzleCorpus

from .conftest import ROOT, SHARED_DATA

PAGE = """\
:mod:`shapes` --- a page
========================

A helper defined in prose::

    class Box:
        def __init__(self, side):
            self.side = side

        def area(self):
            return self.side * self.side

First session:

    >>> from collections import Counter
    >>> words = ['a', 'b', 'a']
    >>> counts = Counter(words)
    >>> counts['a']
    2
    >>> unused = 99

A later session reads names of the first and of the literal block:

    >>> counts.update(['b'])
    >>> b = Box(3)
    >>> b.area() + counts['b']
    11

One that raises stops there:

    >>> [1, 2][5]
    Traceback (most recent call last):
      ...
    IndexError: list index out of range
    >>> print('never reached')

    >>> import socket
    >>> socket.gethostname()
    'host'

    >>> 1 + 1  # doctest: +SKIP
    2
"""


@pytest.fixture()
def docs(tmp_path):
    root = tmp_path / "pages"
    root.mkdir()
    (root / "shapes.rst.txt").write_text(PAGE)
    (root / "network.rst.txt").write_text(">>> 1 + 1\n2\n")
    (root / "index.tsv").write_text("file\tcategory\nshapes.rst.txt\tpure\nnetwork.rst.txt\tnetwork\n")
    (root / "LICENSE").write_text("Zero-Clause BSD\n\nPermission to use, copy, modify ...\n")
    return root


def test_sessions_keep_their_shown_output_and_literal_blocks_parse():
    found = sessions(PAGE)
    assert [len(examples) for _, examples in found] == [5, 3, 2, 2, 1]
    line, source, want = found[0][1][3]
    assert (source, want) == ("counts['a']", "2")
    assert found[2][1][0][2].startswith("Traceback (most recent call last)")
    blocks = literal_blocks(PAGE)
    assert len(blocks) == 1 and blocks[0][1].startswith("class Box:")


def test_a_session_gets_the_earlier_statements_it_needs_and_shows_values(docs):
    counts = Counter()
    programs = DocsCorpus(str(docs)).programs("shapes.rst.txt", counts)
    assert len(programs) == 3
    first, later, crash = (p.code for p in programs)
    assert first.splitlines()[-2:] == ["print(repr(counts['a']))", "unused = 99"]
    # the later session: Counter import, words and counts (needed), Box (the literal block); not `unused`
    assert "unused" not in later and "class Box" in later and "from collections import Counter" in later
    assert later.splitlines()[-1] == "print(repr(b.area() + counts['b']))"
    assert later.index("counts = Counter(words)") < later.index("counts.update(['b'])")
    head = later.encode()[: programs[1].driver].decode()
    assert "counts.update" not in head and "words = " in head  # the driver is the session itself
    assert crash.strip() == "print(repr([1, 2][5]))" or crash.strip() == "[1, 2][5]"
    assert counts["skip:docs_touches:socket"] == 1 and counts["skip:docs_example_marked_skip"] == 1
    assert DocsCorpus(str(docs)).programs("network.rst.txt", counts) == []
    assert counts["skip_module:category:network"] == 1
    exec(compile(later, "later", "exec"), {})  # it runs: 9 + 2 printed


def test_a_package_with_a_readme_is_read_as_a_package(tmp_path, docs):
    from curricula.doc_sessions import is_docs_root
    from curricula.functions import _corpus

    pkg = tmp_path / "pkg-1.0"
    (pkg / "pkg").mkdir(parents=True)
    (pkg / "README.rst").write_text(">>> import pkg\n")
    (pkg / "pkg" / "__init__.py").write_text("def f(x):\n    return x\n")
    assert not is_docs_root(str(pkg)) and type(_corpus(str(pkg))).__name__ == "Corpus"
    assert is_docs_root(str(docs)) and type(_corpus(str(docs))).__name__ == "DocsCorpus"


def test_needed_setup_follows_names_backwards():
    earlier = ast.parse("import math\nx = [3]\ny = 5\nx.append(math.pi)\nz = x\n").body
    keep = needed_setup(earlier, ast.parse("print(z)").body)
    assert [ast.unparse(s) for s in keep] == ["import math", "x = [3]", "x.append(math.pi)", "z = x"]


def test_docs_and_puzzles_build_with_their_licences(docs, tmp_path):
    out = tmp_path / "built"
    stats = FunctionsBuilder(
        [str(docs)], str(out), mutants=2, input_mutants=2, humaneval=None, setup=BuildSetup(workers=2)
    ).run(progress=False)
    counts = stats["counts"]
    assert counts["original:ok"] == 2 and counts["original:error"] == 1, counts
    clean = datasets.load_from_disk(str(out / "functions"))
    rows = [r for part in clean.values() for r in part]
    assert {json.loads(r["provenance"])["origin"] for r in rows} == {"docs"}
    assert {r["license"] for r in rows} == {"Zero-Clause BSD"}
    assert stats["sources"][0]["license_from"].endswith("LICENSE")
    source = stats["per_source"]["pages"]  # per source: what was found, kept, skipped
    assert source["rows_kept_clean"] == len(rows) and source["original:ok"] == 2
    assert source["skip:docs_touches:socket"] == 1 and source["skip_module:category:network"] == 1


@pytest.mark.data
def test_puzzle_generators_give_seeded_calls_of_their_solvers():
    root = SHARED_DATA / "python-programming-puzzles"
    if not root.is_dir():
        pytest.skip("../shared/data/python-programming-puzzles is not available")
    corpus = PuzzleCorpus(str(root))
    assert "src/generators/basic.py" in corpus.files and all("human_eval" not in f for f in corpus.files)
    counts = Counter()
    programs = corpus.programs("src/generators/basic.py", counts)
    again = corpus.programs("src/generators/basic.py", Counter())
    assert [p.code for p in programs] == [p.code for p in again]  # seeded: the same instances every time
    assert counts["puzzle_templates"] >= 20 and len(programs) >= 100
    per = Counter(p.group for p in programs)
    assert max(per.values()) <= 8 and "src/generators/basic.py:SumOfDigits" in per
    sample = next(p for p in programs if p.group.endswith(":SumOfDigits"))
    assert sample.code.startswith("def sol(s):") and sample.code.splitlines()[-1].startswith("print(repr(sol(s=")
    out = subprocess.run([sys.executable, "-c", sample.code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip().strip("'").isdigit()
    assert set(corpus.groups()) >= set(per)


def test_cli_names_a_folder_with_neither_python_nor_documentation(tmp_path):
    (tmp_path / "empty").mkdir()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "build",
            "functions",
            "--from",
            str(tmp_path / "empty"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "no .py files" in out.stderr and "Traceback" not in out.stderr


def test_overlap_report_finds_shared_programs_definitions_and_split_leaks():
    from curricula.overlap import Reference, overlap_report

    shared_def = "def walk(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"
    ref = Reference("bench", [shared_def + "print(walk([1]))\n", "print(1)\n"])
    rows = [
        {
            "id": "a",
            "split": "train",
            "kind": "original",
            "problem_id": "m1",
            "code": shared_def + "print(repr(walk([2])))\n",
        },
        {"id": "b", "split": "test", "kind": "original", "problem_id": "m2", "code": "print(1)\n"},
        {"id": "c", "split": "valid", "kind": "mutant", "problem_id": "m2", "code": "print( 1 )\n"},
        {
            "id": "d",
            "split": "train",
            "kind": "original",
            "problem_id": "m3",
            "code": "def walk(xs):\n    return 0\nprint(walk([]))\n",
        },  # same name, other body: no overlap
    ]
    report = overlap_report(rows, [ref])
    entry = report["references"]["bench"]
    assert entry["programs"] == {"test": 1, "valid": 1} and entry["definitions"] == {"train": 1}
    assert entry["examples"][0] == {"id": "a", "split": "train", "functions": ["walk"]}
    assert report["groups_in_two_splits"] == 1 and report["programs_in_two_splits"] == 1
