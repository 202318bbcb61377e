"""Guided execution measured: coverage, fidelity and value prediction on held-out packages.

    python benchmarks/bench_fill.py --split valid          # choose recipes here
    python benchmarks/bench_fill.py --split test           # report once

On the function bodies of the split's packages (curricula/values.py: no value model
trains on them), lifted as LExecutor lifts them (eval/snippets.py), each way of filling
runs every body once: as it is, an empty object, the absorbing dummy, the frequency
table, the value model with one try and with `--tries`. Reported: mean line coverage
(code lines that ran to their end, over each body's code lines), the share of bodies
run to their end, and milliseconds per covered line (the runs and the predictor, the
model's loading aside). Fidelity: for functions the package's own tests or doctests
call, the body's guided run against the real call (the same lines in order, the same
branch at each `if`, the same kind returned). Then value prediction top-1/3/5 on the
split's events, and `--fill` on contest programs with their imports removed.
"""

from __future__ import annotations

import argparse
import ast
import glob
import os
import random
import sys
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import machine, write_report  # noqa: E402
from codeexecutor.execution import ExecutorPool, Limits  # noqa: E402
from codeexecutor.execution.coverage import code_lines, covered_lines  # noqa: E402
from codeexecutor.execution.guided import run_guided  # noqa: E402
from curricula.values import TEST_PACKAGES, VALID_PACKAGES  # noqa: E402
from eval.snippets import Body, call_segment, compare, function_bodies  # noqa: E402

SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")
PYPI = os.path.join(SHARED, "pypi-pure-python")
LIMITS = Limits(timeout=1.0, max_steps=2048)


def package_root(name: str) -> str:
    found = sorted(glob.glob(os.path.join(PYPI, f"{name}-[0-9]*")))
    if not found:
        raise SystemExit(f"no package {name} under {PYPI}")
    return found[-1]


def package_bodies(name: str, per_package: int, seed: int) -> list[Body]:
    from curricula.function_calls import is_test_file

    root = package_root(name)
    bodies = []
    for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
        rel = os.path.relpath(path, root)
        if is_test_file(rel) or "/tests/" in f"/{rel}" or "/test/" in f"/{rel}":
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            bodies += [b for b in function_bodies(f.read(), f"{name}/{rel}") if code_lines(b.source)]
    random.Random(seed).shuffle(bodies)
    return bodies[:per_package]


def methods(model: str | None, tries: int):
    from codeexecutor.generation.fill import load_predictor

    yield "as-is", None, 1
    for name in ("empty", "dummy", "frequency"):
        yield name, load_predictor(name, model), 1
    predictor = load_predictor(model)
    yield "model, 1 try", predictor, 1
    yield f"model, {tries} tries", predictor, tries
    # the same tries with no absorbing value among the candidates: what the kinds alone reach
    yield f"model, {tries} tries, no absorbing", load_predictor(model, fallback=False), tries


def run_body(pool, source: str, predictor, tries: int):
    if predictor is None:
        result = pool.execute(source, "", LIMITS)
        return result, covered_lines(source, [s.line for s in result.steps], result.status.value), []
    run = run_guided(pool, source, "", predictor, LIMITS, tries=tries)
    return run.result, run.covered_lines, run.injections


def coverage(pool, bodies: list[Body], model: str | None, tries: int) -> dict:
    table = {}
    for name, predictor, n in methods(model, tries):
        covs, ends, lines, started = [], 0, 0, time.perf_counter()
        for body in bodies:
            result, covered, _ = run_body(pool, body.source, predictor, n)
            covs.append(len(covered) / len(code_lines(body.source)))
            ends += result.status.value in ("ok", "exit")
            lines += len(covered)
        seconds = time.perf_counter() - started
        table[name] = {
            "coverage": round(100 * sum(covs) / len(covs), 1),
            "run_to_end": round(100 * ends / len(bodies), 1),
            "ms_per_covered_line": round(1000 * seconds / max(1, lines), 2),
        }
        print(
            f"  {name:<16} coverage {table[name]['coverage']:5.1f}%  to end {table[name]['run_to_end']:5.1f}%  "
            f"{table[name]['ms_per_covered_line']:.2f} ms/line",
            flush=True,
        )
    return table


def called_functions(names: tuple[str, ...], limit: int) -> list[dict]:
    """The packages' tests' and doctests' call programs (the calls made into programs)."""
    from curricula.functions import FunctionsBuilder

    fb = FunctionsBuilder([package_root(n) for n in names], "/tmp/unused", humaneval=None)
    programs = [(ci, p) for ci, rel in fb.units() for _, p, _ in fb.call_programs(ci, rel, Counter())]
    random.Random(0).shuffle(programs)
    return [{"package": ci, "program": p} for ci, p in programs[:limit]]


def real_calls(pool, programs: list[dict]) -> list[tuple]:
    """Each module-level function a real run of a call program called: (body, its lines in
    the last call at the shallowest depth, the kind it returned where its calls agree)."""
    found, seen = [], set()
    for item in programs:
        program = item["program"]
        real = pool.execute(program, "", LIMITS, record_values=True)
        if not real.ok:
            continue
        sites = real.fill["sites"]
        lifted = {b.function: b for b in function_bodies(program)}
        for node in ast.parse(program).body:
            if not isinstance(node, ast.FunctionDef) or (item["package"], node.name) in seen:
                continue
            segment = call_segment(real.steps, node.body[0].lineno, node.end_lineno)
            if not segment or node.name not in lifted:
                continue
            seen.add((item["package"], node.name))
            kinds = {k for site, k, _ in real.values if sites[site][4:] == ("call", node.name)}
            # the body's first statement may not be its first line (LibCST keeps what leads it)
            start = ast.parse(lifted[node.name].source).body[0].lineno
            lines = [line - node.body[0].lineno + start for line in segment]
            found.append((lifted[node.name], lines, kinds.pop() if len(kinds) == 1 else None))
    return found


def fidelity(pool, programs: list[dict], model: str | None, tries: int) -> dict:
    reals = real_calls(pool, programs)
    table = {"functions": len(reals), "with_returned_kind": sum(k is not None for _, _, k in reals)}
    for name, predictor, n in methods(model, tries):
        if predictor is None:
            continue
        sums = Counter()
        for body, real_lines, real_kind in reals:
            run = run_guided(pool, body.source, "", predictor, LIMITS, tries=n)
            lines = [s.line for s in run.result.steps if s.depth == 0]
            returned = (run.result.fill or {}).get("returned") or ("none" if run.result.ok else None)
            c = compare(body.source, real_lines, real_kind, lines, returned)
            c["exact"] = c["lines_same"] and (real_kind is None or c["kind_same"])
            c["kind_same"] = real_kind is not None and c["kind_same"]
            sums.update({k: int(v) for k, v in c.items()})
        table[name] = {
            "exact": round(100 * sums["exact"] / max(1, len(reals)), 1),
            "same_lines": round(100 * sums["lines_same"] / max(1, len(reals)), 1),
            "same_kind": round(100 * sums["kind_same"] / max(1, table["with_returned_kind"]), 1),
            "branches": sums["branches"],
            "same_branch": round(100 * sums["branches_same"] / max(1, sums["branches"]), 1),
        }
        print(
            f"  {name:<16} exact {table[name]['exact']:5.1f}%  same branch {table[name]['same_branch']:5.1f}% "
            f"of {sums['branches']}",
            flush=True,
        )
    return table


def prediction(split: str, data: str, model: str | None) -> dict:
    from codeexecutor.execution.guided import Request
    from codeexecutor.generation.fill import load_predictor
    from codeexecutor.training.values import read_events

    rows = read_events(data, split)
    rows = random.Random(0).sample(rows, min(len(rows), 5000))
    table = {"events": len(rows)}
    for name in ("frequency", "model"):
        predictor = load_predictor("frequency", model) if name == "frequency" else load_predictor(model)
        hits: dict[str, Counter] = defaultdict(Counter)
        for start in range(0, len(rows), 64):
            chunk = rows[start : start + 64]
            reqs = [Request("", r["use"], r["name"], None, None, r["before"], r["after"]) for r in chunk]
            for r, ranked in zip(chunk, predictor.predict(reqs)):
                kinds = [c.kind for c in ranked if c.kind != "absorb"]
                for use in (r["use"], "all"):
                    hits[use]["n"] += 1
                    for k in (1, 3, 5):
                        hits[use][f"top{k}"] += r["kind"] in kinds[:k]
        table[name] = {
            use: {k: round(100 * h[k] / h["n"], 1) for k in ("top1", "top3", "top5")} | {"n": h["n"]}
            for use, h in hits.items()
        }
        print(f"  {name:<10} top-1 {table[name]['all']['top1']}  top-3 {table[name]['all']['top3']}", flush=True)
    return table


def without_imports(source: str) -> str | None:
    """A program with its import statements blanked (line numbers kept), or None without any."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    lines = source.splitlines()
    spans = [(n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    if not spans:
        return None
    for first, last in spans:
        indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        lines[first - 1] = indent + "pass"
        for i in range(first, last):
            lines[i] = ""
    return "\n".join(lines) + "\n"


def contest_programs(limit: int, model: str | None, tries: int, pool) -> dict:
    from codeexecutor.generation.fill import load_predictor
    from curricula.codenet import read_layouts, read_source

    subs, inputs = read_layouts([os.path.join(SHARED, "atcoder-python-2")])
    random.Random(0).shuffle(subs)
    picked = []
    for sub in subs:
        src = read_source(sub.path)
        stripped = without_imports(src) if src else None
        if stripped and inputs.get(sub.problem_id):
            picked.append((src, stripped, open(inputs[sub.problem_id][0]).read()))
        if len(picked) >= limit:
            break
    table = {"programs": len(picked)}
    for name, predictor in (("as-is", None), ("dummy", load_predictor("dummy")), ("model", load_predictor(model))):
        covs, same = [], 0
        for src, stripped, stdin in picked:
            full = pool.execute(src, stdin, LIMITS)
            if predictor is None:
                r = pool.execute(stripped, stdin, LIMITS)
                covered = covered_lines(stripped, [s.line for s in r.steps], r.status.value)
            else:
                run = run_guided(pool, stripped, stdin, predictor, LIMITS, tries=tries)
                r, covered = run.result, run.covered_lines
            covs.append(len(covered) / max(1, len(code_lines(stripped))))
            same += r.stdout == full.stdout and full.ok
        table[name] = {
            "coverage": round(100 * sum(covs) / max(1, len(covs)), 1),
            "same_output": round(100 * same / max(1, len(picked)), 1),
        }
        print(f"  {name:<8} coverage {table[name]['coverage']}%  same output {table[name]['same_output']}%", flush=True)
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("valid", "test"), default="valid")
    ap.add_argument("--model", help="value model folder (default: the shipped one)")
    ap.add_argument("--data", default="runs/values", help="the events (codeexecutor build values)")
    ap.add_argument("--per-package", type=int, default=60)
    ap.add_argument("--functions", type=int, default=400, help="call programs whose functions measure fidelity")
    ap.add_argument("--contest", type=int, default=100, help="contest programs without their imports")
    ap.add_argument("--tries", type=int, default=6, help="the model's tries (default: exec --fill's)")
    args = ap.parse_args(argv)
    names = TEST_PACKAGES if args.split == "test" else VALID_PACKAGES
    report = {"split": args.split, "packages": list(names), "tries": args.tries, "machine": machine()}
    report["command"] = "python benchmarks/bench_fill.py " + " ".join(argv if argv is not None else sys.argv[1:])
    with ExecutorPool(workers=1, limits=LIMITS) as pool:
        bodies = [b for n in names for b in package_bodies(n, args.per_package, 0)]
        report["bodies"] = len(bodies)
        print(f"coverage on {len(bodies)} bodies of {', '.join(names)}", flush=True)
        report["coverage"] = coverage(pool, bodies, args.model, args.tries)
        programs = called_functions(names, args.functions)
        print(f"fidelity: the functions {len(programs)} call programs run", flush=True)
        report["fidelity"] = fidelity(pool, programs, args.model, args.tries)
        print("value prediction", flush=True)
        report["prediction"] = prediction(args.split, args.data, args.model)
        print("contest programs without their imports", flush=True)
        report["contest_without_imports"] = contest_programs(args.contest, args.model, args.tries, pool)
    print(f"wrote {write_report(f'fill-{args.split}', report)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
