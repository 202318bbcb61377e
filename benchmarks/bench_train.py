"""Benchmark: training throughput.

1. Batching: the padding share of every source and the real (non-padding) tokens/s of
   the same model trained on fixed-size batches padded apart (drawn as the loop drew
   them before) and on token-budget rows (`train.max_tokens`, modeling/rows.py), in one
   run; and the rows again with the forward under bfloat16 autocast (`train.autocast`,
   float32 weights).
2. Our DeepSpeed loop against plain Hugging Face `Trainer` (no DeepSpeed) for the same
   tiny model and batches (CPU).

The step's speed on a GPU (tokens/s, MFU, compile seconds) is bench_step.py --speed's.

    .venv/bin/python benchmarks/bench_train.py [--steps 40] [--data demo_out/data]

Needs built datasets (`make demo`, or the quality run's runs/quality/data). Writes
benchmarks/results/bench_train.json.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import ROOT, fast_bf16, write_report  # noqa: E402


def setup(data: pathlib.Path, preset: str = "tiny"):
    import datasets

    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.tokenizer import Encoder, structural_ids, train_tokenizer
    from codeexecutor.training.tokenized import tokenize

    ds = datasets.concatenate_datasets(
        [
            datasets.load_from_disk(str(data / n))["train"]
            for n in ("codenetmut/codenetmut", "tutorial/tutorial", "singleline/singleline")
        ]
    )
    from codeexecutor.modeling.profiles import Profile

    tok = train_tokenizer([t for row in ds for t in Profile().example(row)], vocab_size=2000)
    enc = Encoder(tok, 256, 512)
    table, _ = tokenize(ds, enc)
    torch.manual_seed(0)
    cfg = CodeExecutorConfig.preset(
        preset, vocab_size=len(tok), structural_token_ids=structural_ids(tok), pad_token_id=tok.pad_token_id
    )
    return CodeExecutorModel(cfg), enc, table


def batches(table, enc, steps: int, size: int):
    import random

    rng = random.Random(0)
    out = []
    for _ in range(steps):
        rows = table[[rng.randrange(len(table)) for _ in range(size)]]
        out.append(enc.collate([{"code_ids": c, "trace_ids": t} for c, t in zip(rows["code_ids"], rows["trace_ids"])]))
    return out


SOURCES = {
    "singleline": "singleline/singleline",
    "tutorial": "tutorial/tutorial",
    "codenetmut": "codenetmut/codenetmut",
    "errors": "codenetmut/errors",
}


def sources_and_encoder(data_dir: pathlib.Path, vocab_size: int):
    """The built sources present ({name: path}), a BPE trained on up to 2,000 targets of
    each, and an encoder at the run's lengths (256 code, 768 trace)."""
    import datasets

    from codeexecutor.modeling.tokenizer import Encoder, train_tokenizer

    present = {n: str(data_dir / p) for n, p in SOURCES.items() if (data_dir / p).exists()}
    from codeexecutor.modeling.profiles import Profile

    texts = []
    for path in present.values():
        rows = datasets.load_from_disk(path)["train"]
        texts += [Profile().example(row)[1] for row in rows.select(range(min(2000, len(rows))))]
    tok = train_tokenizer(texts, vocab_size=vocab_size)
    return present, tok, Encoder(tok, 256, 768)


def batching(data_dir: pathlib.Path, steps: int, size: int, max_tokens: int, preset: str) -> dict:
    """Padding per source, and real tokens/s of fixed vs token-budget batches on one model."""
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.tokenizer import structural_ids
    from codeexecutor.training.config import Source, Stage
    from codeexecutor.training.data import StageData, batch_tokens, padding_share
    from codeexecutor.training.setup import autocast

    present, tok, enc = sources_and_encoder(data_dir, 4000)
    report: dict = {"max_tokens": max_tokens, "fixed_batch": size, "padding_share": {}}
    for name, path in present.items():
        stage = Stage(name, [Source(path, "singleline" if name == "singleline" else "codenet")], steps)
        fixed, budget = StageData(stage, enc, "."), StageData(stage, enc, ".", max_tokens=max_tokens)
        report["padding_share"][name] = {
            "fixed": sum(padding_share(fixed.batch(0, i, 0, 0, size)) for i in range(100)) / 100,
            "token_budget": sum(padding_share(budget.batch(0, i, 0, 0, size)) for i in range(100)) / 100,
        }
    stage = Stage(
        "mixed", [Source(p, "singleline" if n == "singleline" else "codenet") for n, p in present.items()], steps
    )
    torch.manual_seed(0)
    cfg = CodeExecutorConfig.preset(
        preset, vocab_size=len(tok), structural_token_ids=structural_ids(tok), pad_token_id=tok.pad_token_id
    )
    model = CodeExecutorModel(cfg)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    fixed, budget = StageData(stage, enc, "."), StageData(stage, enc, ".", max_tokens=max_tokens)
    for kind, data, precision in (
        ("fixed", fixed, None),
        ("token_budget", budget, None),
        ("token_budget_bf16_autocast", budget, "bf16"),
    ):
        model.load_state_dict(state)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batches = [data.batch(0, i, 0, 0, size) for i in range(steps)]
        real = sum(batch_tokens(b)[0] for b in batches)
        start = time.perf_counter()
        for b in batches:
            with autocast(precision, torch.device("cpu")):
                loss = model(row=b["row"]).loss if "row" in b else model(**b).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
        seconds = time.perf_counter() - start
        report[f"{kind}_real_tokens_per_s"] = real / seconds
        report[f"{kind}_padding_share"] = 1 - real / sum(batch_tokens(b)[1] for b in batches)
    report["real_tokens_per_s_ratio"] = report["token_budget_real_tokens_per_s"] / report["fixed_real_tokens_per_s"]
    report["bf16_autocast_ratio"] = (
        report["token_budget_bf16_autocast_real_tokens_per_s"] / report["token_budget_real_tokens_per_s"]
    )
    report["native_bf16"] = fast_bf16()
    return report


def ours(model, data, device: str) -> float:
    import deepspeed

    from codeexecutor.training.config import TrainArgs, load_ds_config
    from codeexecutor.training.distributed import setup_distributed

    setup_distributed()
    cfg = load_ds_config(
        str(ROOT / "ds_configs" / "cpu.json"), TrainArgs(micro_batch_size=len(data[0]["code_ids"]), grad_accum=1), 1
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    start = time.perf_counter()
    for b in data:
        loss = engine(**{k: v.to(device) for k, v in b.items()}).loss
        engine.backward(loss)
        engine.step()
    return time.perf_counter() - start


def trainer(model, data, device: str) -> float:
    from transformers import Trainer, TrainingArguments

    class Fixed(torch.utils.data.Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, i):
            return data[i]

    args = TrainingArguments(
        output_dir="/tmp/bench_trainer",
        per_device_train_batch_size=1,
        max_steps=len(data),
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=device == "cpu",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        learning_rate=1e-4,
        average_tokens_across_devices=False,
    )
    t = Trainer(model=model, args=args, train_dataset=Fixed(), data_collator=lambda rows: rows[0])
    start = time.perf_counter()
    t.train()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--data", default=str(ROOT / "demo_out" / "data"))
    ap.add_argument("--max-tokens", type=int, default=6144)
    ap.add_argument("--batching-steps", type=int, default=30)
    ap.add_argument("--preset", default="mini", help="model of the batching comparison")
    args = ap.parse_args()
    data_dir = pathlib.Path(args.data)
    if not (data_dir / "codenetmut" / "codenetmut").exists():
        sys.exit(f"bench_train: no datasets in {data_dir}; run `python -m codeexecutor.demo --only data` first")
    torch.set_num_threads(2)
    b = batching(data_dir, args.batching_steps, 16, args.max_tokens, args.preset)
    for name, share in b["padding_share"].items():
        print(
            f"padding share {name:11} fixed batches of 16: {share['fixed']:.1%}   "
            f"token budget {args.max_tokens}: {share['token_budget']:.1%}"
        )
    print(
        f"{args.preset} model, {args.batching_steps} steps, mixed sources: "
        f"real tokens/s fixed {b['fixed_real_tokens_per_s']:,.0f}, "
        f"token budget {b['token_budget_real_tokens_per_s']:,.0f} ({b['real_tokens_per_s_ratio']:.2f}x); "
        f"token budget under bf16 autocast {b['token_budget_bf16_autocast_real_tokens_per_s']:,.0f} "
        f"({b['bf16_autocast_ratio']:.2f}x float32; native bf16 here: {b['native_bf16']})"
    )
    model, enc, table = setup(data_dir)
    data = batches(table, enc, args.steps, args.batch)
    tokens = sum(int(b["code_mask"].sum() + b["trace_mask"].sum()) for b in data)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ours(model, data[:3], "cpu")  # warm up (DeepSpeed setup, first-step allocations)
    model.load_state_dict(state)
    t_ours = ours(model, data, "cpu")
    model.load_state_dict(state)
    t_trainer = trainer(model, data, "cpu")
    report = {
        "device": "cpu",
        "data": str(data_dir),
        "batching": b,
        "padding_share": b["padding_share"],
        "steps": args.steps,
        "batch": args.batch,
        "tokens": tokens,
        "ours_tokens_per_s": tokens / t_ours,
        "trainer_tokens_per_s": tokens / t_trainer,
        "ratio": t_trainer / t_ours,
    }
    print(
        f"tiny model, CPU, {args.steps} steps x {args.batch}: ours (DeepSpeed engine) {tokens / t_ours:,.0f} tokens/s, "
        f"plain Trainer {tokens / t_trainer:,.0f} tokens/s, ratio {t_trainer / t_ours:.2f}x"
    )
    write_report("bench_train", report)


if __name__ == "__main__":
    main()
