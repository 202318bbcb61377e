"""Run in a child process by curricula/puzzles.py: the seeded instances of one generator module.

    python _puzzle_driver.py SRC_DIR MODULE N

Imports `generators.MODULE` from SRC_DIR (the PythonProgrammingPuzzles layout) and, for each
puzzle template defined there, draws up to N parameter sets the way the upstream `build` does
(the default instance, then `gen`, then `gen_random` until N distinct ones), without running
the solvers. Writes one JSON object per template to stdout: its name, line, argument names,
solver bodies and instances (each argument as a Python literal), or why it has none.
"""

import ast
import contextlib
import importlib
import inspect
import io
import json
import signal
import sys

SECONDS_PER_TEMPLATE = 10  # a generator slower than this is skipped and counted


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow()


def _literal(value) -> str | None:
    text = repr(value)
    try:
        return text if ast.literal_eval(text) == value else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _instances(p, n: int) -> list[dict]:
    p._seen_inputs, p._inputs = set(), []
    p.random.reseed()
    if not p.skip_example:
        p.add(p.get_example())
    if n > len(p._inputs):
        p.gen(n - len(p._inputs))
    while len(p._inputs) < n:
        before = len(p._inputs)
        for _ in range(100):  # the upstream build's max_random_attempts
            p.gen_random()
            if len(p._inputs) != before:
                break
        if len(p._inputs) == before:
            break
    return [inp for inp, _test, _mult in p._inputs[:n]]


def main() -> None:
    src, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, src)
    sys.setrecursionlimit(10_000)
    with contextlib.redirect_stdout(io.StringIO()):
        import puzzle_generator as pg

        module = importlib.import_module(f"generators.{name}")
    signal.signal(signal.SIGALRM, _alarm)
    for attr, cls in sorted(vars(module).items()):
        if not (
            isinstance(cls, type)
            and issubclass(cls, pg.PuzzleGenerator)
            and cls is not pg.PuzzleGenerator
            and cls.__module__ == module.__name__
        ):
            continue
        out = {
            "name": attr,
            "line": inspect.getsourcelines(cls)[1],
            "args": [],
            "sols": [],
            "inputs": [],
            "error": None,
        }
        signal.alarm(SECONDS_PER_TEMPLATE)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                p = cls()
                out["args"], out["sols"] = list(p.arg_names), list(p.sol_bodies)
                drawn = _instances(p, n)
            for inp in drawn:
                lits = {k: _literal(v) for k, v in inp.items()}
                out["inputs"].append(lits if all(v is not None for v in lits.values()) else None)
        except _Slow:
            out["error"] = "slow_generator"
        except Exception as exc:  # a template that does not build is counted, not fatal
            out["error"] = f"generator:{type(exc).__name__}"
        finally:
            signal.alarm(0)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
