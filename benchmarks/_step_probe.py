"""One arm of bench_step.py: the real training loop of a checkout (today's or an earlier
commit's, whichever `codeexecutor` PYTHONPATH finds) on a curriculum, observed from
outside through hooks that both versions have:

* `StepProfiler.after(step)`, called at each optimizer step's end: the window of
  measured steps starts and ends there (wall and process CPU seconds; the operators and
  host waits of the window's steps, counted by this checkout's
  `codeexecutor/training/waits.py`, loaded by its path);
* `Prefetcher.next()`: the shapes of every micro-batch the stage trains on.

    python benchmarks/_step_probe.py --curriculum C --ds-config D --run DIR --first 10 --last 30 \\
        --out probe.json [--count] [--fixed]

`--fixed`: today's checkout with its GPU layout (every row's tensors one shape) though
not compiled; `--count`: count operators and waits in the window (not with a compiled
step: the counting mode would stand in its way).
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
TOY = dict(
    hidden_size=16, num_hidden_layers=6, num_attention_heads=2, intermediate_size=64
)  # compute near zero: host work left


def counter_class():
    spec = importlib.util.spec_from_file_location("_waits", HERE.parent / "codeexecutor" / "training" / "waits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DeviceCounter


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--curriculum", required=True)
    ap.add_argument("--ds-config", required=True)
    ap.add_argument("--first", type=int, required=True)
    ap.add_argument("--last", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--run", required=True, help="the curriculum's output_dir (its curriculum.json says how it stepped)"
    )
    ap.add_argument("--count", action="store_true")
    ap.add_argument("--fixed", action="store_true")
    args = ap.parse_args()

    import torch

    from codeexecutor.modeling import model as modeling
    from codeexecutor.training import data as data_mod
    from codeexecutor.training import loop, profiling

    modeling.PRESETS["toy"] = TOY
    if args.fixed:
        from codeexecutor.training import step as step_mod

        original_spec = step_mod.row_spec
        loop.row_spec = lambda cur, attention, compiled: original_spec(cur, attention, True)
    counter = counter_class()() if args.count else None
    window = {}
    shapes: dict[str, set] = collections.defaultdict(set)
    micro_steps = collections.Counter()
    original_after = profiling.StepProfiler.after

    def after(self, step):
        if step == args.first:
            window.update(wall=time.perf_counter(), cpu=time.process_time(), micro=sum(micro_steps.values()))
            if counter is not None:
                counter.__enter__()
        elif step == args.last and "wall" in window:
            if counter is not None:
                counter.__exit__(None, None, None)
            window.update(
                wall=time.perf_counter() - window["wall"],
                cpu=time.process_time() - window["cpu"],
                micro=sum(micro_steps.values()) - window["micro"],
            )
        return original_after(self, step)

    original_next = data_mod.Prefetcher.next

    def next_(self):
        out = original_next(self)
        shapes[self.data.stage.name].add(signature(out[0]))
        micro_steps[self.data.stage.name] += 1
        return out

    profiling.StepProfiler.after = after
    data_mod.Prefetcher.next = next_
    loop.Prefetcher = data_mod.Prefetcher
    loop.main(["--curriculum", args.curriculum, "--ds-config", args.ds_config, "--max-steps", str(args.last)])
    steps = args.last - args.first
    report = {
        "steps": steps,
        "micro_steps": window.get("micro"),
        "wall_ms_per_step": round(window["wall"] / steps * 1000, 2),
        "cpu_ms_per_step": round(window["cpu"] / steps * 1000, 2),
        "shapes_per_stage": {k: len(v) for k, v in shapes.items()},
        "micro_batches_per_stage": dict(micro_steps),
    }
    if counter is not None:
        report.update(
            ops_per_step=round(counter.ops / steps, 1),
            waits_per_step=round(counter.waits / steps, 2),
            waits_by_kind={k: round(v / steps, 2) for k, v in counter.wait_kinds.most_common()},
            top_ops={k: round(v / steps, 1) for k, v in counter.by_op.most_common(12)},
        )
    try:
        from torch._dynamo.utils import counters

        report["graph_breaks"] = sum(counters["graph_break"].values())
        report["unique_graphs"] = counters["stats"].get("unique_graphs", 0)
        report["recompiles"] = sum(v for k, v in counters["recompiles"].items()) if "recompiles" in counters else 0
    except Exception:  # noqa: BLE001 - an older torch without these counters
        pass
    report["setup"] = json.loads((pathlib.Path(args.run) / "curriculum.json").read_text()).get("setup")
    pathlib.Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    del torch


def signature(batch: dict) -> tuple:
    """The shapes of a micro-batch's tensors (a row's nested ones too), by name."""
    out = []
    for k, v in sorted(batch.items()):
        if isinstance(v, dict):
            out += [(f"{k}.{n}", tuple(t.shape)) for n, t in sorted(v.items()) if hasattr(t, "shape")]
        elif hasattr(v, "shape"):
            out.append((k, tuple(v.shape)))
    return tuple(out)


if __name__ == "__main__":
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    sys.exit(main())
