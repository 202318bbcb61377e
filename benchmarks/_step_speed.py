"""bench_step.py --speed: the row step's speed, and greedy decoding's, on a CUDA device
(a GPU lease's second call, gpu_run/measure.py) or, at toy sizes, on the CPU (its rehearsal).

Each measurement compiles the step (its seconds recorded), runs 40 optimizer steps and
times steps 20 to 40 with one synchronisation at each end: tokens/s of example tokens,
and MFU against the device's dense bf16 peak at 6 x parameters FLOPs a token (the
non-embedding parameters, as the earlier draws counted it) and with the output
projection and attention's key tiles counted too. The same `small` step runs once more
through DeepSpeed's engine (ZeRO-2 bf16), side by side. Decoding: a batch of 300
programs greedy, milliseconds per step with the step captured as a CUDA graph and
eagerly. Every measurement stops when `budget` seconds are spent, and what was measured
by then is reported.
"""

from __future__ import annotations

import os
import time

PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "V100": 125.0, "L4": 121.0}  # dense bf16 (V100: fp16)
RUNS = (("small", 49152), ("base", 49152), ("small", 196608), ("base", 196608))
WARM, MEASURED = 20, 40  # steps: the window is (WARM, MEASURED]


def rows_source(curriculum: str | None, spec, model, max_code: int):
    """A function giving the i-th micro-step's row: the curriculum's last stage through its
    sampler, else synthetic examples of CodeNetMut-like lengths."""
    import numpy as np
    import torch

    if curriculum:
        from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer
        from codeexecutor.training.config import Curriculum
        from codeexecutor.training.data import StageData
        from codeexecutor.training.setup import resolve_profile

        cur = Curriculum.load(curriculum)
        profile = resolve_profile(cur)
        tok = load_tokenizer(cur.model.tokenizer, exception=profile.exception_step, delta=profile.delta)
        enc = Encoder(tok, cur.model.max_code_length, cur.model.max_trace_length, profile)
        data = StageData(cur.stages[-1], enc, ".", None, spec.length, cur.train.anchor, spec, model.loss_table())
        return lambda i: data.batch(0, i, 0, 0, 1)["row"], data.batch(0, 0, 0, 0, 1)["tokens"]
    rng = np.random.default_rng(0)
    V = model.config.vocab_size

    def synthetic(i):
        codes, traces, used = [], [], 0
        while True:
            c, t = int(rng.integers(20, max_code)), int(rng.integers(20, spec.max_example - max_code))
            if used + c + t > spec.length:
                break
            codes.append(rng.integers(5, V, c))
            traces.append(rng.integers(5, V, t))
            used += c + t
        row = spec.row(codes, traces, model.config.pad_token_id, model.loss_table(), max_code)
        return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in row.items()}

    return synthetic, None


def flops_per_token(cfg, keys_per_query: float) -> dict:
    h, layers, inter, V = cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size, cfg.vocab_size
    body = layers * (4 * h * h + 2 * h * inter)
    return {"six_n": 6 * body, "full": 6 * (body + V * h) + 12 * layers * h * keys_per_query}


def example_tokens(row: dict) -> int:
    """A packed row's example tokens: its padding is one document a token (modeling/rows.pack_row)."""
    import numpy as np

    doc = np.asarray(row["doc"])
    return int(len(doc) - (np.bincount(doc)[doc] == 1).sum())


def attended_keys(row: dict) -> int:
    """(query, key) pairs a row's rule allows over its examples: a code token sees its
    example's code, a trace token that code and the trace up to itself."""
    import numpy as np

    doc, code = np.asarray(row["doc"]), np.asarray(row["code"]).astype(bool)
    sizes = np.bincount(doc)
    codes = np.bincount(doc, weights=code).astype(np.int64)
    out = 0
    for d in np.flatnonzero(sizes > 1):  # padding documents are one token each
        c, t = int(codes[d]), int(sizes[d] - codes[d])
        out += c * c + t * c + t * (t + 1) // 2
    return out


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def vocabulary(curriculum: str | None, vocab: int) -> dict:
    """The model's vocabulary settings: the curriculum's tokenizer's when the rows come from
    its data (their ids run to the tokenizer's size, its format tokens included), else
    `vocab` for synthetic rows."""
    if not curriculum:
        return {"vocab_size": vocab, "structural_token_ids": [5, 6], "mask0_token_id": 4}
    from codeexecutor.modeling.tokenizer import load_tokenizer, structural_ids
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.setup import resolve_profile

    cur = Curriculum.load(curriculum)
    profile = resolve_profile(cur)
    tok = load_tokenizer(cur.model.tokenizer, exception=profile.exception_step, delta=profile.delta)
    return {
        "vocab_size": len(tok),
        "pad_token_id": tok.pad_token_id,
        "structural_token_ids": structural_ids(tok),
        "mask0_token_id": tok.convert_tokens_to_ids("<mask0>"),
    }


def measure_step(preset: str, tokens: int, curriculum: str | None, engine: str, deadline: float, vocab: int) -> dict:
    import torch

    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.rows import BLOCK, CPU_TILE, RowSpec
    from codeexecutor.training.engine import TorchEngine, optimizer_for
    from codeexecutor.training.step import to_device

    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(0)
    cfg = CodeExecutorConfig.preset(
        preset,
        positions="rotary",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **vocabulary(curriculum, vocab),
    )
    cfg._attn_implementation = "sdpa"
    model = CodeExecutorModel(cfg).to(dev)
    spec = (
        RowSpec(tokens, 1024, "flex", BLOCK, fixed=True)
        if cuda
        else RowSpec(tokens, 1024, "tiles", CPU_TILE, fixed=False)
    )
    next_row, _ = rows_source(curriculum, spec, model, 256)
    out = {
        "preset": preset,
        "tokens_per_step": tokens,
        "engine": engine,
        "vocab": cfg.vocab_size,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    t0 = time.perf_counter()
    if cuda:
        model.compile_rows()
    if engine == "torch":
        opt = optimizer_for(model, 0.01, dev)
        eng = TorchEngine(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1e-4), 1, 1.0, dev, "bf16")
    else:
        import deepspeed

        os.environ.update(
            RANK="0",
            WORLD_SIZE="1",
            LOCAL_RANK="0",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=os.environ.get("MASTER_PORT", "29533"),
        )
        deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo")
        cfg_ds = {
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1,
            "train_batch_size": 1,
            "gradient_clipping": 1.0,
            "zero_optimization": {"stage": 2, "overlap_comm": False},
            "bf16": {"enabled": cuda},
            "steps_per_print": 10**9,
        }
        opt = optimizer_for(model, 0.01, "cpu")
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1e-4)
        eng, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, lr_scheduler=schedule, config=cfg_ds)
    precision = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=engine == "torch" and cuda)
    host = [next_row(i) for i in range(4)]
    example = [example_tokens(r) for r in host]  # a row's tokens less its padding
    needed = [attended_keys(r) for r in host]  # (query, key) pairs the rule allows, a row
    rows = [to_device(r, dev) for r in host]  # the same few rows again: the host's collation left out
    real = [int((r["weights"] > 0).sum()) for r in rows]
    stamps = {}
    for step in range(1, MEASURED + 1):
        with precision:
            loss = eng(row=rows[step % len(rows)]).loss
        eng.backward(loss)
        eng.step()
        if step == 1:
            _sync()
            out["first_step_seconds"] = round(time.perf_counter() - t0, 2)  # compile and first step
        if step in (WARM, MEASURED):
            _sync()
            stamps[step] = time.perf_counter()
        if time.perf_counter() > deadline:
            out["stopped"] = f"budget spent at step {step}"
            return out
    seconds = (stamps[MEASURED] - stamps[WARM]) / (MEASURED - WARM)
    trained = sum(real) / len(real)  # positions that bear a loss, a row on average
    kept = sum(example) / len(example)  # example tokens, a row on average
    out.update(
        seconds_per_step=round(seconds, 5),
        tokens_per_s=round(kept / seconds),
        loss=round(float(loss.detach()), 4),
        row_tokens_per_s=round(tokens / seconds),
        example_share=round(kept / tokens, 4),
        trained_positions_per_s=round(trained / seconds),
        counts="tokens_per_s: example tokens (padding left out); row_tokens_per_s: the row's whole length",
    )
    if not cuda:
        return out
    out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    name = torch.cuda.get_device_name(0)
    peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    computed = float(rows[0]["kv_num"].sum() + rows[0]["full_num"].sum()) * BLOCK * BLOCK  # pairs its tiles compute
    f = flops_per_token(cfg, needed[0] / max(example[0], 1))  # the attention the rule asks of an example token
    out["achieved_tflops"] = round(f["six_n"] * kept / seconds / 1e12, 2)
    out["attention_pairs"] = {
        "needed": needed[0],
        "computed_in_tiles": int(computed),
        "computed_share_needed": round(needed[0] / max(computed, 1), 4),
    }
    if peak:
        out["mfu"] = round(f["six_n"] * kept / seconds / (peak * 1e12), 4)
        out["mfu_with_head_and_attention"] = round(f["full"] * kept / seconds / (peak * 1e12), 4)
        out["mfu_counts"] = (
            "example tokens only; the attention term counts the (query, key) pairs the mask allows, "
            "not the whole tiles the kernel computes (attention_pairs)"
        )
    if engine != "torch":
        import torch.distributed as dist

        dist.destroy_process_group()
    del eng, model
    torch.cuda.empty_cache()
    return out


def measure_decode(
    deadline: float, batch: int = 300, vocab: int = 8000, preset: str = "small", steps: int = 256
) -> dict:
    """Greedy decoding of `batch` random programs by a random model: ms per step,
    graph-captured (CUDA) and eager."""
    import torch

    from codeexecutor.generation.device_search import DeviceSearch, Launch
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel

    cuda = torch.cuda.is_available()
    torch.manual_seed(0)
    cfg = CodeExecutorConfig.preset(preset, vocab_size=vocab, positions="rotary", mask0_token_id=4)
    cfg._attn_implementation = "sdpa"
    model = CodeExecutorModel(cfg).to("cuda", torch.bfloat16) if cuda else CodeExecutorModel(cfg)
    model.eval()

    class Enc:  # the ids a search needs of an encoder
        pad, mask0, eos = 1, 4, 2

    g = torch.Generator().manual_seed(0)
    codes = [
        torch.randint(5, vocab, (int(n),), generator=g).tolist() for n in torch.randint(60, 256, (batch,), generator=g)
    ]
    out = {"batch": batch, "preset": preset, "steps": steps}
    for graphs in (True, False) if cuda else (False,):
        if time.perf_counter() > deadline:
            break
        with torch.no_grad():
            search = DeviceSearch(model, Enc, codes, 1, steps, launch=Launch(10**9, graphs))
            _sync()
            t = time.perf_counter()
            search.run()
            _sync()
        out["graph" if graphs else "eager"] = {"ms_per_step": round((time.perf_counter() - t) / steps * 1000, 3)}
    return out


def speed_report(
    curriculum: str | None,
    budget: float,
    out_path: str | None,
    runs=RUNS,
    decode: int = 300,
    deepspeed: bool = True,
    vocab: int = 8000,
) -> dict:
    """The measurements in order, each written to `out_path` as it ends; a failed one (out
    of memory, say) is recorded and the rest go on."""
    import json
    import pathlib

    import torch

    deadline = time.perf_counter() + budget
    cuda = torch.cuda.is_available()
    report = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "steps": [],
        "decode": None,
    }

    def save():
        if out_path:
            pathlib.Path(out_path).write_text(json.dumps(report, indent=2) + "\n")

    for preset, tokens in runs:
        if time.perf_counter() > deadline:
            break
        try:
            report["steps"].append(measure_step(preset, tokens, curriculum, "torch", deadline, vocab))
        except Exception as exc:  # noqa: BLE001 - one failed size (out of memory) is recorded, the rest go on
            report["steps"].append(
                {"preset": preset, "tokens_per_step": tokens, "error": f"{type(exc).__name__}: {exc}"[:500]}
            )
            torch.cuda.empty_cache()
        print(json.dumps(report["steps"][-1]), flush=True)
        save()
    if decode and time.perf_counter() < deadline:
        try:
            report["decode"] = measure_decode(deadline, decode, vocab, *(("small", 256) if cuda else ("tiny", 16)))
        except Exception as exc:  # noqa: BLE001
            report["decode"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        print(json.dumps(report["decode"]), flush=True)
        save()
    if deepspeed and runs and time.perf_counter() < deadline:
        try:
            report["deepspeed"] = measure_step(*runs[0], curriculum, "deepspeed", deadline, vocab)
        except Exception as exc:  # noqa: BLE001
            report["deepspeed"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        print(json.dumps(report["deepspeed"]), flush=True)
    save()
    return report
