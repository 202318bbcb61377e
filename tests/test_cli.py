import json
import subprocess
import sys

from .conftest import FIXTURES


def cli(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "codeexecutor", *args], capture_output=True, text=True, input=stdin, timeout=60
    )


def test_help_everywhere():
    out = cli("--help")
    assert out.returncode == 0 and "exec" in out.stdout and "inline" in out.stdout
    for sub in ("exec", "inline"):
        assert cli(sub, "--help").returncode == 0


def test_exec_json(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("n = int(input())\nprint(n * 2)\n")
    inp = tmp_path / "in.txt"
    inp.write_text("21\n")
    out = cli("exec", str(prog), "--stdin", str(inp), "--json")
    assert out.returncode == 0, out.stderr
    obj = json.loads(out.stdout)
    assert set(obj) == {"status", "steps", "stdout", "error"}
    assert obj["status"] == "ok" and obj["stdout"] == "42\n" and obj["error"] is None
    assert obj["steps"][1] == {"line": 2, "state": {"n": "21"}, "output": "42\n"}


def test_exec_readable_and_error_exit_code_zero(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("x = 1\ny = x / 0\n")
    out = cli("exec", str(prog))
    assert out.returncode == 0
    assert "x = 1" in out.stdout and "ZeroDivisionError at line 2" in out.stdout


def test_usage_errors_are_one_line_and_nonzero(tmp_path):
    missing = cli("exec", str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and "not found" in missing.stderr and len(missing.stderr.splitlines()) == 1
    binary = tmp_path / "b.py"
    binary.write_bytes(b"\x7fELF\x00\x01")
    out = cli("exec", str(binary))
    assert out.returncode == 2 and "binary" in out.stderr
    out = cli("exec", str(FIXTURES / "hostile" / "python2.py"))
    assert out.returncode == 2 and "Python 2" in out.stderr and "2to3" in out.stderr
    prog = tmp_path / "p.py"
    prog.write_text("x = 1\n")
    out = cli("exec", str(prog), "--timeout", "-1")
    assert out.returncode == 2 and "timeout" in out.stderr


def test_inline_cli(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("a, b = map(int, input().split())\nprint(a + b)\n")
    inp = tmp_path / "in.txt"
    inp.write_text("3 4\n")
    out = cli("inline", str(prog), "--stdin", str(inp))
    assert out.returncode == 0 and out.stdout == "a, b = map(int, '3 4'.split())\nprint(a + b)\n"
