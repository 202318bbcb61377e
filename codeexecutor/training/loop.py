"""Curriculum pretraining under DeepSpeed: one training loop, stages as data + hyperparameters.

    deepspeed --module codeexecutor.training --curriculum curricula/demo.yaml --ds-config ds_configs/cpu.json
    python -m codeexecutor.training ...            # one process, no launcher (CPU demo)

The curriculum file (YAML) has three groups (see `Curriculum`): `model`, `train`, and a
list of `stages`, each with its data sources (dataset folder, task, mixing weight, and
optionally `hardest: K`: the K examples of that source with the highest loss under the
model as the previous stage left it, scored in parallel across ranks, among a fixed random
sample of `mine_from: N` of them when given), its number of
optimizer steps and its learning rate / warmup. One DeepSpeed engine runs all stages;
the learning rate follows each stage's warmup + linear decay.

Every `save_every` steps and at each stage end a DeepSpeed checkpoint (weights,
optimizer, scheduler, global step) is written; the same command after a kill resumes
from the latest one at the same step. Each stage end also exports a Hugging Face model
(`stageN-NAME/`, `save_pretrained` format, tokenizer included); the last one is copied
to `final/`, which `codeexecutor trace --model` loads. Losses go to TensorBoard
(`tensorboard/`), to `train_log.jsonl` and to `loss.png`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import socket
import sys
import time
from dataclasses import asdict

from codeexecutor.errors import ConfigError
from codeexecutor.training.config import Curriculum, Source, Stage, load_ds_config
from codeexecutor.training.data import Prefetcher, StageData
from codeexecutor.training.engine import TorchEngine, checkpoint_engine, choose, optimizer_for
from codeexecutor.training.export import export_model, save_checkpoint
from codeexecutor.training.mining import mine_hardest
from codeexecutor.training.plots import plot_losses
from codeexecutor.training.profiling import StepProfiler
from codeexecutor.training.setup import autocast, build_model, build_tokenizer, resolve_profile
from codeexecutor.training.step import attention_path, compile_and_probe, row_spec, wants_compile

log = logging.getLogger("codeexecutor.train")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_distributed():
    """Initialise torch.distributed through DeepSpeed; works with the deepspeed launcher,
    torchrun, or a single process started without any launcher."""
    import torch

    if "RANK" not in os.environ:  # one process, no launcher
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))  # before NCCL starts: each rank on its own GPU
    else:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    # DeepSpeed JIT-compiles its CPU shared-memory comm op (~35 s) into this folder: keep it
    # inside the virtualenv so it is built once per environment, not once per machine user.
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(sys.prefix, "torch_extensions"))
    import deepspeed

    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size()


def _device():
    """This process's device: its GPU (setup_distributed chose it) or the CPU."""
    import torch

    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def lr_at(stages: list[Stage], global_step: int) -> float:
    """Each stage: linear warmup to its lr, then linear decay to 0 at its end."""
    start = 0
    for st in stages:
        if global_step < start + st.steps:
            k = global_step - start
            warm = min(st.warmup, max(1, st.steps // 10)) if st.warmup > st.steps else st.warmup
            if warm and k < warm:
                return st.lr * (k + 1) / warm
            return st.lr * max(0.0, (st.steps - k) / max(1, st.steps - warm))
        start += st.steps
    return 0.0


def train(curriculum_path: str, ds_config_path: str, base_dir: str = ".", output_dir: str | None = None,
          max_steps: int | None = None) -> str:
    """Run (or resume) the whole curriculum; returns the final model folder."""
    import deepspeed
    import torch

    cur = Curriculum.load(curriculum_path, base_dir)  # a bad curriculum is reported before DeepSpeed starts
    rank, world = setup_distributed()
    if output_dir:
        cur.train.output_dir = output_dir
    out = cur.train.output_dir
    os.makedirs(out, exist_ok=True)
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    ds_cfg = load_ds_config(ds_config_path, cur.train, world)
    zero_stage = ds_cfg.get("zero_optimization", {}).get("stage", 0)
    torch.manual_seed(cur.train.seed)
    profile = resolve_profile(cur)
    tok = build_tokenizer(cur, base_dir, out, rank, profile)
    from codeexecutor.modeling.tokenizer import Encoder

    encoder = Encoder(tok, cur.model.max_code_length, cur.model.max_trace_length, profile)
    model = build_model(cur, tok, profile)
    kind = choose(cur.train.engine, world, ds_cfg)
    precision = cur.train.autocast or ("bf16" if kind == "torch" and ds_cfg.get("bf16", {}).get("enabled") else None)
    device = _device()
    setup = {"engine": kind, "device": str(device), "precision": precision or "float32", "world_size": world}
    spec = None
    if cur.train.max_tokens:
        attention, fallback = attention_path(cur.model.attention, device)
        compiled = wants_compile(cur.train.compile, device)
        setup.update(row_tokens=cur.train.max_tokens, attention=attention, fallbacks=[fallback] if fallback else [])
        if compiled and kind == "torch":  # on the device it trains on, before the optimizer holds its parameters
            model.to(device)
            setup.update(compile_and_probe(model, row_spec(cur, attention, True), cur, device, precision))
        elif compiled:  # DeepSpeed moves the model itself; ZeRO-3's hooks break the graph between modules
            model.compile_rows(fullgraph=zero_stage < 3)
            setup.update(compiled=True, fullgraph=zero_stage < 3)
            if zero_stage == 3:
                setup["fallbacks"].append("ZeRO-3 gathers each module's parameters in hooks: the row step is compiled "
                                          "with graph breaks between modules")
        else:
            setup["compiled"] = False
        if setup.get("fallback"):
            setup["fallbacks"].append(setup.pop("fallback"))
        spec = row_spec(cur, attention, setup["compiled"])
    else:
        setup.update(compiled=False, fallbacks=["train.max_tokens is not set: batches of micro_batch_size examples are "
                                                "padded apart and run through the eager Hugging Face forward"])
    if rank == 0:
        with open(os.path.join(out, "curriculum.json"), "w") as f:
            json.dump({"model": asdict(cur.model), "train": asdict(cur.train), "stages": [asdict(s) for s in cur.stages],
                       "ds_config": ds_cfg, "world_size": world, "setup": setup}, f, indent=2)
        for note in setup["fallbacks"]:
            log.warning("%s", note)
        log.info("setup: %s", {k: v for k, v in setup.items() if k != "fallbacks"})
    if kind == "torch":
        model.to(device)
        optimizer = optimizer_for(model, cur.train.weight_decay, device)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(cur.stages, s))
        engine = TorchEngine(model, optimizer, scheduler, ds_cfg["gradient_accumulation_steps"],
                             ds_cfg.get("gradient_clipping", cur.train.max_grad_norm), device, precision)
    else:
        optimizer = optimizer_for(model, cur.train.weight_decay, "cpu")
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(cur.stages, s))
        engine, _, _, scheduler = deepspeed.initialize(model=model, optimizer=optimizer, lr_scheduler=scheduler, config=ds_cfg)
        if zero_stage == 3:  # the row loss reads the tied output projection directly: ZeRO-3 gathers it for the whole forward
            deepspeed.zero.register_external_parameter(engine.module, engine.module.lm_head.weight)
    ckpt = os.path.join(out, "checkpoints")
    global_step = 0
    found = checkpoint_engine(ckpt)
    if found is not None and found != kind:
        raise ConfigError(f"{ckpt} holds checkpoints of the {found} engine and this run uses {kind}: resume with "
                          f"train.engine: {found}, or start a new output_dir")
    if found is not None:
        _, client = engine.load_checkpoint(ckpt)
        global_step = int(client["global_step"])
        if rank == 0:
            print(f"resuming from {ckpt} at step {global_step}", flush=True)
    writer = None
    if rank == 0:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(os.path.join(out, "tensorboard"))
    log_path = os.path.join(out, "train_log.jsonl")
    total = sum(s.steps for s in cur.stages)
    limit = total if max_steps is None else min(total, max_steps)
    start_of = 0
    final = os.path.join(out, "final")
    saved_at = global_step if global_step else -1  # the step of the newest checkpoint (one save per step)
    profiler = StepProfiler.from_env(out, rank)  # CODEEXECUTOR_PROFILE=FIRST:LAST (training/profiling.py)
    for si, stage in enumerate(cur.stages):
        end_of = start_of + stage.steps
        if global_step >= end_of:
            start_of = end_of
            continue
        if global_step >= limit:
            break
        data = _stage_data(cur, si, stage, engine, encoder, base_dir, out, rank, world, spec, precision)
        evaluator = _evaluator(cur, stage, encoder, base_dir, rank, zero_stage)
        bar = None
        if rank == 0:
            from codeexecutor.progress import bar as progress_bar

            bar = progress_bar(total=stage.steps, initial=global_step - start_of, desc=f"stage {si + 1} {stage.name}", unit="step")
        engine.train()
        t0, tokens, computed, examples = time.perf_counter(), 0, 0, 0
        accum = ds_cfg["gradient_accumulation_steps"]
        batches = Prefetcher(data, cur.train.seed, start_of, global_step, min(end_of, limit), accum, rank,
                             ds_cfg["train_micro_batch_size_per_gpu"], engine.device)
        loss_sum, loss_count = torch.zeros((), device=engine.device), 0  # on the device until a log step reads it
        while global_step < min(end_of, limit):
            for micro in range(accum):
                batch, real, padded, rows = batches.next()
                tokens, computed, examples = tokens + real, computed + padded, examples + rows
                with autocast(precision, engine.device):
                    loss = engine(**batch).loss
                engine.backward(loss)
                engine.step()
                loss_sum += loss.detach().float()
                loss_count += 1
            global_step += 1
            profiler.after(global_step)
            if rank == 0:
                bar.update(1)
            if global_step % cur.train.log_every == 0 or global_step == end_of or global_step == limit:
                loss_value = loss_sum.item() / loss_count  # one host sync per log step, not per micro-step
                loss_sum.zero_()
                loss_count = 0
                if not math.isfinite(loss_value):
                    raise RuntimeError(f"loss is {loss_value} at step {global_step}; lower the learning rate")
                if rank == 0:
                    bar.set_postfix(loss=f"{loss_value:.3f}")
                    elapsed = max(time.perf_counter() - t0, 1e-9)
                    _log(writer, log_path, {"step": global_step, "stage": stage.name, "loss": loss_value,
                                            "lr": scheduler.get_last_lr()[0], "tokens_per_s": tokens * world / elapsed,
                                            "stage_tokens": tokens * world, "stage_examples": examples * world,
                                            "stage_seconds": elapsed,
                                            "padding_share": 1 - tokens / max(computed, 1), **loss_scaling(engine)})
            at_end = global_step == end_of
            if evaluator is not None and (at_end or (cur.train.eval_every and global_step % cur.train.eval_every == 0)):
                _evaluate(evaluator, engine, tok, cur, si, stage, global_step, writer, log_path, out, rank, zero_stage)
            if cur.train.checkpoints and (global_step % cur.train.save_every == 0 or at_end):
                save_checkpoint(engine, ckpt, global_step, cur.train.keep_checkpoints, rank)
                saved_at = global_step
        batches.close()
        if bar is not None:
            bar.close()
        if global_step >= end_of:
            export_model(engine, tok, os.path.join(out, f"stage{si + 1}-{stage.name}"), rank, zero_stage)
            if rank == 0:
                plot_losses(log_path, os.path.join(out, "loss.png"))
        start_of = end_of
    if cur.train.checkpoints and global_step < total and saved_at != global_step:  # stopped early (--max-steps): resumable
        save_checkpoint(engine, ckpt, global_step, cur.train.keep_checkpoints, rank)
    if global_step >= total:
        export_model(engine, tok, final, rank, zero_stage)
        if rank == 0:
            plot_losses(log_path, os.path.join(out, "loss.png"))
            print(f"pretraining done: {global_step} steps; model in {final}", flush=True)
    if writer is not None:
        writer.close()
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
    return final


def _stage_data(cur: Curriculum, si: int, stage: Stage, engine, encoder, base_dir: str, out: str, rank: int,
                world: int, spec=None, precision: str | None = None) -> StageData:
    """The stage's data: hardest examples mined where a source asks for them (once; the
    choice is saved, so a resumed run uses the same), fit counts written beside the run."""
    import torch

    subsets = {}
    for j, src in enumerate(stage.sources):
        if src.hardest:
            mined = os.path.join(out, f"stage{si + 1}-{stage.name}-hardest-{j}.json")
            if not os.path.exists(mined):
                full = StageData(Stage(stage.name, [Source(src.path, src.task)], 1), encoder, base_dir)
                idx = mine_hardest(engine, full, 0, src.hardest, cur.train.mining_batch_size, rank, world,
                                   src.mine_from, cur.train.seed, precision)
                if rank == 0:
                    with open(mined + ".tmp", "w") as f:
                        json.dump(idx, f)
                    os.replace(mined + ".tmp", mined)
                torch.distributed.barrier()
            with open(mined) as f:
                subsets[j] = json.load(f)
            log.info("stage %s: %d hardest examples of %s", stage.name, len(subsets[j]), src.path)
    weight_of = engine.module.loss_table() if spec is not None else None
    data = StageData(stage, encoder, base_dir, subsets, cur.train.max_tokens, cur.train.anchor, spec, weight_of)
    if rank == 0:
        stats_path = os.path.join(out, "data_stats.json")
        stats = json.load(open(stats_path)) if os.path.exists(stats_path) else {}
        stats[f"stage{si + 1}-{stage.name}"] = {"fit": data.fits, "max_tokens": cur.train.max_tokens,
                                                "max_trace_length": cur.model.max_trace_length}
        with open(stats_path + ".tmp", "w") as f:
            json.dump(stats, f, indent=2)
        os.replace(stats_path + ".tmp", stats_path)
        for path, fits in data.fits.items():
            log.info("stage %s, %s: targets %s", stage.name, path, fits)
    return data


def _evaluator(cur: Curriculum, stage: Stage, encoder, base_dir: str, rank: int, zero_stage: int):
    if rank != 0 or cur.train.eval_examples <= 0:
        return None
    if zero_stage == 3:
        log.warning("evaluation while training is skipped under ZeRO-3 (parameters are partitioned across ranks)")
        return None
    from codeexecutor.training.evaluation import StageEvaluator

    return StageEvaluator(stage, encoder, base_dir, cur.train.eval_examples, cur.train.eval_decode_examples)


def _evaluate(evaluator, engine, tok, cur: Curriculum, si: int, stage: Stage, step: int, writer, log_path: str,
              out: str, rank: int, zero_stage: int) -> None:
    """Evaluate (rank 0), log it, and keep the stage's best export (`stageN-NAME-best/`)."""
    from codeexecutor.training.evaluation import score

    results = evaluator.evaluate(engine.module, engine.device, cur.model.max_trace_length)
    _log(writer, log_path, {"step": step, "stage": stage.name, "eval": results})
    best_path = os.path.join(out, f"stage{si + 1}-{stage.name}-best")
    value = score(results)
    record = os.path.join(best_path, "best.json")
    previous = json.load(open(record))["score"] if os.path.exists(record) else None
    if previous is None or value > previous:
        from codeexecutor.training.export import save_export

        save_export(engine.module, tok, best_path)
        with open(record, "w") as f:
            json.dump({"step": step, "score": value, "eval": results}, f, indent=2)
    log.info("step %d eval: %s", step, {k: {m: v for m, v in r.items() if m != "split"} for k, r in results.items()})


def loss_scaling(engine) -> dict:
    """fp16 only: the dynamic loss scale now and the optimizer steps skipped on overflow
    so far (DeepSpeed halves the scale and skips the step when gradients overflow)."""
    if not engine.fp16_enabled():
        return {}
    scale = getattr(engine.optimizer, "cur_scale", None)
    return {"loss_scale": float(scale) if scale is not None else None, "skipped_steps": int(engine.skipped_steps)}


def _log(writer, log_path: str, row: dict) -> None:
    """One line of train_log.jsonl, and its numbers in TensorBoard."""
    with open(log_path, "a") as f:
        f.write(json.dumps(row) + "\n")
    for key, value in row.items():
        if key in ("step", "stage"):
            continue
        if isinstance(value, dict):  # eval: {source: {metric: value}}
            for src, metrics in value.items():
                for name, v in metrics.items():
                    if isinstance(v, (int, float)) and v is not None:
                        writer.add_scalar(f"eval/{src}/{name}", v, row["step"])
        elif isinstance(value, (int, float)):
            writer.add_scalar(key, value, row["step"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="codeexecutor.training", description="Curriculum pretraining under DeepSpeed.")
    ap.add_argument("--curriculum", required=True, help="curriculum YAML (see curricula/*.yaml)")
    ap.add_argument("--ds-config", default="ds_configs/cpu.json", help="DeepSpeed JSON config (ds_configs/)")
    ap.add_argument("--base-dir", default=".", help="folder the curriculum's dataset paths are relative to")
    ap.add_argument("--output-dir", help="override train.output_dir")
    ap.add_argument("--max-steps", type=int, help="stop after this global step (the rest resumes later)")
    ap.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)  # set by the deepspeed launcher
    args = ap.parse_args(argv)
    from codeexecutor.progress import quiet_libraries

    quiet_libraries()
    try:
        train(args.curriculum, args.ds_config, args.base_dir, args.output_dir, args.max_steps)
    except ConfigError as exc:
        print(f"codeexecutor.training: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
