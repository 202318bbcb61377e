"""The same programs traced under another interpreter, for comparing ground truth.

    python -m codeexecutor.execution.crosscheck PROGRAMS.jsonl OUT.jsonl [--workers 2] [--untraced]

Traces every program (`{"id", "source", "stdin"}` per line) through `ExecutorPool` under
the interpreter that runs it, timed, and writes one result per line: status, steps,
stdout, error, stderr. With `--untraced` it then runs the programs that finished again
without the tracer and records whether they printed the same and ended the same way
(tracing must not change what a program does). The last line on stdout is a JSON summary.

`run_under(python, programs)` does this from another interpreter and returns the
results by id; `first_difference` says where two results of one program part. Standard
library only: it runs in the light environments too.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import tempfile
import time

FIELDS = ("status", "steps", "stdout", "error")  # what must agree across interpreters
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def trace_all(
    programs: list[dict], workers: int = 2, untraced: bool = False, warm_numpy: bool = False
) -> tuple[dict[str, dict], float]:
    """Results by id, and the seconds the traced runs took (the pool warm; with
    `warm_numpy` its numpy workers started before the clock too)."""
    from codeexecutor.execution import ExecutorPool, Program

    results: dict[str, dict] = {}
    with ExecutorPool(workers, prestart=("numpy",) if warm_numpy else ()) as pool:
        pool.execute("pass\n")  # warm
        start = time.perf_counter()
        for key, r in pool.execute_many(Program(p["source"], p.get("stdin", ""), key=p["id"]) for p in programs):
            results[key] = {
                "id": key,
                "status": r.status.value,
                "steps": [[s.line, s.state, s.output, s.depth] for s in r.steps],
                "stdout": r.stdout,
                "stderr": r.stderr,
                "error": None if r.error is None else [r.error.type, r.error.message, r.error.line],
            }
        seconds = time.perf_counter() - start
        if untraced:
            finished = [p for p in programs if results[p["id"]]["status"] in ("ok", "error", "exit")]

            def plain(p):
                return p["id"], pool.execute(p["source"], p.get("stdin", ""), trace=False)

            with cf.ThreadPoolExecutor(workers) as ex:
                for key, r in ex.map(plain, finished):
                    traced = results[key]
                    traced["untraced_same"] = stable([r.status.value, r.stdout, r.stderr]) == stable(
                        [traced["status"], traced["stdout"], traced["stderr"]]
                    )
    return results, seconds


def run_under(
    python: str,
    programs: list[dict],
    workers: int = 2,
    untraced: bool = False,
    warm_numpy: bool = False,
    timeout: float | None = None,
) -> tuple[dict[str, dict], dict]:
    """Trace `programs` under the interpreter `python` (this checkout's code on its path);
    returns the results by id and the summary. Raises RuntimeError when it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "programs.jsonl"), os.path.join(tmp, "results.jsonl")
        with open(src, "w", encoding="utf-8") as f:
            for p in programs:
                f.write(json.dumps({"id": p["id"], "source": p["source"], "stdin": p.get("stdin", "")}) + "\n")
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": ROOT}
        args = [python, "-m", "codeexecutor.execution.crosscheck", src, out, "--workers", str(workers)]
        args += ["--untraced"] if untraced else []
        args += ["--warm-numpy"] if warm_numpy else []
        proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{python} could not trace the programs:\n{proc.stderr[-3000:]}")
        with open(out, encoding="utf-8") as f:
            results = {r["id"]: r for r in map(json.loads, f)}
        return results, json.loads(proc.stdout.strip().splitlines()[-1])


_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")  # an object's address printed by the program: differs run to run


def stable(value):
    """A result's field with printed memory addresses blanked (`<map object at 0x...>`):
    what a program prints of an address is no ground truth on any interpreter."""
    if isinstance(value, str):
        return _ADDRESS.sub("0x?", value)
    if isinstance(value, list):
        return [stable(v) for v in value]
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items()}
    return value


def first_difference(a: dict, b: dict) -> dict:
    """Where two results of one program part ({} where they agree, printed addresses
    aside): the field, and for the steps the first step that differs."""
    a, b = {f: stable(a[f]) for f in FIELDS}, {f: stable(b[f]) for f in FIELDS}
    for field in FIELDS:
        if a[field] != b[field]:
            if field != "steps":
                return {"field": field, "reference": a[field], "other": b[field]}
            sa, sb = a["steps"], b["steps"]
            k = next((i for i, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
            return {
                "field": "steps",
                "step": k,
                "steps": [len(sa), len(sb)],
                "reference": sa[k] if k < len(sa) else None,
                "other": sb[k] if k < len(sb) else None,
            }
    return {}


def main() -> None:
    ap = argparse.ArgumentParser(description="trace programs under this interpreter (see the module docstring)")
    ap.add_argument("programs")
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--untraced", action="store_true", help="also run the finished programs untraced, to compare")
    ap.add_argument("--warm-numpy", action="store_true", help="start the numpy workers before timing")
    args = ap.parse_args()
    with open(args.programs, encoding="utf-8") as f:
        programs = [json.loads(line) for line in f]
    results, seconds = trace_all(programs, args.workers, args.untraced, args.warm_numpy)
    with open(args.out, "w", encoding="utf-8") as f:
        for p in programs:
            f.write(json.dumps(results[p["id"]]) + "\n")
    print(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "programs": len(programs),
                "traced_seconds": round(seconds, 2),
                "traced_per_s": round(len(programs) / max(seconds, 1e-9), 1),
            }
        )
    )


if __name__ == "__main__":
    main()
