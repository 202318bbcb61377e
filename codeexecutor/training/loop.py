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
from codeexecutor.training.config import Curriculum, Stage, load_ds_config, node_count
from codeexecutor.training.budget import WARMUP, Budget, RecentSpeed, StepClock
from codeexecutor.training.data import Prefetcher
from codeexecutor.training.engine import TorchEngine, checkpoint_engine, choose, optimizer_for
from codeexecutor.training.export import export_model, save_checkpoint
from codeexecutor.training.plots import plot_losses
from codeexecutor.training.profiling import StepProfiler
from codeexecutor.training.resume import universal_tag
from codeexecutor.training.precision import apply as apply_precision
from codeexecutor.training.precision import AUTO, capability, check_kernels, decide, ds_half, resolve_ds_config
from codeexecutor.training.setup import autocast, build_model, build_tokenizer, resolve_profile
from codeexecutor.training.stages import evaluate, evaluator_for, log_row, loss_scaling, stage_data
from codeexecutor.training.step import prepare_rows, row_spec

log = logging.getLogger("codeexecutor.train")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_distributed():
    """Initialise torch.distributed through DeepSpeed; works with the deepspeed launcher,
    torchrun, or a single process started without any launcher. A single process where
    DeepSpeed is not installed (a GPU draw that carries no DeepSpeed wheel) starts its
    process group with torch alone: its torch engine needs nothing of DeepSpeed."""
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
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if has_deepspeed():
        import deepspeed

        deepspeed.init_distributed(dist_backend=backend)
    elif os.environ.get("WORLD_SIZE", "1") == "1":
        dist.init_process_group(backend=backend, init_method="env://")
    else:
        raise ConfigError("several processes need DeepSpeed (pip install deepspeed; requirements.txt pins it)")
    return dist.get_rank(), dist.get_world_size()


def has_deepspeed() -> bool:
    import importlib.util

    return importlib.util.find_spec("deepspeed") is not None


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


def _agreed(value: int) -> int:
    """Rank 0's value, on every rank (a budgeted stage's steps)."""
    import torch
    import torch.distributed as dist

    if dist.get_world_size() == 1:
        return int(value)
    t = torch.tensor([int(value)], dtype=torch.long, device="cuda" if torch.cuda.is_available() else "cpu")
    dist.broadcast(t, 0)
    return int(t.item())


def _agreed_fixed(budget, stage) -> bool:
    """Whether rank 0 has fixed this stage's steps already (a resumed run)."""
    return bool(_agreed(1 if budget is not None and budget.is_fixed(stage) else 0))


def train(curriculum_path: str, ds_config_path: str, base_dir: str = ".", output_dir: str | None = None,
          max_steps: int | None = None, minutes: float | None = None) -> str:
    """Run (or resume) the whole curriculum; returns the final model folder. `minutes`:
    fit the stages' steps into that many minutes from this call on (set-up and compile
    included), each from its measured speed (training/budget.py)."""
    import torch

    entered = time.perf_counter()  # a budget counts from here: a slow set-up or compile is paid from it

    cur = Curriculum.load(curriculum_path, base_dir)  # a bad curriculum is reported before DeepSpeed starts
    rank, world = setup_distributed()
    if output_dir:
        cur.train.output_dir = output_dir
    out = cur.train.output_dir
    os.makedirs(out, exist_ok=True)
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    device = _device()
    cap = capability(device)
    if cap is not None:
        check_kernels(cap, torch.cuda.get_arch_list(), torch.__version__)
    ds_config_path, config_note = resolve_ds_config(ds_config_path, cap)
    ds_cfg = load_ds_config(ds_config_path, cur.train, world, node_count(world))
    zero_stage = ds_cfg.get("zero_optimization", {}).get("stage", 0)
    torch.manual_seed(cur.train.seed)
    profile = resolve_profile(cur)
    tok = build_tokenizer(cur, base_dir, out, rank, profile)
    from codeexecutor.modeling.tokenizer import Encoder

    encoder = Encoder(tok, cur.model.max_code_length, cur.model.max_trace_length, profile)
    model = build_model(cur, tok, profile)
    kind = choose(cur.train.engine, world, ds_cfg)
    ckpt = os.path.join(out, "checkpoints")
    found = checkpoint_engine(ckpt)
    resumed_on, universal = None, None
    if found is not None and found != kind and cur.train.engine == "auto" and found == "deepspeed":
        kind, resumed_on = found, f"the checkpoints in {ckpt} are DeepSpeed's: this run resumes on its engine"
    if kind == "deepspeed" and not has_deepspeed():
        raise ConfigError(f"this run needs the DeepSpeed engine (train.engine {cur.train.engine}, {world} process(es), "
                          f"{os.path.basename(ds_config_path)}) and DeepSpeed is not installed: pip install deepspeed, or "
                          "train one process with train.engine: torch")
    decided = decide(cap, kind, ds_cfg, cur.train.autocast, cur.model.attention)
    chosen = decided.precision
    apply_precision(chosen)
    precision = chosen.autocast
    setup = {"engine": kind, "device": str(device), "precision": chosen.label, "precision_chosen_by": chosen.chosen_by,
             "world_size": world, "ds_config": os.path.basename(ds_config_path),
             "ds_config_chosen_by": "device" if config_note else "config"}
    if resumed_on:
        setup["engine_chosen_by"] = resumed_on
    if config_note and rank == 0:
        log.info("%s", config_note)
    spec = None
    if cur.train.max_tokens:
        attention, fallback = decided.attention, decided.fallback
        setup.update(row_tokens=cur.train.max_tokens, attention=attention, fallbacks=[fallback] if fallback else [])
        half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(ds_half(ds_cfg)) if kind == "deepspeed" else None
        attention, rows = prepare_rows(model, cur, attention, device, precision, kind, zero_stage, half)
        setup["fallbacks"] += rows.pop("fallbacks")
        setup.update(rows, attention=attention)
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
        log.info("precision: %s; attention: %s%s", chosen.label, setup.get("attention", "padded batches"),
                 " (compiled)" if setup.get("compiled") else "")
        log.info("setup: %s", {k: v for k, v in setup.items() if k != "fallbacks"})
    if kind == "torch":
        model.to(device)
        optimizer = optimizer_for(model, cur.train.weight_decay, device)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(cur.stages, s))
        engine = TorchEngine(model, optimizer, scheduler, ds_cfg["gradient_accumulation_steps"],
                             ds_cfg.get("gradient_clipping", cur.train.max_grad_norm), device, precision)
    else:
        import deepspeed

        optimizer = optimizer_for(model, cur.train.weight_decay, "cpu")
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(cur.stages, s))
        universal = universal_tag(ckpt, world, rank) if found == "deepspeed" else None
        if universal:  # written by another number of processes: loaded through DeepSpeed's universal format
            ds_cfg["checkpoint"] = {**ds_cfg.get("checkpoint", {}), "load_universal": True}
        engine, _, _, scheduler = deepspeed.initialize(model=model, optimizer=optimizer, lr_scheduler=scheduler, config=ds_cfg)
        if zero_stage == 3:  # the row loss reads the tied output projection directly: ZeRO-3 gathers it for the whole forward
            deepspeed.zero.register_external_parameter(engine.module, engine.module.lm_head.weight)
    global_step = 0
    if found is not None and found != kind:
        raise ConfigError(f"{ckpt} holds checkpoints of the {found} engine and this run uses {kind}: resume with "
                          f"train.engine: {found}, or start a new output_dir")
    if found is not None:
        _, client = engine.load_checkpoint(ckpt, tag=universal) if universal else engine.load_checkpoint(ckpt)
        global_step = int(client["global_step"])
        if rank == 0:
            print(f"resuming from {ckpt} at step {global_step}", flush=True)
    writer = None
    if rank == 0:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(os.path.join(out, "tensorboard"))
    log_path = os.path.join(out, "train_log.jsonl")
    budget = Budget(minutes, cur.stages, out, started=entered) if minutes and rank == 0 else None
    final = os.path.join(out, "final")
    saved_at = global_step if global_step else -1  # the step of the newest checkpoint (one save per step)
    profiler = StepProfiler.from_env(out, rank)  # CODEEXECUTOR_PROFILE=FIRST:LAST (training/profiling.py)
    start_of = 0
    for si, stage in enumerate(cur.stages):
        if minutes:  # rank 0 holds a budgeted run's plan (resumed: the steps it fixed); every rank takes them
            stage.steps = _agreed(stage.steps)
        end_of = start_of + stage.steps
        if global_step >= end_of:
            start_of = end_of
            continue
        if max_steps is not None and global_step >= max_steps:
            break
        data = stage_data(cur, si, stage, engine, encoder, base_dir, out, rank, world, spec, precision)
        evaluator = evaluator_for(cur, stage, encoder, base_dir, rank, zero_stage)
        bar = None
        if rank == 0:
            from codeexecutor.progress import bar as progress_bar

            bar = progress_bar(total=stage.steps, initial=global_step - start_of, desc=f"stage {si + 1} {stage.name}", unit="step")
        engine.train()
        t0, tokens, computed, examples = time.perf_counter(), 0, 0, 0
        accum = ds_cfg["gradient_accumulation_steps"]
        size = ds_cfg["train_micro_batch_size_per_gpu"]
        unfixed = bool(minutes) and not _agreed_fixed(budget, stage)
        stop = lambda: min(end_of, max_steps) if max_steps is not None else end_of  # noqa: E731
        batches = Prefetcher(data, cur.train.seed, start_of, global_step, stop(), accum, rank, size, engine.device)
        clock, recent = StepClock(), RecentSpeed()  # the warm-up's speed; a fixed stage's recent speed
        loss_sum, loss_count = torch.zeros((), device=engine.device), 0  # on the device until a log step reads it
        while global_step < stop():
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
            steps = stage.steps
            if unfixed:
                clock.tick()
                if global_step - start_of == min(WARMUP, stage.steps - 1):  # the warm-up ran: the stage's total is fixed
                    steps = _agreed(budget.fix(si, clock.seconds_per_step(), global_step - start_of) if budget else 0)
                    unfixed, recent = False, RecentSpeed(global_step)
            elif minutes and global_step % cur.train.log_every == 0:  # fitted again to the moment its fix planned
                sps = recent.tick(global_step)  # None at a resumed stage's first log step: its start-up is no speed
                if sps is not None:
                    steps = _agreed(budget.refit(si, sps, global_step - start_of) if budget else 0)
            if steps != stage.steps or end_of != start_of + steps:
                stage.steps, end_of = steps, start_of + steps
                batches.close()
                batches = Prefetcher(data, cur.train.seed, start_of, global_step, stop(), accum, rank, size, engine.device)
                if bar is not None:
                    from codeexecutor.progress import set_total

                    set_total(bar, stage.steps)
            if rank == 0:
                bar.update(1)
            if global_step % cur.train.log_every == 0 or global_step == end_of or global_step == max_steps:
                loss_value = loss_sum.item() / loss_count  # one host sync per log step, not per micro-step
                loss_sum.zero_()
                loss_count = 0
                if not math.isfinite(loss_value):
                    raise RuntimeError(f"loss is {loss_value} at step {global_step}; lower the learning rate")
                if rank == 0:
                    bar.set_postfix(loss=f"{loss_value:.3f}")
                    elapsed = max(time.perf_counter() - t0, 1e-9)
                    log_row(writer, log_path, {"step": global_step, "stage": stage.name, "loss": loss_value,
                                               "lr": scheduler.get_last_lr()[0], "tokens_per_s": tokens * world / elapsed,
                                               "stage_tokens": tokens * world, "stage_examples": examples * world,
                                               "stage_seconds": elapsed,
                                               "padding_share": 1 - tokens / max(computed, 1), **loss_scaling(engine)})
                    if budget is not None:
                        budget.save()
            at_end = global_step == end_of
            if evaluator is not None and (at_end or (cur.train.eval_every and global_step % cur.train.eval_every == 0)):
                evaluate(evaluator, engine, tok, cur, si, stage, global_step, writer, log_path, out, rank, zero_stage)
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
    total = sum(s.steps for s in cur.stages)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="codeexecutor.training", description="Curriculum pretraining under DeepSpeed.")
    ap.add_argument("--curriculum", required=True, help="curriculum YAML (see curricula/*.yaml)")
    ap.add_argument("--ds-config", default=AUTO, help="DeepSpeed JSON config (ds_configs/; default auto: chosen by the "
                    "device, training/precision.py)")
    ap.add_argument("--base-dir", default=".", help="folder the curriculum's dataset paths are relative to")
    ap.add_argument("--output-dir", help="override train.output_dir")
    ap.add_argument("--max-steps", type=int, help="stop after this global step (the rest resumes later)")
    ap.add_argument("--minutes", type=float, help="fit the stages' steps into this many minutes (training/budget.py)")
    ap.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)  # set by the deepspeed launcher
    args = ap.parse_args(argv)
    from codeexecutor.progress import quiet_libraries

    quiet_libraries()
    try:
        train(args.curriculum, args.ds_config, args.base_dir, args.output_dir, args.max_steps, args.minutes)
    except ConfigError as exc:
        print(f"codeexecutor.training: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
