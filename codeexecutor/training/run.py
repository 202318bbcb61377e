"""What a training process sets up once before its first step (`set_up`): the curriculum,
the device's choices (DeepSpeed config, precision, attention, the compiled row step and its
fallbacks), the tokenizer and model, the engine, and the checkpoint it resumes from. The
loop (`loop.py`) then runs the stages over the `Run` this returns (`stage_loop.py`)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field

from codeexecutor.errors import ConfigError
from codeexecutor.training.config import Curriculum, Stage, load_ds_config, node_count
from codeexecutor.training.distributed import device_of_rank, has_deepspeed, setup_distributed
from codeexecutor.training.engine import TorchEngine, checkpoint_engine, choose, optimizer_for
from codeexecutor.training.order import TrainOrder
from codeexecutor.training.precision import apply as apply_precision
from codeexecutor.training.precision import capability, check_kernels, decide, ds_half, resolve_ds_config
from codeexecutor.training.resume import universal_tag
from codeexecutor.training.setup import build_model, build_tokenizer, check_action_sources, resolve_profile
from codeexecutor.training.step import prepare_rows, row_spec

log = logging.getLogger("codeexecutor.train")


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


@dataclass
class Run:
    """A training process's set-up: what every stage reads."""

    cur: Curriculum
    base_dir: str
    out: str
    rank: int
    world: int
    device: object
    ds_cfg: dict
    zero_stage: int
    tok: object
    encoder: object
    model: object
    kind: str  # "torch" or "deepspeed"
    precision: str | None  # the autocast the forward runs under ("bf16") or None
    spec: object  # the row layout (modeling/rows.RowSpec), None for padded batches
    ckpt: str
    setup: dict = field(default_factory=dict)  # what curriculum.json records of the choices
    engine: object = None
    scheduler: object = None
    global_step: int = 0


def set_up(order: TrainOrder) -> Run:
    """The run of `order` up to its first step: its choices made and written to
    curriculum.json, its engine built, its checkpoint (if any) loaded."""
    import torch

    cur, base_dir = order.curriculum, order.base_dir
    rank, world = setup_distributed()
    out = cur.train.output_dir
    os.makedirs(out, exist_ok=True)
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING, format="%(asctime)s %(name)s: %(message)s"
    )
    device = device_of_rank()
    cap = capability(device)
    if cap is not None:
        check_kernels(cap, torch.cuda.get_arch_list(), torch.__version__)
    ds_config_path, config_note = resolve_ds_config(order.ds_config, cap)
    ds_cfg = load_ds_config(ds_config_path, cur.train, world, node_count(world))
    ckpt = os.path.join(out, "checkpoints")
    # Every refusal (the engine, the precision the device cannot do) before anything is built or written.
    kind, found, engine_note = _choose_engine(cur, world, ds_cfg, ckpt, ds_config_path)
    decided = decide(cap, kind, ds_cfg, cur.train.autocast, cur.model.attention)
    torch.manual_seed(cur.train.seed)
    profile = resolve_profile(cur)
    check_action_sources(cur, profile, base_dir)
    tok = build_tokenizer(cur, base_dir, out, rank, profile)
    from codeexecutor.modeling.tokenizer import Encoder

    encoder = Encoder(tok, cur.model.max_code_length, cur.model.max_trace_length, profile)
    zero_stage = ds_cfg.get("zero_optimization", {}).get("stage", 0)
    model = build_model(cur, tok, profile, base_dir)
    run = Run(cur, base_dir, out, rank, world, device, ds_cfg, zero_stage, tok, encoder, model, kind, None, None, ckpt)
    if engine_note:
        run.setup["engine_chosen_by"] = engine_note
    _choose_device_paths(run, decided, ds_config_path, config_note)
    if rank == 0:
        _write_setup(run)
    _build_engine(run, found)
    return run


def _choose_engine(cur, world: int, ds_cfg: dict, ckpt: str, ds_config_path: str) -> tuple[str, str | None, str | None]:
    """(the engine: `train.engine`, auto resolved, a run resuming on the engine that wrote
    its checkpoints; the engine of those checkpoints or None; the log's words where the
    checkpoints chose it)."""
    kind = choose(cur.train.engine, world, ds_cfg)
    found = checkpoint_engine(ckpt)
    note = None
    if found == "deepspeed" and kind != found and cur.train.engine == "auto":
        kind, note = found, f"the checkpoints in {ckpt} are DeepSpeed's: this run resumes on its engine"
    if kind == "deepspeed" and not has_deepspeed():
        fix = (
            "install it (pip install deepspeed): the checkpoints there are DeepSpeed's"
            if found == "deepspeed"
            else "pip install deepspeed, or train one process with train.engine: torch"
        )
        raise ConfigError(
            f"this run needs the DeepSpeed engine (train.engine {cur.train.engine}, {world} process(es), "
            f"{os.path.basename(ds_config_path)}) and DeepSpeed is not installed: {fix}"
        )
    if found == "torch" and kind != found:
        raise ConfigError(
            f"{ckpt} holds checkpoints of the one-process torch engine and this run has {world} processes "
            "(or train.engine deepspeed): resume it with one process, or start a new output_dir (a run to be carried "
            "over to several processes trains with train.engine: deepspeed from its start)"
        )
    if found is not None and found != kind:
        raise ConfigError(
            f"{ckpt} holds checkpoints of the {found} engine and this run uses {kind}: resume with "
            f"train.engine: {found}, or start a new output_dir"
        )
    return kind, found, note


def _choose_device_paths(run: Run, decided, ds_config_path: str, config_note: str | None) -> None:
    """Precision, TF32, attention and the compiled row step, as the device decided them."""
    import torch

    cur = run.cur
    apply_precision(decided.precision)
    run.precision = decided.precision.autocast
    run.setup.update(
        engine=run.kind,
        device=str(run.device),
        precision=decided.precision.label,
        precision_chosen_by=decided.precision.chosen_by,
        world_size=run.world,
        ds_config=os.path.basename(ds_config_path),
        ds_config_chosen_by="device" if config_note else "config",
    )
    if config_note and run.rank == 0:
        log.info("%s", config_note)
    if not cur.train.max_tokens:
        run.setup.update(
            compiled=False,
            fallbacks=[
                "train.max_tokens is not set: batches of micro_batch_size examples are "
                "padded apart and run through the eager Hugging Face forward"
            ],
        )
        return
    fallback = decided.fallback
    run.setup.update(row_tokens=cur.train.max_tokens, fallbacks=[fallback] if fallback else [])
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(ds_half(run.ds_cfg)) if run.kind == "deepspeed" else None
    attention, rows = prepare_rows(
        run.model, cur, decided.attention, run.device, run.precision, run.kind, run.zero_stage, half
    )
    run.setup["fallbacks"] += rows.pop("fallbacks")
    run.setup.update(rows, attention=attention)
    run.spec = row_spec(cur, attention, run.setup["compiled"])


def _write_setup(run: Run) -> None:
    """curriculum.json (the run's settings and choices) and the log's lines naming them."""
    cur = run.cur
    with open(os.path.join(run.out, "curriculum.json"), "w") as f:
        json.dump(
            {
                "model": asdict(cur.model),
                "train": asdict(cur.train),
                "stages": [asdict(s) for s in cur.stages],
                "ds_config": run.ds_cfg,
                "world_size": run.world,
                "setup": run.setup,
            },
            f,
            indent=2,
        )
    for note in run.setup["fallbacks"]:
        log.warning("%s", note)
    compiled = " (compiled)" if run.setup.get("compiled") else ""
    log.info(
        "precision: %s; attention: %s%s", run.setup["precision"], run.setup.get("attention", "padded batches"), compiled
    )
    log.info("setup: %s", {k: v for k, v in run.setup.items() if k != "fallbacks"})


def _build_engine(run: Run, found: str | None) -> None:
    """The engine and its learning-rate schedule; the newest checkpoint loaded where there is one."""
    import torch

    cur, ds_cfg = run.cur, run.ds_cfg
    universal = None
    if run.kind == "torch":
        run.model.to(run.device)
        optimizer = optimizer_for(run.model, cur.train.weight_decay, run.device)
        run.scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(cur.stages, s))
        clip = ds_cfg.get("gradient_clipping", cur.train.max_grad_norm)
        run.engine = TorchEngine(
            run.model, optimizer, run.scheduler, ds_cfg["gradient_accumulation_steps"], clip, run.device, run.precision
        )
    else:
        import deepspeed

        optimizer = optimizer_for(run.model, cur.train.weight_decay, "cpu")
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(cur.stages, s))
        universal = universal_tag(run.ckpt, run.world, run.rank) if found == "deepspeed" else None
        if universal:  # written by another number of processes: loaded through DeepSpeed's universal format
            ds_cfg["checkpoint"] = {**ds_cfg.get("checkpoint", {}), "load_universal": True}
        run.engine, _, _, run.scheduler = deepspeed.initialize(
            model=run.model, optimizer=optimizer, lr_scheduler=scheduler, config=ds_cfg
        )
        if run.zero_stage == 3:  # the row loss reads the tied output projection: gathered for the whole forward
            deepspeed.zero.register_external_parameter(run.engine.module, run.engine.module.lm_head.weight)
    if found is not None:
        tag = {"tag": universal} if universal else {}  # the torch engine's takes the folder alone
        _, client = run.engine.load_checkpoint(run.ckpt, **tag)
        run.global_step = int(client["global_step"])
        if run.rank == 0:
            print(f"resuming from {run.ckpt} at step {run.global_step}", flush=True)
