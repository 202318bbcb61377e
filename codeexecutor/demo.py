"""`make demo`: the pipeline end to end on small built-in inputs (no shared data needed).

1. inline the stdin of the built-in programs and trace them in the sandbox
   (demo_out/traces.jsonl, one readable trace printed);
2. build demo-size CodeNetMut, Tutorial and SingleLine datasets from the built-in
   CodeNet-layout folder and tutorial page in curricula/demo (demo_out/data/...),
   and print their Table 2 statistics;
then the later phases (pretraining, trace generation) run on those datasets.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import sys
import time

from codeexecutor.execution import ExecutorPool, Program
from codeexecutor.execution.display import format_result
from codeexecutor.inline import InlineError, inline_stdin

PROGRAMS = pathlib.Path(__file__).with_name("demo_programs")
log = logging.getLogger("codeexecutor.demo")


def demo_programs() -> list[tuple[str, str, str]]:
    """(name, source, stdin) of the built-in demo programs."""
    out = []
    for path in sorted(PROGRAMS.glob("*.py")):
        stdin_path = path.with_suffix(".in")
        out.append((path.stem, path.read_text(), stdin_path.read_text() if stdin_path.exists() else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="codeexecutor.demo", description="The pipeline end to end on built-in inputs.")
    ap.add_argument("--out", default="demo_out", help="output folder (default demo_out)")
    ap.add_argument("--only", choices=("trace", "data", "pretrain", "generate"), help="run one phase only")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    out = pathlib.Path(args.out)
    out.mkdir(exist_ok=True)
    phases = [args.only] if args.only else ["trace", "data", "pretrain", "generate"]
    if "trace" in phases:
        trace_demo_programs(out)
    if "data" in phases:
        build_demo_data(out / "data")
    if "pretrain" in phases:
        pretrain_demo()
    if "generate" in phases:
        generate_demo(out)
    return 0


def trace_demo_programs(out: pathlib.Path) -> None:
    start = time.perf_counter()
    with ExecutorPool(workers=2) as pool:
        inlined = {}
        for name, source, stdin in demo_programs():
            try:
                inlined[name] = inline_stdin(source, stdin, pool=pool).source
            except InlineError as exc:
                log.warning("%s: not inlined (%s)", name, exc)
        (out / "inlined.jsonl").write_text("".join(json.dumps({"name": k, "code": v}) + "\n" for k, v in inlined.items()))
        results = dict(pool.execute_many(Program(code, "", name) for name, code in inlined.items()))
    with (out / "traces.jsonl").open("w") as f:
        for name in inlined:
            f.write(json.dumps({"name": name, "code": inlined[name], **results[name].to_json()}) + "\n")
    log.info("traced %d programs in %.2f s -> %s", len(results), time.perf_counter() - start, out / "traces.jsonl")
    for name, code in inlined.items():
        r = results[name]
        log.info("  %-10s %-6s %3d steps%s", name, r.status, len(r.steps), f"  ({r.error.type} at line {r.error.line})" if r.error else "")
    print("\nGround-truth trace of the inlined 'newspaper' program (paper Figure 3):\n")
    print(format_result(inlined["newspaper"], results["newspaper"]))


def build_demo_data(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Demo-size curriculum datasets from the built-in inputs; returns their folders."""
    from curricula.codenet import CodeNetBuilder
    from curricula.singleline import build_singleline
    from curricula.stats import dataset_stats, print_table
    from curricula.tutorial import build_tutorial

    demo = pathlib.Path(__file__).resolve().parent.parent / "curricula" / "demo"
    folders = {name: root / name for name in ("codenetmut", "tutorial", "singleline")}
    CodeNetBuilder(str(demo), str(folders["codenetmut"]), mutants=20, workers=2).run()
    build_tutorial(str(folders["tutorial"]), sources=str(demo / "tutorial"), mutants=30, workers=2)
    build_singleline(str(folders["singleline"]), source=str(folders["codenetmut"]), workers=2)
    print("\nDemo curriculum datasets (paper Table 2 columns):")
    for folder in folders.values():
        print_table(dataset_stats(str(folder)))
    return folders


def pretrain_demo() -> None:
    """The three-stage curriculum on the demo datasets, through run_pretrain.sh (deepspeed launcher)."""
    import subprocess

    root = pathlib.Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(["bash", str(root / "run_pretrain.sh")], cwd=root, env=env, check=True)


def generate_demo(out: pathlib.Path) -> None:
    """Predict the trace of a built-in program with the demo model, next to the real one."""
    from codeexecutor.generation_cli import trace_program

    root = pathlib.Path(__file__).resolve().parent.parent
    model = root / "demo_out" / "pretrain" / "final"
    program = PROGRAMS / "newspaper.py"
    print(f"\nPredicted trace of {program.name} by the demo model ({model}):\n")
    report = trace_program(program.read_text(), program.with_suffix(".in").read_text(), str(model), beam=4,
                           max_length=256, compare=True, html=str(out / "newspaper_trace.html"))
    print(report["text"])
    print(f"\nHTML view: {out / 'newspaper_trace.html'}")


if __name__ == "__main__":
    sys.exit(main())
