"""Puzzle generators as function-call programs: a solver called on seeded instances.

A root in the PythonProgrammingPuzzles layout (`puzzle_generator.py` and `generators/*.py`,
at the root or under `src/`) holds puzzle templates: a checker `sat(answer, *params)`, one
or more reference solvers `sol(*params)`, and generators that draw parameter sets from a
random source seeded by the template's name. Each generator module is one unit of the
functions build. Its instances are drawn in a child process (curricula/_puzzle_driver.py,
which does what the upstream `build` does before it tests the solvers) and each becomes

    def sol(<params>):
        <the solver's body>
    print(repr(sol(<param>=<literal>, ...)))

At most `PER_PUZZLE` programs per template (instances first, then the other solvers on
the first instance). Templates split as groups: the instances of one template share their
code, so they never straddle two splits. What does not become a program is counted:
templates without a solver, generators that fail or are slow, inputs that are no literal
or too long.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections import Counter

from curricula.function_calls import Call, Program, plain_source

PER_PUZZLE = 8  # programs of one template: as the functions set caps calls of one function
MAX_CALL_CHARS = 400  # a call line longer than this is an input no reader would trace by hand
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_puzzle_driver.py")
MODULE_SECONDS = 300  # one generator module's drawing in all


def puzzle_src(root: str) -> str | None:
    """The folder holding `puzzle_generator.py` and `generators/`, if `root` is such a tree."""
    for candidate in (root, os.path.join(root, "src")):
        if os.path.isfile(os.path.join(candidate, "puzzle_generator.py")) and os.path.isdir(
            os.path.join(candidate, "generators")
        ):
            return candidate
    return None


class PuzzleCorpus:
    kind = "puzzles"

    def __init__(self, root: str) -> None:
        self.root = root
        if puzzle_src(root) is None:
            raise ValueError(f"{root} has no puzzle_generator.py with generators/")
        self.src = os.path.abspath(puzzle_src(root))
        gen = os.path.join(self.src, "generators")
        self.files = [
            os.path.relpath(os.path.join(gen, f), root)
            for f in sorted(os.listdir(gen))
            if f.endswith(".py") and f != "__init__.py"
        ]

    def groups(self) -> list[str]:
        """Every template's group (`path:Class`), read without running anything."""
        out = []
        for relpath in self.files:
            with open(os.path.join(self.root, relpath), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            out += [f"{relpath}:{node.name}" for node in tree.body if isinstance(node, ast.ClassDef)]
        return out

    def templates(self, relpath: str, counts: Counter) -> list[dict]:
        name = os.path.basename(relpath)[:-3]
        env = {**os.environ, "PYTHONINTMAXSTRDIGITS": "0", "PYTHONHASHSEED": "0"}
        try:
            done = subprocess.run(
                [sys.executable, DRIVER, self.src, name, str(PER_PUZZLE)],
                capture_output=True,
                text=True,
                timeout=MODULE_SECONDS,
                env=env,
                cwd=self.src,
            )
        except subprocess.TimeoutExpired:
            counts["skip_module:puzzle_generators_slow"] += 1
            return []
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            counts[f"skip_module:puzzle_import:{last.split(':')[0][:40]}"] += 1
            return []
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def programs(self, relpath: str, counts: Counter) -> list[Program]:
        out = []
        for t in self.templates(relpath, counts):
            counts["puzzle_templates"] += 1
            if t["error"]:
                counts[f"skip:puzzle:{t['error']}"] += 1
                continue
            if not t["sols"]:
                counts["skip:puzzle:no_solver"] += 1
                continue
            pairs = [(i, 0) for i in range(len(t["inputs"]))] + [(0, j) for j in range(1, len(t["sols"]))]
            if len(pairs) > PER_PUZZLE:
                counts["skip:over_calls_per_function"] += len(pairs) - PER_PUZZLE
                pairs = pairs[:PER_PUZZLE]
            for i, j in pairs:
                inp = t["inputs"][i] if t["inputs"] else None
                if inp is None:
                    counts["skip:puzzle:input_not_literal"] += 1
                    continue
                call = "sol(" + ", ".join(f"{k}={inp[k]}" for k in t["args"]) + ")"
                if len(call) > MAX_CALL_CHARS:
                    counts["skip:puzzle:input_too_long"] += 1
                    continue
                program = _program(t["args"], t["sols"][j], call)
                if program is None:
                    counts["skip:puzzle:solver_does_not_parse"] += 1
                    continue
                head = program.encode("utf-8").rstrip(b"\n").rfind(b"\n") + 1
                ref = Call(t["name"], relpath, t["line"], (), call, "puzzle")
                out.append(Program(ref, program, f"{relpath}:{t['name']}", head, True))
        return out


def _program(args: list[str], body: str, call: str) -> str | None:
    text = f"def sol({', '.join(args)}):\n{body.rstrip()}\n\nprint(repr({call}))\n"
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    uses = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    if "List" in uses:  # the solvers' one assumed import (the upstream runs them with `List` defined)
        text = "from typing import List\n" + text
    return plain_source(text)
