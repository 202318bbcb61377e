"""Interactive sessions of reST documentation as programs (the Library Reference's `>>>` examples).

A root holding `*.rst.txt` or `*.rst` files (Sphinx's sources of the Python Library
Reference, for one) is a source of the functions build; each file is a unit and a split
group. A *session* is a run of `>>>` / `...` lines with the output the documentation shows
after each, ended by a blank line. Each session becomes one program:

    <the statements of the file's earlier sessions that it needs>
    <the session; an example that shows a value prints it: print(repr(expr))>

"Needs" follows names backwards: a statement is kept if it binds a name the rest reads
(import, def, class, assignment) or changes one in place (`x[0] = ...`, `x += ...`,
`x.append(...)`), and its own names are then needed in turn. A session ends at its first
example whose shown output is a traceback (that example kept: a crashing program).

Skipped and counted: files whose category in an `index.tsv` (columns `file` and
`category`, in the root or a folder above) is not `pure`; sessions that import a module
reaching outside the program (files, network, processes, the clock, a GUI, the
interpreter's own state) or call `open`/`input`; examples marked `# doctest: +SKIP`;
sessions that do not parse as Python 3.
"""

from __future__ import annotations

import ast
import csv
import importlib
import os
import re
import sys
from collections import Counter

from curricula.function_calls import BUILTINS, Call, Program, _used, is_print, plain_source

OUTSIDE = frozenset(
    {
        "os",
        "sys",
        "io",
        "shutil",
        "tempfile",
        "pathlib",
        "glob",
        "fileinput",
        "filecmp",
        "linecache",
        "zipfile",
        "tarfile",
        "sqlite3",
        "dbm",
        "shelve",
        "mmap",
        "fcntl",
        "subprocess",
        "socket",
        "ssl",
        "select",
        "selectors",
        "http",
        "urllib",
        "ftplib",
        "smtplib",
        "imaplib",
        "poplib",
        "nntplib",
        "telnetlib",
        "socketserver",
        "xmlrpc",
        "webbrowser",
        "asyncio",
        "threading",
        "multiprocessing",
        "concurrent",
        "sched",
        "signal",
        "time",
        "timeit",
        "random",
        "secrets",
        "uuid",
        "tkinter",
        "turtle",
        "idlelib",
        "ctypes",
        "gc",
        "sysconfig",
        "importlib",
        "pdb",
        "platform",
        "locale",
        "logging",
        "tracemalloc",
        "faulthandler",
        "resource",
        "getpass",
        "pty",
        "tty",
        "termios",
        "site",
        "zipimport",
        "zipapp",
        "unittest",
        "doctest",
        "atexit",
        "weakref",
        "inspect",
        "dis",
    }
)
OUTSIDE_CALLS = frozenset({"open", "input", "exec", "eval", "breakpoint", "help", "globals", "locals", "id"})
MAX_SETUP = 60  # statements taken from earlier sessions
MAX_SESSION = 80  # statements of one session
_PROMPT = re.compile(r"^(\s*)(>>>|\.\.\.)( |$)")


def is_docs_root(root: str) -> bool:
    """reST files at the top and no Python module anywhere below (a package with a README.rst
    is a package)."""
    if not any(f.endswith((".rst.txt", ".rst")) for f in os.listdir(root)):
        return False
    return not any(f.endswith(".py") for _, _, files in os.walk(root) for f in files)


def _categories(root: str) -> dict[str, str]:
    folder = os.path.abspath(root)
    for _ in range(3):
        path = os.path.join(folder, "index.tsv")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return {r["file"]: r["category"] for r in csv.DictReader(f, delimiter="\t") if "category" in r}
        folder = os.path.dirname(folder)
    return {}


def sessions(text: str) -> list[tuple[int, list[tuple[int, str, str]]]]:
    """(first line, examples) per session; an example is (line, source, shown output)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        m = _PROMPT.match(lines[i])
        if not (m and m.group(2) == ">>>"):
            i += 1
            continue
        indent, start, examples = len(m.group(1)), i + 1, []
        while i < len(lines) and lines[i].strip():
            m = _PROMPT.match(lines[i])
            if not (m and m.group(2) == ">>>"):
                break
            line, source = i + 1, [lines[i][m.end() :]]
            i += 1
            while i < len(lines) and (m := _PROMPT.match(lines[i])) and m.group(2) == "...":
                source.append(lines[i][m.end() :])
                i += 1
            want = []
            while i < len(lines) and lines[i].strip() and not ((m := _PROMPT.match(lines[i])) and m.group(2) == ">>>"):
                want.append(lines[i][indent:])
                i += 1
            examples.append((line, "\n".join(source), "\n".join(want)))
        out.append((start, examples))
    return out


_CODE_DIRECTIVES = ("code-block", "code", "testcode", "testsetup", "sourcecode")


def literal_blocks(text: str) -> list[tuple[int, str]]:
    """(first line, code) of the literal blocks (`::` paragraphs, code directives) that
    parse as Python and are not interactive sessions: definitions later sessions use."""
    lines, out = text.splitlines(), []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.endswith("::"):
            continue
        if stripped.startswith(".."):
            directive = stripped[2:].split("::")[0].strip()
            if directive not in _CODE_DIRECTIVES:
                continue
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or lines[j].lstrip().startswith(":")):
            j += 1
        if j >= len(lines):
            continue
        indent = len(lines[j]) - len(lines[j].lstrip())
        if indent <= len(line) - len(line.lstrip()) or _PROMPT.match(lines[j]):
            continue
        first, block = j, []
        while (
            j < len(lines)
            and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) >= indent)
            and not (_PROMPT.match(lines[j]) and len(lines[j]) - len(lines[j].lstrip()) == indent)
        ):
            block.append(lines[j][indent:])
            j += 1
        code = "\n".join(block).strip("\n") + "\n"
        try:
            ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        out.append((first + 1, code))
    return out


def _documented_imports(module: str, names: set[str]) -> list[ast.stmt]:
    """`from M import name` for the names a session reads that the documented standard
    module M defines: the page's prose imports them once for all its examples."""
    if module not in sys.stdlib_module_names or module in OUTSIDE or module in ("antigravity", "this", "__main__"):
        return []
    try:
        mod = importlib.import_module(module)
    except Exception:  # a module that does not import here (a platform's own) offers nothing
        return []
    found = sorted(n for n in names if hasattr(mod, n) and not n.startswith("_"))
    return ast.parse(f"from {module} import {', '.join(found)}").body if found else []


def _base(target: ast.AST) -> str | None:
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


def _changes(stmt: ast.stmt) -> set[str]:
    """Names a statement changes in place: `x[i] = v`, `x.a = v`, `x += v`, `x.m(...)`, `del x[i]`."""
    if isinstance(stmt, ast.Assign):
        targets = [t for t in stmt.targets if isinstance(t, (ast.Attribute, ast.Subscript))]
    elif isinstance(stmt, ast.AugAssign):
        targets = [stmt.target]
    elif isinstance(stmt, ast.AnnAssign):
        targets = [stmt.target] if isinstance(stmt.target, (ast.Attribute, ast.Subscript)) else []
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        targets = [stmt.value.func.value]
    elif isinstance(stmt, ast.Delete):
        targets = stmt.targets
    else:
        targets = []
    return {n for n in map(_base, targets) if n}


def _stored(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _binds(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement (re)binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"}
    if isinstance(stmt, ast.Assign):
        return set().union(*(_stored(t) for t in stmt.targets))
    if isinstance(stmt, (ast.AnnAssign, ast.For, ast.AsyncFor)):
        return _stored(stmt.target)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return set().union(*(_stored(i.optional_vars) for i in stmt.items if i.optional_vars is not None))
    return set()


def _free(stmts: list[ast.stmt]) -> set[str]:
    """Names the statements read before (or without) binding them; names bound anywhere
    inside a statement (a function's locals, its parameters) count as its own."""
    bound, free = set(BUILTINS), set()
    for s in stmts:
        local = _stored(s) | {a.arg for a in ast.walk(s) if isinstance(a, ast.arg)}
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            local = set()  # `x = x + 1` at the top level reads the earlier x
        free |= _used(s) - bound - local
        bound |= _binds(s)
    return free


def needed_setup(earlier: list[ast.stmt], stmts: list[ast.stmt]) -> list[ast.stmt]:
    """The earlier statements the session needs, in their order (a backward pass over names)."""
    need, keep = _free(stmts), []
    for s in reversed(earlier):
        binds, changes = _binds(s), _changes(s)
        if need & (binds | changes):
            keep.append(s)
            need -= binds - changes
            need |= _free([s])
    return keep[::-1]


def _session_statements(examples, counts: Counter) -> tuple[list[ast.stmt], list[ast.stmt]] | None:
    """The session as it runs (displays printed) and as setup for later ones (displays left
    out); None when it does not parse."""
    run, setup = [], []
    for _line, source, want in examples:
        if "doctest: +SKIP" in source:
            counts["skip:docs_example_marked_skip"] += 1
            continue
        try:
            body = ast.parse(source).body
        except SyntaxError:
            return None
        crashed = want.startswith("Traceback (most recent call last)")
        if len(body) == 1 and isinstance(body[0], ast.Expr) and want and not crashed and not is_print(body[0].value):
            run += ast.parse(f"print(repr({ast.unparse(body[0].value)}))").body
            setup += body if _changes(body[0]) else []
            continue
        run += body
        if crashed:
            return run, setup
        setup += body
    return run, setup


def _outside(tree: ast.Module) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            hit = sorted({a.name.split(".")[0] for a in node.names} & OUTSIDE)
        elif isinstance(node, ast.ImportFrom):
            hit = sorted({(node.module or "").split(".")[0]} & OUTSIDE)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in OUTSIDE_CALLS:
            hit = [node.func.id]
        else:
            continue
        if hit:
            return hit[0]
    return None


class DocsCorpus:
    kind = "docs"

    def __init__(self, root: str) -> None:
        self.root = root
        self.category = _categories(root)
        self.files = []
        for name in sorted(os.listdir(root)):
            if name.endswith((".rst.txt", ".rst")):
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    if ">>>" in f.read():
                        self.files.append(name)

    def groups(self) -> list[str]:
        return list(self.files)

    def programs(self, relpath: str, counts: Counter) -> list[Program]:
        category = self.category.get(relpath, "pure")
        if category != "pure":
            counts[f"skip_module:category:{category}"] += 1
            return []
        with open(os.path.join(self.root, relpath), encoding="utf-8", errors="replace") as f:
            text = f.read()
        events = sorted(
            [(line, "block", code) for line, code in literal_blocks(text)]
            + [(line, "session", examples) for line, examples in sessions(text)],
            key=lambda e: e[0],
        )
        documented = relpath.split(".")[0]
        earlier: list[ast.stmt] = []
        out = []
        for start, what, content in events:
            if what == "block":
                earlier += ast.parse(content).body
                continue
            counts["docs_sessions"] += 1
            parsed = _session_statements(content, counts)
            if parsed is None:
                counts["skip:docs_session_does_not_parse"] += 1
                continue
            run, setup = parsed
            if not run:
                continue
            head = needed_setup(earlier, run)
            earlier += setup
            head = _documented_imports(documented, _free(head + run)) + head
            if len(head) > MAX_SETUP or len(run) > MAX_SESSION:
                counts["skip:docs_session_too_long"] += 1
                continue
            touched = _outside(ast.Module(body=head + run, type_ignores=[]))
            if touched:
                counts[f"skip:docs_touches:{touched}"] += 1
                continue
            before = plain_source(ast.unparse(ast.Module(body=head, type_ignores=[]))) if head else ""
            code = before + plain_source(ast.unparse(ast.Module(body=run, type_ignores=[])))
            last = run[-1]
            expr = ast.unparse(last.value.args[0].args[0] if _is_display(last) else last)
            ref = Call(relpath.split(".")[0], relpath, start, (), expr, "docs")
            out.append(Program(ref, code, relpath, len(before.encode("utf-8")), False))
        return out


def _is_display(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and is_print(stmt.value)
        and len(stmt.value.args) == 1
        and isinstance(stmt.value.args[0], ast.Call)
        and isinstance(stmt.value.args[0].func, ast.Name)
        and stmt.value.args[0].func.id == "repr"
        and len(stmt.value.args[0].args) == 1
    )
