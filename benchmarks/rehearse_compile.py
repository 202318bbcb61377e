"""The compiled row step rehearsed at toy width on the CPU, under whichever torch runs it:
graph breaks and compiles, stage by stage of the draw's recipe.

    make rehearse                                            # under torch 2.11 (.venv-torch2.11), the device's
    .venv/bin/python benchmarks/rehearse_compile.py [--recipe R] [--rows 3] [--out FILE]

A lent GPU runs another torch than the one tested here (the recorded draws: 2.11). Under
`fullgraph=True` a graph break is an error, and a guard that fails on every row (an object
made anew each step, reaching the compiled function) recompiles each row until the
recompile limit stops training. Neither depends on the device: both are decided where
Dynamo traces the Python. So this script compiles the row step as the training does
(`compile_rows`, fixed shapes, bf16 autocast), traced by Dynamo and AOTAutograd (backend
`aot_eager`: forward and backward graphs, the guards, no kernels), and steps it over
`--rows` rows of each stage of the recipe in order, on both paths (FlexAttention's block
mask and the tile path). A stage's rows have their own fixed shape (its longest example),
so its first row may compile; a later row that compiles is a recompile. Inductor's
kernels are the device's own business (tests/test_gpu.py runs there).

Rows are made of random ids at each stage's lengths: SingleLine's short examples, the
Tutorial's, CodeNetMut's up to the recipe's code and trace lengths.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# (code, trace) token ranges of each task's examples: SingleLine's lines and states are short,
# the Tutorial's snippets longer, a contest program up to the recipe's lengths
TASK_LENGTHS = {"singleline": ((16, 128), (8, 64)), "tutorial": ((16, 256), (16, 384)), "codenet": (None, None)}


def _examples(rng, stage: dict, max_code: int, max_trace: int, room: int):
    import numpy as np

    tasks = [s["task"] for s in stage["sources"]]
    codes, traces, used = [], [], 0
    while True:
        code_range, trace_range = TASK_LENGTHS.get(tasks[int(rng.integers(len(tasks)))], (None, None))
        lc = int(rng.integers(*(code_range or (32, max_code))))
        lt = int(rng.integers(*(trace_range or (32, max_trace))))
        if used + lc + lt > room:
            return codes, traces
        codes.append(rng.integers(7, 300, lc))
        traces.append(np.concatenate([[4], rng.integers(7, 300, lt - 2), [2]]))
        used += lc + lt


def _longest(stage: dict, max_code: int, max_trace: int) -> int:
    sizes = [TASK_LENGTHS.get(s["task"], (None, None)) for s in stage["sources"]]
    return max((c[1] + t[1]) if c else max_code + max_trace for c, t in sizes)


def rehearse(recipe: pathlib.Path, rows: int = 3, tokens: int = 4096, paths=("flex", "tiles")) -> dict:
    """Per path and stage: the compiles at its first row and after it, graph breaks, seconds."""
    import numpy as np
    import torch
    import torch.nn.attention.flex_attention as flex_module
    import yaml
    from torch._dynamo.utils import counters

    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.rows import BLOCK, CPU_TILE, RowSpec

    # The CPU refuses FlexAttention's backward at its API, since inductor has no CPU kernel
    # for it; traced with aot_eager, its backward is the operator's reference one, which the
    # CPU runs. The check is lifted here only, in this process.
    flex_module._validate_device = lambda *tensors: None
    raw = yaml.safe_load(recipe.read_text())
    max_code, max_trace = raw["model"]["max_code_length"], raw["model"]["max_trace_length"]
    report = {
        "torch": torch.__version__,
        "recipe": str(recipe.relative_to(ROOT) if recipe.is_relative_to(ROOT) else recipe),
        "tokens_a_row": tokens,
        "rows_a_stage": rows,
        "backend": "aot_eager",
        "paths": {},
    }
    for path in paths:
        torch._dynamo.reset()
        counters.clear()
        compiles: list[int] = []

        def counting(gm, example_inputs, compiles=compiles):
            compiles.append(len(gm.graph.nodes))
            return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

        torch.manual_seed(0)
        cfg = CodeExecutorConfig.preset(
            "tiny",
            vocab_size=300,
            positions="rotary",
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            structural_token_ids=[5, 6],
            mask0_token_id=4,
            max_position_embeddings=max_code + max_trace + 2,
        )
        cfg._attn_implementation = "sdpa"
        model = CodeExecutorModel(cfg).train()
        model.compile_rows(backend=counting)
        rng = np.random.default_rng(0)
        stages = []
        for stage in raw["stages"]:
            longest = min(tokens, _longest(stage, max_code, max_trace))
            spec = RowSpec(tokens, longest, path, BLOCK if path == "flex" else CPU_TILE, fixed=True)
            seen, t = [], time.perf_counter()
            for _ in range(rows):
                before = len(compiles)
                row = spec.row(
                    *_examples(rng, stage, min(max_code, longest // 2), longest - min(max_code, longest // 2), tokens),
                    1,
                    model.loss_table(),
                    max_code,
                )
                row = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in row.items()}
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(row=row).loss
                loss.backward()
                seen.append(len(compiles) - before)
            stages.append(
                {
                    "stage": stage["name"],
                    "longest_example": longest,
                    "compiles_first_row": seen[0],
                    "recompiles_after_first_row": sum(seen[1:]),
                    "seconds": round(time.perf_counter() - t, 1),
                }
            )
        report["paths"][path] = {
            "stages": stages,
            "graphs": len(compiles),
            "graph_breaks": int(sum(counters["graph_break"].values())),
        }
    report["ok"] = all(
        p["graph_breaks"] == 0 and all(s["recompiles_after_first_row"] == 0 for s in p["stages"])
        for p in report["paths"].values()
    )
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default=str(ROOT / "curricula" / "recipes" / "gpu-draw.yaml"))
    ap.add_argument("--rows", type=int, default=3, help="rows stepped a stage")
    ap.add_argument("--tokens", type=int, default=4096, help="a row's tokens (a multiple of 128 that holds an example)")
    ap.add_argument("--out", help="the report (JSON); printed either way")
    args = ap.parse_args()
    report = rehearse(pathlib.Path(args.recipe).resolve(), args.rows, args.tokens)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
