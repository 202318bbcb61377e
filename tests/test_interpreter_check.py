"""The interpreter's check of what a program imports: names this Python lacks, found statically."""

import subprocess
import sys
from pathlib import Path

from codeexecutor.modeling.interpreter_check import first_missing, missing
from eval.crashes import static_verdict

ROOT = Path(__file__).resolve().parent.parent


def test_a_name_gone_from_the_standard_library_is_a_sure_crash():
    assert first_missing("import sys\nfrom fractions import gcd\nprint(gcd(4, 6))\n") == ("ImportError", 2)
    assert first_missing("import fractions\nx = 3\nprint(fractions.gcd(x, 6))\n") == ("AttributeError", 3)
    assert first_missing("import no_such_module_here_at_all as m\nm.f()\n") == ("ModuleNotFoundError", 1)
    assert first_missing("from os.no_such_sub import x\n") == ("ModuleNotFoundError", 1)
    # what this Python has is never flagged: names, submodules, aliases
    clean = "import math\nimport os.path\nimport collections as c\nfrom os import path\nfrom math import gcd\n"
    assert first_missing(clean + "print(math.gcd(4, 6), os.path.join('a'), c.Counter(), path.sep, gcd(1, 2))\n") is None


def test_fallbacks_rebindings_and_names_the_program_sets_are_left_alone():
    guarded = "try:\n    from fractions import gcd\nexcept ImportError:\n    from math import gcd\n"
    assert first_missing(guarded) is None
    by_version = (
        "import sys\nif sys.version_info.minor >= 5:\n    from math import gcd\nelse:\n    from fractions import gcd\n"
    )
    assert first_missing(by_version) is None
    assert first_missing("import math\nmath = object()\nprint(math.nothing)\n") is None  # not the module any more
    assert first_missing("import types\ntypes.mine = 1\nprint(types.mine)\n") is None  # the program sets it
    assert missing("def f(:\n") == []  # does not parse: nothing to say
    newest_first = "try:\n    from math import gcd\nexcept ImportError:\n    from fractions import gcd\n"
    assert first_missing(newest_first) is None  # the handler is the fallback
    assert (
        first_missing("import sys, math, fractions\ng = math.gcd if sys.version_info >= (3, 5) else fractions.gcd\n")
        is None
    )
    assert first_missing("import fractions\nif hasattr(fractions, 'gcd'):\n    print(fractions.gcd(2, 4))\n") is None
    flag = "import sys\nPY2 = sys.version_info[0] == 2\nif PY2:\n    from fractions import gcd\n"
    assert first_missing(flag) is None
    # bound more than once: not the module for sure
    twice = "def f():\n    import numpy as m\n    return m.array\n"
    twice += "def g():\n    import math as m\n    return m.pi\nf(); g()\n"
    assert first_missing(twice) is None
    assert first_missing("import math\ntry:\n    pass\nexcept ValueError as math:\n    pass\nmath.nothing\n") is None


def test_code_that_may_never_run_is_left_alone():
    helper = "import fractions\ndef lcm(a, b):\n    return a * b // fractions.gcd(a, b)\nprint(1)\n"
    assert first_missing(helper) is None  # nothing calls lcm
    assert first_missing(helper.replace("print(1)", "print(lcm(2, 3))")) == ("AttributeError", 3)
    assert first_missing("if False:\n    from fractions import gcd\nprint(1)\n") is None


def test_modules_with_effects_are_never_imported_to_be_asked(tmp_path):
    code = (
        "import antigravity\nantigravity.fly()\nimport this\nthis.nothing\n"
        "from unittest.__main__ import x\nfrom venv.__main__ import y\nfrom test.autotest import z\n"
    )
    probe = (
        "import sys\nfrom codeexecutor.modeling.interpreter_check import missing\n"
        f"print(missing({code!r}), 'antigravity' in sys.modules, 'this' in sys.modules)\n"
    )
    env = {"PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.stdout.strip() == "[] False False", run.stderr  # unittest's or venv's __main__ would have run
    assert list(tmp_path.iterdir()) == []


def test_the_baseline_without_a_model_reads_the_check_first():
    assert static_verdict("from fractions import gcd\nn = int(input())\nprint(gcd(n, 2))\n") == ("ImportError", 1)
    assert static_verdict("n = int(input())\nimport fractions\nprint(fractions.gcd(n, 2))\n") == ("EOFError", 1)
