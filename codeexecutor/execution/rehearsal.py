"""One rehearsal run of a child's code path, in the worker before it forks.

What CPython builds lazily on first use (type-cache entries, the line tables tracing
needs, interned names), the worker then builds once instead of every child building it
on pages it shares with the worker (each such write a copy-on-write fault).
"""

from __future__ import annotations

import _thread
import builtins
import io
import marshal
import math
import os
import posix
import resource
import signal
import sys
import sysconfig
import types

from codeexecutor.execution.limits import WireLimits
from codeexecutor.execution.result import to_json
from codeexecutor.execution.sandbox import _real_close, _Run, prepare_zygote
from codeexecutor.execution.status import ExecStatus
from codeexecutor.execution.tracer import PROGRAM_FILENAME

# The program the worker runs in-process, under a throwaway run's tracer, before it forks
# (see `rehearse`): the usual shapes of contest code (reading input, loops, calls,
# recursion, containers, formatting, a caught exception). Small: its request goes
# through one pipe that the same thread then reads.
_REHEARSAL = """\
import sys
from collections import Counter, defaultdict, deque
from heapq import heappop, heappush
from bisect import bisect_left
from itertools import accumulate, permutations
from math import gcd, sqrt
n = int(input())
a = list(map(int, input().split()))
readline = sys.stdin.readline
s = readline().strip()
grid = [list(readline().rstrip()) for _ in range(2)]
d = defaultdict(int)
for i, x in enumerate(a):
    d[x] += i
c = Counter(a)
total = 0
for x in sorted(a, key=lambda v: -v)[:3]:
    if x % 2 == 0:
        continue
    total += x
else:
    total -= 1
i = 0
while i < n and a[i] != 5:
    i += 1
def f(k, memo={}):
    if k < 2:
        return k
    if k not in memo:
        memo[k] = f(k - 1) + f(k - 2)
    return memo[k]
def bfs(start):
    dist = [-1] * n
    dist[start] = 0
    q = deque([start])
    while q:
        v = q.popleft()
        for w in (v - 1, v + 1):
            if 0 <= w < n and dist[w] < 0:
                dist[w] = dist[v] + 1
                q.append(w)
    return dist
class P:
    def __init__(self, v):
        self.v = v
    def __lt__(self, other):
        return self.v < other.v
    def __repr__(self):
        return f"P({self.v})"
ps = [P(x) for x in a]
h = []
for x in a:
    heappush(h, (x, str(x)))
best = min(ps).v
acc = list(accumulate(a))
words = s.split()
t = (n, best, f(12), len(words), gcd(12, 18), int(sqrt(n)), bisect_left(acc, 5), pow(3, n, 7))
perm = max(sum(p[:2]) for p in permutations(a[:3]))
m = {k: v for k, v in c.items() if v > 1}
try:
    q = a[n] // 0
except (IndexError, ZeroDivisionError) as e:
    q = -1
print(n, sum(a), max(a), total, *t, sep=" ", end="\\n")
print("{} {:.3f} {}".format(s.upper(), total / n, dict(d)), q, bfs(0), heappop(h), ps[0])
print(" ".join(map(str, a)), [w[::-1] for w in words], set(a) - {1}, grid, m, perm, "%d %s" % (i, abs(-n)))
print(f"{best:>4}|{s!r}|{divmod(n, 3)}|{round(total / 3, 2)}|{'YES' if n > 3 else 'NO'}")
sys.stdout.write(str(round(3.5)) + "\\n")
"""
_REHEARSAL_INPUT = b"5\n3 1 4 1 5\nhello sandbox world\n#.#\n.#.\n"
_REHEARSAL_LIMITS = {
    "timeout": 1.0,
    "wall": 2.0,
    "memory_mb": 1024,
    "max_steps": 1024,
    "max_output": 1 << 20,
    "value_limit": 100,
}


def rehearse() -> bool:
    """In the worker, before it forks: run `_REHEARSAL` once through a child's own code
    path (request decoding, tracer, output capture, result building) on a throwaway run
    that is never active. True when it ran to the end.

    What CPython builds lazily on first use, it then builds here once instead of in every
    child: attribute-lookup entries in its global type cache, the line tables that tracing
    needs for each code object it runs, interned names. Each of those writes, done in a
    child, lands on a page it shares with the worker and costs a copy-on-write fault.
    Then primes the type-cache entries of the parts of the path the program does not
    reach (`_warm_type_cache`). Measured on the real programs of bench_exec: 5% fewer
    page faults per program and about 5% more programs per second (paired passes).
    One run is enough: 24 runs gave no fewer faults and were slower (more freed blocks
    left behind).

    Leaves no state behind: the template run (`prepare_zygote`) is not touched, nothing
    reaches the worker's fds, the interpreter's streams and `__main__` are put back, and
    a failure is swallowed (the children only lose the head start).
    """
    from codeexecutor.execution.framing import recv, send

    template = prepare_zygote()
    saved = sys.stdin, sys.stdout, sys.stderr, sys.modules.get("__main__")
    read, write = os.pipe()
    stdin_fd = None
    run = _Run()
    run.scratch = os.path.join(os.sep, "nonexistent", "rehearsal")  # _read_fd1 finds nothing
    try:
        request = (
            marshal.dumps(compile(_REHEARSAL, PROGRAM_FILENAME, "exec")),
            _REHEARSAL_INPUT,
            _REHEARSAL_LIMITS,
            {},
        )
        send(write, request)
        code_bytes, stdin, wire, _ = recv(read)
        run.configure(WireLimits(wire))
        try:  # the input as a child reads it: a TextIOWrapper over a file descriptor
            stdin_fd = os.memfd_create("rehearsal")
            os.write(stdin_fd, stdin)
            os.lseek(stdin_fd, 0, os.SEEK_SET)
            raw = io.FileIO(stdin_fd, "rb", closefd=False)
        except (AttributeError, OSError):
            raw = io.BytesIO(stdin)
        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = builtins
        module.__file__ = PROGRAM_FILENAME
        sys.modules["__main__"] = module
        sys.stdin = io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="replace")
        sys.stdout, sys.stderr = run.stdout_text, run.stderr_text
        code = marshal.loads(code_bytes)
        run.tracer.start(code)
        try:
            exec(code, module.__dict__)
        finally:
            run.tracer.stop()
        to_json(run._result(ExecStatus.OK, None, "", None))
        _warm_type_cache((run, run.tracer, run.stdout, run.stdout_text, WireLimits(wire)))
        return not template.active and not template.tracer.steps
    except Exception:
        return False
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved[:3]
        if saved[3] is not None:
            sys.modules["__main__"] = saved[3]
        for fd in (read, write, stdin_fd):
            if fd is not None:
                _real_close(fd)


def _warm_type_cache(objects: tuple) -> None:
    """Look up, on each of `objects` and on the modules a child uses, every name that the
    code of the child's modules (this one, framing, tracer) mentions and that exists there.

    Each attribute access on an object (a module too) first consults CPython's global
    type-attribute cache; a miss writes a cache entry and reference counts. This primes
    the entries of the child's code path that the rehearsal program does not reach (the
    exits, the attach and limit calls): measured 18 -> 5 faults a child in type lookups.
    """
    import codeexecutor.execution.framing as framing
    import codeexecutor.execution.limits as limits
    import codeexecutor.execution.output as output
    import codeexecutor.execution.policy as policy
    import codeexecutor.execution.result as result
    import codeexecutor.execution.sandbox as sandbox
    import codeexecutor.execution.tracer as tracer_module

    names: set[str] = set()
    pending = []
    for module in (sandbox, sys.modules[__name__], framing, tracer_module, policy, limits, output, result):
        for value in vars(module).values():
            members = vars(value).values() if isinstance(value, type) and value.__module__ == module.__name__ else ()
            for item in (value, *members):
                code = getattr(item, "__code__", None)
                if isinstance(code, types.CodeType):
                    pending.append(code)
    while pending:  # nested functions and comprehensions too
        code = pending.pop()
        names.update(code.co_names)
        pending.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    modules = (os, sys, resource, signal, math, marshal, types, io, posix, builtins, _thread, sysconfig)
    for name in names:
        for module in modules:
            if name in vars(module):
                getattr(module, name)  # (ModuleType, name): one entry whichever module
                break
        for obj in objects:
            if name in getattr(obj, "__dict__", ()) or any(name in vars(k) for k in type(obj).__mro__):
                getattr(obj, name, None)
