"""The interpreter's check of what a program imports: names this Python lacks, found statically."""

import subprocess
import sys

from codeexecutor.modeling.interpreter_check import first_missing, missing
from eval.crashes import static_verdict


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


def test_modules_with_effects_are_never_imported_to_be_asked():
    code = "import antigravity\nantigravity.fly()\nimport this\nthis.nothing\n"
    probe = (
        "import sys\nfrom codeexecutor.modeling.interpreter_check import missing\n"
        f"print(missing({code!r}), 'antigravity' in sys.modules, 'this' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] False False"


def test_the_baseline_without_a_model_reads_the_check_first():
    assert static_verdict("from fractions import gcd\nn = int(input())\nprint(gcd(n, 2))\n") == ("ImportError", 1)
    assert static_verdict("n = int(input())\nimport fractions\nprint(fractions.gcd(n, 2))\n") == ("EOFError", 1)
