"""Benchmark: traces per second with beam 10, batched generation reusing the code's
cached keys/values against one-at-a-time recomputation of the whole prefix, same model,
same run, CPU (and GPU figures when one is available).

    .venv/bin/python benchmarks/bench_generate.py [--model DIR] [--programs 16] [--max-length 96]

Uses the demo model (demo_out/pretrain/final, made by `make demo`) when present, else a
randomly initialised tiny model with a tokenizer trained on the built-in demo programs.
Writes benchmarks/results/bench_generate.json.

    .venv/bin/python benchmarks/bench_generate.py --compare FULL DELTA --data DIR [--programs 64]

decodes the same held-out programs (the CodeNetMut and crashing test splits of built
datasets) with a full-state model and a compact (delta) one, greedy, to the models' cap:
traces/s, tokens generated and the share that ended before the cap
(benchmarks/results/bench_generate-compact.json).

    .venv/bin/python benchmarks/bench_generate.py --trace-batch [--model DIR] [--programs 16]

times `codeexecutor trace --batch`'s path (`trace_programs`: one batched decode) against
tracing the same programs one at a time (`trace_program` per program), beam 1
(benchmarks/results/bench_generate-trace-batch.json).

    .venv/bin/python benchmarks/bench_generate.py --against 67272cb --model M --data DIR [--limit 100] [--programs 100]

runs `codeexecutor evaluate` (the test split's fixed sample of every set of DIR) and
`codeexecutor trace --batch` (real contest programs with their sample inputs) of this
checkout and of the commit's (a git worktree under runs/), each with its own command's
defaults, one after the other in the same run: wall seconds and how many answers are
identical (benchmarks/results/bench_generate-against-<commit>.json).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import ROOT, write_report  # noqa: E402

from codeexecutor.generation.decoding import GREEDY, Decoding  # noqa: E402


def demo_inputs() -> list[str]:
    from codeexecutor.demo import demo_programs
    from codeexecutor.modeling.format import format_code

    return [format_code(src) for _, src, _ in demo_programs()]


def random_model(inputs: list[str], preset: str = "tiny") -> str:
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.tokenizer import structural_ids, train_tokenizer

    tok = train_tokenizer(inputs * 3, vocab_size=800, min_frequency=1)
    torch.manual_seed(0)
    cfg = CodeExecutorConfig.preset(
        preset, vocab_size=len(tok), structural_token_ids=structural_ids(tok), pad_token_id=tok.pad_token_id
    )
    path = tempfile.mkdtemp(prefix="bench_generate_")
    CodeExecutorModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def timed(gen, inputs, decoding, **kw) -> tuple[float, list]:
    start = time.perf_counter()
    out = gen.generate(inputs, decoding, **kw)
    return time.perf_counter() - start, out


def compare(models: list[str], data: str, programs: int, batch_size: int = 16) -> dict:
    """Full-state against compact decoding of the same programs, one model after the other."""
    import datasets

    from codeexecutor.generation import TraceGenerator
    from eval.evaluate import sample

    rows = []
    for name in ("codenetmut/codenetmut", "codenetmut/errors"):
        table = datasets.load_from_disk(f"{data}/{name}")["test"]
        rows += [table[i] for i in sample(len(table), programs // 2)]
    report = {"data": data, "programs": len(rows), "beam": 1, "models": {}}
    for model in models:
        gen = TraceGenerator(model, device="cpu")
        inputs = [gen.code_input(r["code"], r["task"]) for r in rows]
        gen.generate(inputs[:1], Decoding(beam=1, max_length=8, names=False, values=False))  # warm up
        seconds, out = timed(gen, inputs, GREEDY, batch_size=batch_size)
        full_tokens = sum(len(gen.encoder.ids(o.text)) for o in out)
        report["models"][gen.profile.state] = {
            "model": model,
            "traces_per_s": round(len(rows) / seconds, 3),
            "seconds": round(seconds, 1),
            "generated_tokens": sum(o.tokens for o in out),
            "full_state_tokens_of_the_text": full_tokens,
            "finished_share": round(sum(o.finished for o in out) / len(out), 3),
        }
        print(f"{gen.profile.state}: {len(rows) / seconds:.2f} traces/s, {report['models'][gen.profile.state]}")
    if {"full", "delta"} <= set(report["models"]):
        m = report["models"]
        report["speedup_delta_over_full"] = round(m["delta"]["traces_per_s"] / m["full"]["traces_per_s"], 2)
    return report


def trace_batch(model: str, programs: int, max_length: int) -> dict:
    """`trace --batch` (one batched decode) against one `trace_program` call per program."""
    from codeexecutor.demo import demo_programs
    from codeexecutor.generation.api import trace_program, trace_programs

    items = [
        {"id": f"{sid}-{k}", "code": src, "stdin": stdin} for k in range(4) for sid, src, stdin in demo_programs()
    ][:programs]
    trace_programs(items[:1], model, Decoding(beam=1, max_length=8))  # load the model, warm up
    start = time.perf_counter()
    batched = trace_programs(items, model, Decoding(beam=1, max_length=max_length))
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    single = [trace_program(i["code"], i["stdin"], model, Decoding(beam=1, max_length=max_length)) for i in items]
    single_s = time.perf_counter() - start
    same = sum(a["generated"] == b["generated"] for a, b in zip(batched, single))
    report = {
        "model": model,
        "programs": len(items),
        "beam": 1,
        "max_length": max_length,
        "trace_batch_seconds": round(batched_s, 2),
        "one_at_a_time_seconds": round(single_s, 2),
        "speedup": round(single_s / batched_s, 2),
        "identical_outputs": same,
    }
    print(
        f"trace --batch: {batched_s:.1f} s, one program at a time: {single_s:.1f} s for {len(items)} programs "
        f"({single_s / batched_s:.1f}x; {same}/{len(items)} identical)"
    )
    return report


def against(commit: str, model: str, data: str, limit: int, programs: int) -> dict:
    """evaluate and trace --batch of this checkout against COMMIT's, same inputs."""
    import json
    import os
    import subprocess

    from _common import load_programs, worktree

    work = ROOT / "runs" / "bench_generate" / commit
    work.mkdir(parents=True, exist_ok=True)
    batch = work / "programs.jsonl"
    batch.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "code": code, "stdin": stdin}) + "\n"
            for i, (code, stdin) in enumerate(load_programs(programs, seed=1))
        )
    )
    trees = {"baseline": worktree(commit), "current": ROOT}
    report: dict = {"baseline_commit": commit, "model": model, "data": data, "limit": limit, "programs": programs}
    answers = {}
    for arm, tree in trees.items():
        env = {**os.environ, "PYTHONPATH": str(tree)}
        base = [sys.executable, "-m", "codeexecutor"]
        out = work / arm
        out.mkdir(exist_ok=True)
        for stale in out.glob("evaluation*"):
            stale.unlink()
        t = time.perf_counter()
        subprocess.run(
            base
            + [
                "evaluate",
                "--model",
                str(pathlib.Path(model).resolve()),
                "--data",
                str(pathlib.Path(data).resolve()),
                "--limit",
                str(limit),
                "--out",
                str(out / "evaluation.json"),
            ],
            cwd=tree,
            env=env,
            check=True,
            capture_output=True,
        )
        evaluate_s = time.perf_counter() - t
        t = time.perf_counter()
        traced = subprocess.run(
            base + ["trace", "--batch", str(batch), "--model", str(pathlib.Path(model).resolve())],
            cwd=tree,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        trace_s = time.perf_counter() - t
        preds = [json.loads(line) for line in (out / "evaluation.predictions.jsonl").read_text().splitlines()]
        rows = [json.loads(line) for line in traced.splitlines() if line.startswith("{")]
        answers[arm] = (
            {(p["dataset"], str(p["id"])): p["prediction"] for p in preds},
            {r["id"]: r.get("generated") for r in rows},
        )
        scores = json.loads((out / "evaluation.json").read_text())
        report[arm] = {
            "evaluate_seconds": round(evaluate_s, 1),
            "trace_batch_seconds": round(trace_s, 1),
            "evaluated": len(preds),
            "traced": len(answers[arm][1]),
            "trace_accuracy": {n: d["table3"]["trace_accuracy"] for n, d in scores["datasets"].items()},
        }
        print(f"{arm}: evaluate {evaluate_s:.1f} s ({len(preds)} answers), trace --batch {trace_s:.1f} s", flush=True)
    (ev_a, tr_a), (ev_b, tr_b) = answers["baseline"], answers["current"]
    report["evaluate_identical"] = sum(ev_a[k] == ev_b.get(k) for k in ev_a)
    report["trace_batch_identical"] = sum(tr_a[k] == tr_b.get(k) for k in tr_a)
    report["evaluate_speedup"] = round(
        report["baseline"]["evaluate_seconds"] / report["current"]["evaluate_seconds"], 2
    )
    report["trace_batch_speedup"] = round(
        report["baseline"]["trace_batch_seconds"] / report["current"]["trace_batch_seconds"], 2
    )
    print(
        f"evaluate {report['evaluate_speedup']}x ({report['evaluate_identical']}/{len(ev_a)} identical), trace --batch "
        f"{report['trace_batch_speedup']}x ({report['trace_batch_identical']}/{len(tr_a)} identical)"
    )
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-batch", action="store_true", help="time `trace --batch` against one program at a time")
    ap.add_argument(
        "--compare",
        nargs=2,
        metavar=("FULL", "DELTA"),
        help="a full-state and a compact model: decode the same held-out programs with each (needs --data)",
    )
    ap.add_argument("--data", help="built datasets (with --compare): the CodeNetMut and crashing test programs")
    ap.add_argument("--model")
    ap.add_argument("--programs", type=int, default=16)
    ap.add_argument("--beam", type=int, default=10)
    ap.add_argument("--max-length", type=int, default=96)
    ap.add_argument("--preset", default="tiny", help="shape of the randomly initialised model used without --model")
    ap.add_argument(
        "--device", choices=["all", "cpu", "cuda"], default="all", help="all: the CPU, and the GPU where one is"
    )
    ap.add_argument(
        "--against", metavar="COMMIT", help="evaluate and trace --batch against this commit's (needs --model, --data)"
    )
    ap.add_argument("--limit", type=int, default=100, help="with --against: test examples per set")
    args = ap.parse_args()
    if args.against:
        if not (args.model and args.data):
            sys.exit("bench_generate: --against needs --model and --data (a folder of built datasets)")
        write_report(
            f"bench_generate-against-{args.against}",
            against(args.against, args.model, args.data, args.limit, args.programs),
        )
        return
    from codeexecutor.generation import TraceGenerator

    if args.compare:
        if not args.data:
            sys.exit("bench_generate: --compare needs --data, a folder of built datasets")
        torch.set_num_threads(2)
        write_report("bench_generate-compact", compare(args.compare, args.data, args.programs))
        return

    if args.trace_batch:
        torch.set_num_threads(2)
        model = args.model or (
            str(ROOT / "demo_out" / "pretrain" / "final")
            if (ROOT / "demo_out" / "pretrain" / "final").exists()
            else random_model(demo_inputs(), args.preset)
        )
        write_report("bench_generate-trace-batch", trace_batch(model, args.programs, args.max_length))
        return
    inputs = (demo_inputs() * 4)[: args.programs]
    model = args.model or (
        str(ROOT / "demo_out" / "pretrain" / "final")
        if (ROOT / "demo_out" / "pretrain" / "final").exists()
        else random_model(inputs, args.preset)
    )
    torch.set_num_threads(2)
    report = {"model": model, "programs": len(inputs), "beam": args.beam, "max_length": args.max_length}
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else []) if args.device == "all" else [args.device]
    for device in devices:
        gen = TraceGenerator(model, device=device)
        gen.generate(inputs[:1], Decoding(beam=args.beam, max_length=8, names=False, values=False))  # warm up
        decoding = Decoding(beam=args.beam, max_length=args.max_length, names=False, values=False)
        fast_s, fast = timed(gen, inputs, decoding, batch_size=8)
        slow_s, slow = timed(gen, inputs, decoding, cache=False)
        same = sum(a.text == b.text for a, b in zip(fast, slow))
        tokens = sum(o.tokens for o in fast)
        report[device] = {
            "cached_batched_traces_per_s": len(inputs) / fast_s,
            "recompute_one_at_a_time_traces_per_s": len(inputs) / slow_s,
            "ratio": slow_s / fast_s,
            "identical_outputs": same,
            "generated_tokens": tokens,
        }
        print(
            f"[{device}] beam {args.beam}, {len(inputs)} programs, up to {args.max_length} tokens: "
            f"cached+batched {len(inputs) / fast_s:.2f} traces/s, "
            f"recompute one-at-a-time {len(inputs) / slow_s:.2f} traces/s, "
            f"ratio {slow_s / fast_s:.1f}x ({same}/{len(inputs)} identical outputs)"
        )
    if not torch.cuda.is_available():
        print("no GPU here: GPU figures are measured when one is available")
    write_report(
        "bench_generate" + ("" if devices == ["cpu"] else "-" + torch.cuda.get_device_name(0).replace(" ", "-")), report
    )


if __name__ == "__main__":
    main()
