"""Hostile programs that try to read what is not theirs; and what programs may still read."""

import os
import pathlib

import pytest

from codeexecutor.execution import ExecStatus

SECRET = "s3cr3t-token-5a1c"


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("secret") / "token.txt"
    path.write_text(SECRET + "\n")
    return path


def _violates(pool, code: str, what: str, stdin: str = ""):
    """The run ends as a violation naming `what` (so it was stopped at the read, not by a
    time limit), and nothing secret reached its output."""
    r = pool.execute(code, stdin=stdin)
    assert r.status is ExecStatus.VIOLATION, (r.status, r.error, r.stdout[:200])
    assert what in r.error.message, r.error.message
    assert SECRET not in r.stdout and "root:" not in r.stdout
    return r


def test_etc_shadow(pool):
    _violates(pool, "print(open('/etc/shadow').read())\n", "/etc/shadow")


def test_a_secret_file_in_tmp(pool, secret_file):
    _violates(pool, f"print(open({str(secret_file)!r}).read())\n", str(secret_file))
    _violates(pool, f"import os\nprint(os.listdir({str(secret_file.parent)!r}))\n", str(secret_file.parent))


def test_the_invoking_users_home(pool):
    home = os.path.expanduser("~")
    _violates(pool, f"import os\nprint(os.listdir({home!r}))\n", home)
    _violates(pool, f"import pathlib\nprint(list(pathlib.Path({home!r}).iterdir()))\n", home)


def test_other_processes_in_proc(pool):
    _violates(pool, "import os\nprint(open(f'/proc/{os.getppid()}/cmdline').read())\n", "/proc/")
    _violates(pool, "import os\nprint(os.listdir(f'/proc/{os.getppid()}/cwd'))\n", "/proc/")
    _violates(pool, "import os\nfor p in os.listdir('/proc'):\n    print(open(f'/proc/{p}/environ').read())\n", "/proc")
    _violates(pool, "print(open('/proc/1/environ', 'rb').read())\n", "/proc/1/environ")


def test_a_symlink_in_the_scratch_dir_pointing_outside(pool):
    _violates(pool, "import os\nos.symlink('/etc/passwd', 'link')\nprint(open('link').read())\n", "/etc/passwd")
    _violates(pool, "print(open('/proc/self/root/etc/passwd').read())\n", "/proc/self/root/etc/passwd")


def test_the_project_and_its_git_folder(pool):
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    _violates(pool, f"print(open({root + '/README.md'!r}).read())\n", "README.md")
    _violates(pool, f"import os\nprint(os.listdir({root!r}))\n", root)


def test_what_running_python_needs_is_still_readable(pool):
    code = (
        "import os, json, statistics, secrets, zoneinfo, fractions\n"
        "src = open(os.__file__).read(20)\n"
        "rnd = len(open('/dev/urandom', 'rb').read(8))\n"
        "null = open('/dev/null').read()\n"
        "with open('mine.txt', 'w') as f:\n"
        "    f.write('kept')\n"
        "back = open('mine.txt').read()\n"
        "here = sorted(os.listdir('.'))\n"
        "line = open('/dev/stdin').readline().strip()\n"
        "tz = zoneinfo.ZoneInfo('Asia/Tokyo').key\n"
        "print(len(src), rnd, repr(null), back, 'mine.txt' in here, line, tz, statistics.mean([1, 2, 3]))\n"
    )
    r = pool.execute(code, stdin="hello\n")
    assert r.status is ExecStatus.OK, (r.error, r.stdout)
    assert r.stdout == "20 8 '' kept True hello Asia/Tokyo 2\n"


def test_contest_libraries_run(pool):
    code = (
        "from sortedcontainers import SortedList\n"
        "import networkx as nx\n"
        "from scipy.sparse.csgraph import shortest_path\n"
        "import numpy as np\n"
        "s = SortedList([3, 1, 2])\n"
        "g = nx.path_graph(4)\n"
        "d = shortest_path(np.array([[0, 1, 0], [1, 0, 2], [0, 2, 0]]), directed=False)\n"
        "print(list(s), nx.shortest_path_length(g, 0, 3), int(d[0][2]))\n"
    )
    from codeexecutor.execution import Limits

    r = pool.execute(code, "", Limits(timeout=20.0))  # importing scipy alone takes ~1 CPU-second on a busy machine
    assert r.status is ExecStatus.OK, (r.error, r.stdout)
    assert r.stdout == "[1, 2, 3] 3 3\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="the privilege drop applies to a worker started as root")
def test_children_of_a_root_worker_report_whether_they_drop_privileges(pool):
    from codeexecutor.execution.sandbox import UNPRIVILEGED

    r = pool.execute("import os\nprint(os.getuid(), os.getgid(), os.getgroups())\n")
    assert r.status is ExecStatus.OK
    dropped = [w.unprivileged for w in pool._all]
    if dropped and dropped[0]:
        assert r.stdout == f"{UNPRIVILEGED} {UNPRIVILEGED} []\n"
    else:  # an interpreter the unprivileged user cannot read (under /root): the audit layer alone
        assert r.stdout.startswith("0 0")


def test_privilege_drop_check_reads_the_path_modes(tmp_path):
    from codeexecutor.execution.sandbox import unprivileged_can_run

    open_dir = tmp_path / "open"
    closed = tmp_path / "closed"
    open_dir.mkdir(mode=0o755)
    closed.mkdir(mode=0o700)
    os.chmod(tmp_path, 0o755)
    (closed / "inner").mkdir(mode=0o755)
    assert unprivileged_can_run([str(open_dir)]) is all(
        os.stat(p).st_mode & 0o001 for p in [tmp_path, *tmp_path.parents]
    )
    assert unprivileged_can_run([str(closed / "inner")]) is False
