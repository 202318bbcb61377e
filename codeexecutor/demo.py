"""`make demo`: the pipeline end to end on small built-in inputs (no shared data needed).

1. inline the stdin of the built-in programs and trace them in the sandbox
   (demo_out/traces.jsonl, one readable trace printed);
2. build demo-size CodeNetMut, Functions, Tutorial and SingleLine datasets from the
   built-in CodeNet-layout folder, package with doctests and tutorial page in
   curricula/demo (demo_out/data/...),
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
from codeexecutor.execution.inline import InlineError, inline_stdin

DEMO = pathlib.Path(__file__).resolve().parent.parent / "curricula" / "demo"
FIGURE3 = "s000000003"  # the paper's Figure 3 program (problem p00002)
log = logging.getLogger("codeexecutor.demo")


def demo_program_paths() -> list[tuple[str, pathlib.Path, pathlib.Path]]:
    """(submission id, program, its input) of the built-in demo programs (CodeNet layout)."""
    out = []
    for path in sorted(DEMO.glob("data/p*/Python/*.py")):
        pid = path.parent.parent.name
        out.append((path.stem, path, DEMO / "derived" / "input_output" / "data" / pid / "input.txt"))
    return out


def demo_programs() -> list[tuple[str, str, str]]:
    """(name, source, stdin) of the built-in demo programs."""
    return [(sid, p.read_text(), i.read_text() if i.exists() else "") for sid, p, i in demo_program_paths()]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="codeexecutor.demo", description="The pipeline end to end on built-in inputs.")
    ap.add_argument("--out", default="demo_out", help="output folder (default demo_out)")
    ap.add_argument("--only", choices=("trace", "data", "pretrain", "generate"), help="run one phase only")
    args = ap.parse_args(argv)
    from codeexecutor.progress import quiet_libraries

    quiet_libraries()
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
        (out / "inlined.jsonl").write_text(
            "".join(json.dumps({"name": k, "code": v}) + "\n" for k, v in inlined.items())
        )
        results = dict(pool.execute_many(Program(code, "", name) for name, code in inlined.items()))
    with (out / "traces.jsonl").open("w") as f:
        for name in inlined:
            f.write(json.dumps({"name": name, "code": inlined[name], **results[name].to_json()}) + "\n")
    log.info("traced %d programs in %.2f s -> %s", len(results), time.perf_counter() - start, out / "traces.jsonl")
    for name, _code in inlined.items():
        r = results[name]
        log.info(
            "  %-10s %-6s %3d steps%s",
            name,
            r.status,
            len(r.steps),
            f"  ({r.error.type} at line {r.error.line})" if r.error else "",
        )
    print(f"\nGround-truth trace of the inlined program {FIGURE3} (the paper's Figure 3):\n")
    print(format_result(inlined[FIGURE3], results[FIGURE3]))


def build_demo_data(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Demo-size curriculum datasets from the built-in inputs; returns their folders."""
    from curricula.codenet import CodeNetBuilder
    from curricula.common import BuildSetup
    from curricula.functions import FunctionsBuilder
    from curricula.singleline import build_singleline
    from curricula.stats import dataset_stats, print_table
    from curricula.tutorial import build_tutorial

    demo = DEMO
    folders = {name: root / name for name in ("codenetmut", "functions", "tutorial", "singleline")}
    CodeNetBuilder(str(demo), str(folders["codenetmut"]), mutants=20, setup=BuildSetup(workers=2)).run()
    FunctionsBuilder(
        [str(demo / "functions")], str(folders["functions"]), mutants=8, humaneval=None, setup=BuildSetup(workers=2)
    ).run()
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
    from codeexecutor.generation.api import trace_program
    from codeexecutor.generation.decoding import Decoding

    root = pathlib.Path(__file__).resolve().parent.parent
    model = root / "demo_out" / "pretrain" / "final"
    _, program, stdin = next(x for x in demo_program_paths() if x[0] == FIGURE3)
    print(f"\nPredicted trace of {program} by the demo model ({model}).")
    print(
        "What this model is: a tiny model (2 layers x 128) trained for a few CPU minutes on about a hundred demo\n"
        "examples. It shows that the pipeline runs end to end; it does not execute code well, and its trace below\n"
        "is expected to be wrong. Measured models: benchmarks/results/quality-*.json (a budgeted run on the\n"
        "shared corpora, scored on held-out programs with the release's metric; benchmarks/bench_quality.py).\n"
    )
    page = out / "figure3_trace.html"
    decoding = Decoding(beam=4, max_length=256)
    report = trace_program(
        program.read_text(), stdin.read_text(), str(model), decoding, compare=True, html_out=str(page)
    )
    print(report["text"])
    print(f"\nHTML view: {page}")


if __name__ == "__main__":
    sys.exit(main())
