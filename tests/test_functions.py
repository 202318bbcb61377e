"""The functions builder: calls found, programs assembled across a package, skips counted,
splits by module, provenance, HumanEval kept out, resume."""

import gzip
import json
import os
import pathlib
import subprocess
import sys

import datasets
import pytest

from curricula.common import BuildSetup
from curricula.function_calls import (
    Corpus,
    Skip,
    assemble,
    assertion_calls,
    doctest_calls,
    driver_statements,
    plain_source,
)
from curricula.functions import FunctionsBuilder, HumanEvalFilter

from .conftest import ROOT, SHARED_DATA

PACKAGE = {
    "LICENSE": "MIT License\n\nCopyright (c) the authors\n",
    "pkg/__init__.py": "from .maths import *\n",
    "pkg/util.py": "SCALE = 3\n\n\ndef helper(x: int) -> int:\n    return x * SCALE\n",
    "pkg/maths.py": '''"""Small maths."""
from __future__ import annotations
import math
from pkg.util import helper
from .util import helper as twice_helper


def triple_sum(xs: list[int]) -> int:
    """Sum of the tripled values.

    >>> triple_sum([1, 2])
    9
    >>> triple_sum([])
    0
    """
    total = 0
    for x in xs:
        total += helper(x)
    return total


def root(n):
    """
    >>> root(16)
    4
    >>> root(-1)
    Traceback (most recent call last):
    ...
    ValueError: negative
    """
    if n < 0:
        raise ValueError("negative")
    return math.isqrt(n)


def uses_alias(n):
    """
    >>> uses_alias(2)
    6
    """
    return twice_helper(n)


class Counter:
    """
    >>> c = Counter()
    >>> c.add(5)
    >>> c.total
    5
    """

    def __init__(self):
        self.total = 0

    def add(self, k):
        self.total += k


def clock():
    """
    >>> clock()
    0.5
    """
    import time
    return time.time()


def draw():
    """
    >>> draw()
    0.5
    """
    import random
    return random.random()
''',
    "pkg/heavy.py": '''import numpy_like_thirdparty


def f(x):
    """
    >>> f(1)
    1
    """
    return numpy_like_thirdparty.identity(x)


def g(x):
    """
    >>> g(2)
    2
    """
    return x  # the import above is not needed here: no skip
''',
    "pkg/broken.py": '''def g(x):
    """
    >>> g(1)
    2
    """
    return x + missing_name
''',
    "tests/test_maths.py": """import unittest
from pkg.maths import triple_sum, root


class T(unittest.TestCase):
    def test_sum(self):
        self.assertEqual(triple_sum([4]), 12)
        data = [1]
        self.assertEqual(triple_sum(data), 3)

    def test_root(self):
        assert root(9) == 3
""",
}


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("corpus") / "mypkg"
    for rel, text in PACKAGE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _program(corpus: Corpus, rel: str, expr: str) -> str:
    mod = corpus.parse(rel)
    calls = assertion_calls(mod) if "test" in rel else doctest_calls(mod)
    call = next(c for c in calls if c.expr == expr)
    return assemble(corpus, mod, driver_statements(call))


def test_program_inlines_what_the_call_needs(package):
    corpus = Corpus(str(package))
    program = _program(corpus, "pkg/maths.py", "triple_sum([1, 2])")
    assert "SCALE = 3" in program and "def helper" in program  # from pkg.util, two modules away
    assert "def root" not in program and "import math" not in program  # only what the call needs
    assert '"""' not in program and ": int" not in program and "-> int" not in program  # no docstrings, no annotations
    assert program.endswith("print(repr(triple_sum([1, 2])))\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.stdout == "9\n"
    alias = _program(corpus, "pkg/maths.py", "uses_alias(2)")
    assert "twice_helper = helper" in alias
    assert subprocess.run([sys.executable, "-c", alias], capture_output=True, text=True).stdout == "6\n"
    setup = _program(corpus, "pkg/maths.py", "c.total")  # earlier examples are the setup
    assert setup.endswith("c = Counter()\nc.add(5)\nprint(repr(c.total))\n")
    test = _program(corpus, "tests/test_maths.py", "triple_sum([4])")  # a test's call, through the package
    assert subprocess.run([sys.executable, "-c", test], capture_output=True, text=True).stdout == "12\n"


def test_third_party_import_is_a_counted_skip(package):
    corpus = Corpus(str(package))
    with pytest.raises(Skip) as exc:
        _program(corpus, "pkg/heavy.py", "f(1)")
    assert exc.value.reason == "third_party:numpy_like_thirdparty"
    assert _program(corpus, "pkg/heavy.py", "g(2)") == "def g(x):\n    return x\nprint(repr(g(2)))\n"


def test_plain_source_keeps_dataclass_fields():
    src = (
        'from dataclasses import dataclass\n@dataclass\nclass P:\n    """doc"""\n    x: int\n    y: int = 2\n'
        'def f(p: P) -> int:\n    """doc"""\n    z: int = p.x\n    return z\nprint(f(P(1)))\n'
    )
    plain = plain_source(src)
    assert "x: int" in plain and "doc" not in plain and "-> int" not in plain and "z = p.x" in plain
    assert subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True).stdout == "1\n"


def test_humaneval_filter(tmp_path):
    sol = (
        "def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n"
        "        if balance < 0:\n            return True\n    return False\n"
    )
    path = tmp_path / "he.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(
            json.dumps({"task_id": "X/0", "entry_point": "below_zero", "prompt": "", "canonical_solution": sol}) + "\n"
        )
    he = HumanEvalFilter(str(path))
    assert he.reason("below_zero", "print(1)\n") == "entry_point"
    renamed = sol.replace("below_zero", "goes_negative").replace("balance", "acc") + "print(goes_negative([1]))\n"
    assert he.reason("goes_negative", sol.replace("below_zero", "goes_negative")) == "ngram_overlap"
    assert he.reason("goes_negative", "def goes_negative(xs):\n    return min(xs) < 0\n") is None
    assert he.reason("goes_negative", renamed) is None  # renamed names: not the same token 5-grams
    assert HumanEvalFilter(None).reason("below_zero", sol) is None


@pytest.fixture(scope="module")
def built(package, tmp_path_factory) -> tuple[pathlib.Path, dict]:
    out = tmp_path_factory.mktemp("functions")
    stats = FunctionsBuilder(
        [str(package)], str(out), mutants=4, input_mutants=2, humaneval=None, setup=BuildSetup(workers=2)
    ).run(progress=False)
    return out, stats


def test_build_keeps_runs_and_crashes_and_counts_skips(built):
    out, stats = built
    counts = stats["counts"]
    assert "skip_module:not_python3_or_not_utf8" not in counts and "skip:imported_module_does_not_parse" not in counts
    assert counts["skip:third_party:numpy_like_thirdparty"] == 1
    assert counts["skip:original:NameError"] == 1  # a definition the extraction could not find: not a crash example
    assert counts["skip:nondeterministic"] == 1  # time.time() differs between two runs
    assert counts["skip:random:random"] == 1
    assert counts["skip:test_call_uses_locals"] == 1  # triple_sum(data): `data` is the test's own
    clean = datasets.load_from_disk(str(out / "functions"))
    crashes = datasets.load_from_disk(str(out / "functions_errors"))
    rows = [r for part in clean.values() for r in part]
    originals = {r["code"].splitlines()[-1] for r in rows if r["kind"] == "original"}
    assert {
        "print(repr(triple_sum([1, 2])))",
        "print(repr(root(16)))",
        "print(repr(c.total))",
        "print(repr(triple_sum([4])))",
        "print(repr(root(9)))",
    } <= originals
    crash = [r for part in crashes.values() for r in part if r["kind"] == "original"]
    assert any(json.loads(r["error"])["type"] == "ValueError" for r in crash)  # `root(-1)` raises: a crash example
    assert {r["kind"] for r in rows} >= {"original", "mutant", "input"}
    inputs = [r for r in rows if r["kind"] == "input"]  # new inputs: the definitions are the original's
    everything = rows + [r for part in crashes.values() for r in part]
    assert inputs
    for r in inputs:
        original = next(o for o in everything if o["id"] == r["source_id"])
        assert r["code"].splitlines()[:-1] == original["code"].splitlines()[:-1]
    for r in rows:
        prov = json.loads(r["provenance"])
        assert prov["corpus"] == "mypkg" and prov["path"] and prov["line"] > 0 and r["license"] == "MIT"
    split_of = {}
    for part in list(clean.values()) + list(crashes.values()):
        for r in part:
            assert split_of.setdefault(r["problem_id"], r["split"]) == r["split"]  # one split per module
    tests = [r for r in rows if json.loads(r["provenance"])["origin"] == "test"]
    assert tests and all(r["problem_id"] == "mypkg/pkg/maths.py" for r in tests)  # a test counts for its module
    codes = [r["code"] for part in list(clean.values()) + list(crashes.values()) for r in part]
    assert len(codes) == len(set(codes))  # deduplicated


def test_build_resumes_without_duplicates(package, built, tmp_path):
    _, whole = built
    out = tmp_path / "resumed"
    FunctionsBuilder(
        [str(package)], str(out), mutants=4, input_mutants=2, humaneval=None, setup=BuildSetup(workers=1, limit=3)
    ).run(progress=False)
    with open(out / "journal.jsonl", "ab") as f:
        f.write(b'{"id": "torn')  # a unit cut by kill -9
    again = FunctionsBuilder(
        [str(package)], str(out), mutants=4, input_mutants=2, humaneval=None, setup=BuildSetup(workers=1)
    ).run(progress=False)
    assert again["datasets"] == whole["datasets"]


def test_a_package_is_stamped_with_the_licence_it_ships_and_refused_without_one(tmp_path):
    from codeexecutor.errors import UsageError
    from curricula.licences import find_licence

    bare = tmp_path / "bare" / "pkg"
    bare.mkdir(parents=True)
    (bare / "m.py").write_text('def f(x):\n    """\n    >>> f(1)\n    2\n    """\n    return x + 1\n')
    with pytest.raises(UsageError, match="no licence found for .*--licence NAME"):
        FunctionsBuilder([str(bare)], str(tmp_path / "out"), humaneval=None)
    assert not (tmp_path / "out").exists()
    named = FunctionsBuilder([str(bare)], str(tmp_path / "out"), humaneval=None, licence="Apache-2.0")
    assert named.provenance[0]["license"] == "Apache-2.0" and named.provenance[0]["license_from"] == "--licence"
    # a package inside src/ of a BSD repository; an installed package with its dist-info beside it
    (tmp_path / "bare" / "LICENSE.txt").write_text(
        "Copyright (c) 2020 X\n\nRedistribution and use in source and binary "
        "forms ... Neither the name of the copyright holder ...\n"
    )
    assert find_licence(str(bare))[0] == "BSD-3-Clause"
    site = tmp_path / "site-packages"
    (site / "tool").mkdir(parents=True)
    (site / "tool-1.0.dist-info").mkdir()
    (site / "tool-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tool\nClassifier: License :: OSI Approved :: MIT License\n\nbody\n"
    )
    (site / "tool-1.0.dist-info" / "top_level.txt").write_text("tool\n")
    licence, where = find_licence(str(site / "tool"))
    assert licence == "MIT License" and where.endswith("METADATA")


def test_cli_refuses_a_missing_folder(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "build",
            "functions",
            "--from",
            str(tmp_path / "nowhere"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "not a folder" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.data
def test_shared_function_corpora_give_programs():
    keon = SHARED_DATA / "keon-algorithms"
    if not keon.is_dir():
        pytest.skip("../shared/data/keon-algorithms is not available")
    corpus = Corpus(str(keon))
    made = 0
    for rel in corpus.files[:60]:
        mod = corpus.parse(rel)
        for call in doctest_calls(mod) if mod else []:
            try:
                program = assemble(corpus, mod, driver_statements(call))
            except Skip:
                continue
            compile(program, rel, "exec")
            assert os.path.basename(rel) and "import algorithms" not in program and "from algorithms" not in program
            made += 1
    assert made >= 20


def test_shards_merge_into_the_whole_build(built, shards, tmp_path):
    from curricula.codenet import merge_shards

    _, whole = built
    merged = merge_shards(str(tmp_path / "merged"), [str(s) for s in shards])
    assert merged["datasets"] == whole["datasets"] and merged["sources"][0]["corpus"] == "mypkg"


def _shard_build(package, out, mutants: int, shard: tuple[int, int]) -> dict:
    """One shard of a functions build of `package` (two literal-argument mutants a call)."""
    setup = BuildSetup(workers=1, shard=shard)
    return FunctionsBuilder(
        [str(package)], str(out), mutants=mutants, input_mutants=2, humaneval=None, setup=setup
    ).run(progress=False)


@pytest.fixture(scope="module")
def shards(package, tmp_path_factory) -> list[pathlib.Path]:
    parts = []
    for i in range(2):
        part = tmp_path_factory.mktemp(f"shard{i}")
        _shard_build(package, part, 4, (i, 2))
        parts.append(part)
    return parts


def _refused(call) -> str:
    from codeexecutor.errors import UsageError

    with pytest.raises(UsageError) as info:
        call()
    return str(info.value)


def test_merge_refuses_shards_that_are_not_one_whole_build(package, shards, tmp_path):
    import shutil

    from curricula.codenet import merge_shards

    message = _refused(lambda: merge_shards(str(tmp_path / "m1"), [str(shards[0])]))
    assert "1/2 missing" in message and "--partial" in message
    assert not (tmp_path / "m1" / "functions").exists()  # refused before anything was written
    assert sum(merge_shards(str(tmp_path / "m2"), [str(shards[0])], partial=True)["datasets"]["functions"].values()) > 0
    message = _refused(lambda: merge_shards(str(tmp_path / "m3"), [str(shards[0]), str(shards[0])]))
    assert "given twice" in message
    other = tmp_path / "other"
    _shard_build(package, other, 2, (1, 2))
    message = _refused(lambda: merge_shards(str(tmp_path / "m4"), [str(shards[0]), str(other)]))
    assert "--mutants 4" in message and "--mutants 2" in message and str(other) in message
    # a shard whose build was killed: its journal holds fewer finished units than it has
    cut = tmp_path / "cut"
    shutil.copytree(shards[1], cut)
    lines = (cut / "journal.jsonl").read_bytes().splitlines(keepends=True)
    first_done = next(i for i, line in enumerate(lines) if line.startswith(b'{"_done"'))
    (cut / "journal.jsonl").write_bytes(b"".join(lines[: first_done + 1]))
    message = _refused(lambda: merge_shards(str(tmp_path / "m5"), [str(shards[0]), str(cut)]))
    assert "unfinished (1 of its" in message and "resume it" in message
    # resumed with other options: refused, the folder's rows stay one build's
    message = _refused(lambda: _shard_build(package, cut, 3, (1, 2)))
    assert "--mutants 4" in message and "new --out" in message


def test_a_merge_killed_midway_goes_on_when_run_again(built, shards, tmp_path):
    from curricula.codenet import merge_shards

    _, whole = built
    out = tmp_path / "merged"
    merge_shards(str(out), [str(s) for s in shards])
    data = (out / "journal.jsonl").read_bytes()
    (out / "journal.jsonl").write_bytes(data[: len(data) // 2])  # killed while copying units: a torn last unit
    again = merge_shards(str(out), [str(s) for s in shards])
    assert again["datasets"] == whole["datasets"]
    assert (out / "journal.jsonl").read_bytes().count(b'{"_done"') == data.count(b'{"_done"')


def test_cli_merge_of_a_missing_shard_is_one_line(shards, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "codeexecutor", "build", "merge", str(shards[1]), "--out", str(tmp_path / "m")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "0/2 missing" in out.stderr


def test_snapshots_of_one_repository_split_by_module_path(tmp_path):
    """Given as versions of one repository (`--lineage`), every version of a module is in
    the same split; given as separate corpora, the split is drawn per corpus and module."""
    from curricula.functions import FunctionsBuilder

    for snap in ("2020", "2024"):
        for k in range(40):
            path = tmp_path / snap / "pkg" / f"mod{k}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f'def f{k}(x):\n    """\n    >>> f{k}(2)\n    {2 + k}\n    """\n    return x + {k}\n')
    roots = [str(tmp_path / "2020"), str(tmp_path / "2024")]
    linked = FunctionsBuilder(roots, str(tmp_path / "out"), humaneval=None, lineage=True, licence="MIT").splits()
    assert set(linked) == {f"pkg/mod{k}.py" for k in range(40)}
    apart = FunctionsBuilder(roots, str(tmp_path / "out2"), humaneval=None, licence="MIT").splits()
    assert len(apart) == 80 and any(apart[f"2020/pkg/mod{k}.py"] != apart[f"2024/pkg/mod{k}.py"] for k in range(40))


def test_module_qualified_calls_and_a_tests_setup_become_programs(tmp_path, pool):
    """`m.f(x)` after `import pkg.m as m` (or `from pkg import m`) runs through a class named
    `m` holding what is read off it; a test's statements before its assertion are the
    program's setup where the call reads what they bind."""
    from curricula.function_calls import (
        Corpus,
        assemble,
        assertion_calls,
        doctest_calls,
        driver_statements,
        uses_locals,
    )

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "util.py").write_text(
        "def double(x):\n    return 2 * helper(x)\n\n\ndef helper(x):\n    return x\n"
    )
    (tmp_path / "pkg" / "api.py").write_text(
        'from pkg import util\n\n\ndef quad(x):\n    """\n    >>> util.double(quad(1))\n'
        '    8\n    """\n    return util.double(util.double(x))\n'
    )
    (tmp_path / "test_util.py").write_text(
        "import pkg.util as u\n\n\ndef test_double():\n    xs = [3, 4]\n    n = len(xs)\n"
        "    assert u.double(xs[0]) == 6\n    assert u.double(5) == 10\n"
    )
    corpus = Corpus(str(tmp_path))
    programs = []
    for relpath in ("pkg/api.py", "test_util.py"):
        mod = corpus.parse(relpath)
        calls = assertion_calls(mod) if relpath.startswith("test") else doctest_calls(mod)
        for call in calls:
            assert not uses_locals(corpus, mod, call), call
            programs.append(assemble(corpus, mod, driver_statements(call)))
    outputs = [pool.execute(p).stdout for p in programs]
    assert outputs == ["8\n", "6\n", "10\n"], (outputs, programs)
    assert "class u:\n    double = staticmethod(double)" in programs[1] and "xs = [3, 4]" in programs[1]
    assert "xs = " not in programs[2]  # a call that reads nothing the test bound gets no setup


def test_a_full_disk_is_one_line_and_the_command_to_rerun(monkeypatch, tmp_path, capsys):
    import errno

    import curricula.codenet
    from codeexecutor.cli import main

    def full(out, shards, partial=False):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "m" / "journal.jsonl"))

    monkeypatch.setattr(curricula.codenet, "merge_shards", full)
    assert main(["build", "merge", str(tmp_path / "s0"), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no space left" in err and "journal.jsonl" in err and "same command" in err


def test_decontaminate_finds_a_build_program_planted_in_a_reference(tmp_path, demo_data):
    """`codeexecutor build decontaminate`: a training program of the build, planted as a
    HumanEval solution, is reported as shared (whole, in its split); a folder that is no
    functions build is one line."""
    import datasets

    from codeexecutor.cli import main

    row = datasets.load_from_disk(str(demo_data / "functions" / "functions"))["train"][0]
    refs = tmp_path / "refs" / "humaneval"
    refs.mkdir(parents=True)
    with gzip.open(refs / "HumanEval.jsonl.gz", "wt") as f:
        f.write(json.dumps({"task_id": "planted", "prompt": row["code"], "canonical_solution": ""}) + "\n")
    out = tmp_path / "report.json"
    args = ["build", "decontaminate", str(demo_data / "functions"), "--references", str(tmp_path / "refs")]
    assert main([*args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["references"]["humaneval_solutions"]["programs"] == {"train": 1}
    assert report["programs_in_two_splits"] == 0 and set(report["references"]) == {"humaneval_solutions"}
    assert main(["build", "decontaminate", str(tmp_path), "--references", str(tmp_path / "refs")]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([*args[:3], "--references", str(empty)]) == 2  # no corpus to compare against: not "clean"


def _rows(out: pathlib.Path, name: str) -> list[dict]:
    built = datasets.load_from_disk(str(out / name))
    return [r for split in built for r in built[split]]


def test_bugs_in_the_functions_make_an_errors_set(package, tmp_path):
    from curricula.bugs import FunctionBugsBuilder
    from mutation.bugs import BUGS

    out = tmp_path / "fbugs"
    stats = FunctionBugsBuilder([str(package)], str(out), per_bug=1, humaneval=None, setup=BuildSetup(workers=1)).run(
        progress=False
    )
    rows = [r for name in ("functions", "functions_errors") for r in _rows(out, name)]
    originals = {r["id"]: r for r in rows if r["kind"] == "original"}
    bugs = [r for r in rows if r["kind"] == "bug"]
    assert originals and bugs and {r["kind"] for r in rows} == {"original", "bug"}  # no mutants of the twelve
    assert any(r["status"] == "error" for r in bugs) and any(r["status"] == "ok" for r in bugs)
    for r in bugs:
        assert len(r["operators"]) == 1 and r["operators"][0] in BUGS
        source = originals.get(r["source_id"])
        if source is not None:  # the call that drives the program is left as it was
            assert r["code"].rstrip().splitlines()[-1] == source["code"].rstrip().splitlines()[-1]
    crashes = sum(n for per in stats["per_operator_status"].values() for k, n in per.items() if k.startswith("error:"))
    assert crashes and set(stats["per_operator_status"]) <= set(BUGS)
    assert stats["class_mix"]["crashes"] >= crashes
    # a crash the bug made is kept whatever its type: a misspelt name's NameError is the bug's
    ran = {k[6:] for per in stats["per_operator_status"].values() for k in per if k.startswith("error:")}
    kept = {json.loads(r["error"])["type"] for r in bugs if r["status"] == "error"}
    assert "NameError" in ran and ran == kept


def test_a_bugs_build_reads_contest_programs_or_functions_not_both(package, tmp_path):
    from codeexecutor.errors import UsageError
    from curricula.build import build

    for given in ({}, {"codenet": [str(package)], "from": [str(package)]}):
        with pytest.raises(UsageError, match="one of codenet"):
            build("bugs", str(tmp_path / "out"), given)
