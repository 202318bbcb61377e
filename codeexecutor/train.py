"""Curriculum pretraining under DeepSpeed: one training loop, stages as data + hyperparameters.

    deepspeed --module codeexecutor.train --curriculum curricula/demo.yaml --ds-config ds_configs/cpu.json
    python -m codeexecutor.train ...            # one process, no launcher (CPU demo)

The curriculum file (YAML) has three groups (see `Curriculum`): `model`, `train`, and a
list of `stages`, each with its data sources (dataset folder, task, mixing weight, and
optionally `hardest: K`: the K examples of that source with the highest loss under the
model as the previous stage left it, scored in parallel across ranks), its number of
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
import random
import shutil
import socket
import sys
import time
from dataclasses import asdict, dataclass, field, fields

from codeexecutor.errors import ConfigError

log = logging.getLogger("codeexecutor.train")


# -- configuration ---------------------------------------------------------------------------

@dataclass
class ModelArgs:
    """The model and its tokenizer."""

    preset: str = "tiny"  # base | tiny
    init: str | None = None  # folder or hub id to start from: microsoft/codeexecutor, microsoft/unixcoder-base, a run's export
    tokenizer: str | None = None  # a saved tokenizer; default: init's, else trained on the data
    format_profile: str | None = None  # official | exact; default: init's (the release: official), else exact
    exception_step: bool = True  # crashing traces end with <exception> (added to the released vocabulary if needed)
    vocab_size: int = 8000  # for a trained tokenizer
    max_code_length: int = 256
    max_trace_length: int = 768
    structural_weight: float = 1.0
    other_weight: float = 10.0


@dataclass
class TrainArgs:
    """Optimisation and bookkeeping shared by all stages."""

    output_dir: str = "runs/pretrain"
    micro_batch_size: int = 8
    grad_accum: int = 1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    seed: int = 0
    save_every: int = 500
    keep_checkpoints: int = 2  # older DeepSpeed checkpoints are deleted (0 keeps all)
    log_every: int = 10
    mining_batch_size: int = 32


@dataclass
class Source:
    """One dataset of a stage: a saved DatasetDict (its `train` split is used)."""

    path: str
    task: str
    weight: float = 1.0
    hardest: int | None = None  # keep only the K hardest examples by the previous stage's loss


@dataclass
class Stage:
    name: str
    sources: list[Source]
    steps: int
    lr: float = 4e-4
    warmup: int = 10_000


@dataclass
class Curriculum:
    model: ModelArgs
    train: TrainArgs
    stages: list[Stage] = field(default_factory=list)

    @classmethod
    def load(cls, path: str, base_dir: str | None = None) -> "Curriculum":
        import yaml

        try:
            with open(path) as f:
                raw = yaml.safe_load(f) or {}
        except FileNotFoundError as exc:
            raise ConfigError(f"curriculum file not found: {path} (see curricula/*.yaml)") from exc
        except IsADirectoryError as exc:
            raise ConfigError(f"{path} is a directory; give a curriculum YAML file (see curricula/*.yaml)") from exc
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"{path} is not valid YAML ({first}); see curricula/*.yaml for the format") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"{path} is not a curriculum: expected a mapping with model, train and stages (see curricula/*.yaml)")
        return cls.from_dict(raw, path, base_dir)

    @classmethod
    def from_dict(cls, raw: dict, origin: str = "<dict>", base_dir: str | None = None) -> "Curriculum":
        problems: list[str] = []

        def build(kind, data, where):
            if not isinstance(data, dict):
                problems.append(f"{where}: expected a mapping, got {type(data).__name__}")
                return None
            names = {f.name for f in fields(kind)}
            unknown = sorted(set(data) - names)
            if unknown:
                problems.append(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(names))})")
            try:
                return kind(**{k: v for k, v in data.items() if k in names})
            except TypeError as exc:
                problems.append(f"{where}: {exc}")
                return None

        model = build(ModelArgs, raw.get("model", {}), "model")
        train = build(TrainArgs, raw.get("train", {}), "train")
        stages = []
        for i, s in enumerate(raw.get("stages") or []):
            where = f"stages[{i}]"
            if not isinstance(s, dict):
                problems.append(f"{where}: expected a mapping")
                continue
            sources = [build(Source, d, f"{where}.sources[{j}]") for j, d in enumerate(s.get("sources") or [])]
            stage = build(Stage, {**s, "sources": [x for x in sources if x is not None]}, where)
            if stage is not None:
                stages.append(stage)
        cur = cls(model or ModelArgs(), train or TrainArgs(), stages)
        problems += cur.validate(base_dir)
        if problems:
            raise ConfigError(f"{origin} has {len(problems)} problem(s):\n  - " + "\n  - ".join(problems))
        return cur

    def validate(self, base_dir: str | None = None) -> list[str]:
        from codeexecutor.modeling.format import TASK_TOKENS

        p = []
        if self.model.preset not in ("base", "tiny"):
            p.append(f"model.preset must be base or tiny, got {self.model.preset!r}")
        if self.model.format_profile not in (None, "official", "exact"):
            p.append(f"model.format_profile must be official or exact, got {self.model.format_profile!r}")
        if not 8 <= self.model.max_code_length <= 1024 or not 8 <= self.model.max_trace_length <= 1024:
            p.append("model.max_code_length and max_trace_length must be in [8, 1024]")
        if self.model.max_code_length + self.model.max_trace_length > 1024:
            p.append("model.max_code_length + max_trace_length must be <= 1024 (position embeddings)")
        if self.train.micro_batch_size < 1 or self.train.grad_accum < 1:
            p.append("train.micro_batch_size and train.grad_accum must be >= 1")
        if not self.stages:
            p.append("stages: at least one stage is needed")
        for i, st in enumerate(self.stages):
            if st.steps < 1:
                p.append(f"stages[{i}] ({st.name}): steps must be >= 1")
            if not st.lr > 0 or st.warmup < 0:
                p.append(f"stages[{i}] ({st.name}): lr must be > 0 and warmup >= 0")
            if not st.sources:
                p.append(f"stages[{i}] ({st.name}): no sources")
            for j, src in enumerate(st.sources):
                if src.task not in TASK_TOKENS:
                    p.append(f"stages[{i}].sources[{j}]: task must be one of {', '.join(TASK_TOKENS)}, got {src.task!r}")
                if not src.weight > 0:
                    p.append(f"stages[{i}].sources[{j}]: weight must be > 0")
                if src.hardest is not None and (i == 0 or src.hardest < 1):
                    p.append(f"stages[{i}].sources[{j}]: hardest needs a previous stage and K >= 1")
                if base_dir is not None and not os.path.isdir(os.path.join(base_dir, src.path)):
                    p.append(f"stages[{i}].sources[{j}]: dataset folder {src.path} not found "
                             "(build it first: codeexecutor build ...)")
        return p


def load_ds_config(path: str, train: TrainArgs, world_size: int) -> dict:
    """Read a DeepSpeed JSON config and fill in the batch sizes from the curriculum.

    Checks DeepSpeed's identity train_batch_size = micro x accumulation x world size."""
    try:
        with open(path) as f:
            cfg = json.load(f)
    except FileNotFoundError as exc:
        raise ConfigError(f"DeepSpeed config not found: {path} (see ds_configs/)") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from exc
    micro = cfg.get("train_micro_batch_size_per_gpu", train.micro_batch_size)
    accum = cfg.get("gradient_accumulation_steps", train.grad_accum)
    if micro in (None, "auto"):
        micro = train.micro_batch_size
    if accum in (None, "auto"):
        accum = train.grad_accum
    total = micro * accum * world_size
    given = cfg.get("train_batch_size", "auto")
    if given not in (None, "auto") and given != total:
        raise ConfigError(f"{path}: train_batch_size {given} != micro {micro} x accumulation {accum} x world {world_size} "
                          f"= {total}; set it to {total} or to \"auto\"")
    if "optimizer" in cfg:
        raise ConfigError(f"{path}: remove the \"optimizer\" block; the training loop passes a torch AdamW "
                          "(a DeepSpeed optimizer block JIT-compiles fused_adam)")
    cfg.update(train_micro_batch_size_per_gpu=micro, gradient_accumulation_steps=accum, train_batch_size=total)
    cfg.setdefault("gradient_clipping", train.max_grad_norm)
    return cfg


# -- data ---------------------------------------------------------------------------------------

class StageData:
    """Tokenized sources of one stage and deterministic, resumable batch sampling: the
    batch of (stage, step, micro, rank) depends on nothing else."""

    def __init__(self, stage: Stage, encoder, base_dir: str, subsets: dict[int, list[int]] | None = None) -> None:
        import datasets

        self.stage = stage
        self.encoder = encoder
        self.tables = []
        for j, src in enumerate(stage.sources):
            ds = datasets.load_from_disk(os.path.join(base_dir, src.path))
            ds = ds["train"] if isinstance(ds, datasets.DatasetDict) else ds
            if subsets and j in subsets:
                ds = ds.select(subsets[j])
            if len(ds) == 0:
                raise ConfigError(f"stage {stage.name}: source {src.path} has no training examples")
            self.tables.append(tokenize(ds, encoder))
        total = sum(s.weight for s in stage.sources)
        self.weights = [s.weight / total for s in stage.sources]

    def batch(self, seed: int, step: int, micro: int, rank: int, size: int) -> dict:
        rng = random.Random(f"{seed}:{self.stage.name}:{step}:{micro}:{rank}")
        j = rng.choices(range(len(self.tables)), weights=self.weights)[0]  # one source per batch
        table = self.tables[j]
        rows = table[[rng.randrange(len(table)) for _ in range(size)]]
        return self.encoder.collate([{"code_ids": c, "trace_ids": t} for c, t in zip(rows["code_ids"], rows["trace_ids"])])


def tokenize(ds, encoder):
    """Ids of a dataset in the encoder's format profile, serialized from the structured
    columns (cached by `datasets` per profile and tokenizer)."""
    return ds.map(encoder.encode_rows, batched=True, remove_columns=ds.column_names, desc="tokenizing",
                  load_from_cache_file=True)


# -- the loop -----------------------------------------------------------------------------------

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
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    # DeepSpeed JIT-compiles its CPU shared-memory comm op (~35 s) into this folder: keep it
    # inside the virtualenv so it is built once per environment, not once per machine user.
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(sys.prefix, "torch_extensions"))
    import deepspeed

    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size()


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


def resolve_profile(cur: Curriculum):
    """The run's format profile: the curriculum's; else its init's (the released
    checkpoint is `official`); else `exact`."""
    from codeexecutor.modeling.profiles import Profile

    name = cur.model.format_profile
    if name is None and cur.model.init:
        from codeexecutor.modeling.loading import folder_profile, read_config, resolve

        path = resolve(cur.model.init)
        name = folder_profile(path, read_config(path))
    return Profile(name or "exact", cur.model.exception_step)


def build_tokenizer(cur: Curriculum, base_dir: str, out: str, rank: int, profile):
    import torch.distributed as dist

    from codeexecutor.modeling.tokenizer import load_tokenizer, train_tokenizer

    path = os.path.join(out, "tokenizer")
    if not os.path.isdir(path):
        if rank == 0:
            if cur.model.tokenizer or cur.model.init:
                from codeexecutor.modeling.loading import resolve

                tok = load_tokenizer(resolve(cur.model.tokenizer or cur.model.init), exception=profile.exception_step)
            else:
                import datasets

                texts = []
                for st in cur.stages:
                    for src in st.sources:
                        ds = datasets.load_from_disk(os.path.join(base_dir, src.path))
                        ds = ds["train"] if isinstance(ds, datasets.DatasetDict) else ds
                        for row in ds:
                            texts += profile.example(row)
                tok = train_tokenizer(texts, vocab_size=cur.model.vocab_size)
            tmp = path + ".tmp"
            tok.save_pretrained(tmp)
            os.replace(tmp, path)
        dist.barrier()
    return load_tokenizer(path, exception=profile.exception_step)


def build_model(cur: Curriculum, tok, profile):
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.tokenizer import structural_ids

    settings = dict(max_code_length=cur.model.max_code_length, max_trace_length=cur.model.max_trace_length,
                    structural_weight=cur.model.structural_weight, other_weight=cur.model.other_weight,
                    structural_token_ids=structural_ids(tok), mask0_token_id=tok.convert_tokens_to_ids("<mask0>"),
                    **profile.to_config())
    if cur.model.init:  # any supported layout; embeddings resized to the tokenizer (<exception>, format tokens)
        from codeexecutor.modeling.loading import load_model

        return load_model(cur.model.init, vocab_size=len(tok), overrides=settings)
    cfg = CodeExecutorConfig.preset(cur.model.preset, vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                    bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, **settings)
    cfg._attn_implementation = "sdpa"
    return CodeExecutorModel(cfg)


def mine_hardest(engine, data: StageData, source: int, k: int, batch_size: int, rank: int, world: int) -> list[int]:
    """Indices of the k highest-loss examples of one source; each rank scores a slice."""
    import torch
    import torch.distributed as dist

    table = data.tables[source]
    mine = list(range(rank, len(table), world))
    scores: list[tuple[float, int]] = []
    engine.eval()
    with torch.no_grad():
        for i in range(0, len(mine), batch_size):
            idx = mine[i : i + batch_size]
            rows = table[idx]
            batch = data.encoder.collate([{"code_ids": c, "trace_ids": t} for c, t in zip(rows["code_ids"], rows["trace_ids"])])
            batch = {n: v.to(engine.device) for n, v in batch.items()}
            losses = engine(**batch, reduction="none").loss.float().cpu().tolist()
            scores += zip(losses, idx)
    engine.train()
    gathered: list = [None] * world
    dist.all_gather_object(gathered, scores)
    everything = sorted((s for part in gathered for s in part), key=lambda x: (-x[0], x[1]))
    return sorted(i for _, i in everything[:k])


def export_model(engine, tok, path: str, rank: int, zero_stage: int) -> None:
    """Save a Hugging Face model (save_pretrained) of the current weights."""
    import deepspeed
    import torch.distributed as dist

    module = engine.module
    if zero_stage == 3:
        with deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None):
            if rank == 0:
                _save(module, tok, path)
    elif rank == 0:
        _save(module, tok, path)
    dist.barrier()


def _save(module, tok, path: str) -> None:
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    module.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)


def save_checkpoint(engine, ckpt: str, step: int, keep: int, rank: int) -> None:
    """Save a resumable checkpoint, then delete all but the newest `keep` ones."""
    import torch.distributed as dist

    engine.save_checkpoint(ckpt, tag=f"step{step}", client_state={"global_step": step})
    if keep and rank == 0:
        tags = sorted((d for d in os.listdir(ckpt) if d.startswith("step") and d[4:].isdigit()), key=lambda d: int(d[4:]))
        for old in tags[:-keep]:
            shutil.rmtree(os.path.join(ckpt, old), ignore_errors=True)
    dist.barrier()


def plot_losses(log_path: str, png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in open(log_path)] if os.path.exists(log_path) else []
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    for name in dict.fromkeys(r["stage"] for r in rows):
        pts = [(r["step"], r["loss"]) for r in rows if r["stage"] == name]
        ax.plot(*zip(*pts), label=name)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("weighted token loss")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("curriculum pretraining")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


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
    if rank == 0:
        with open(os.path.join(out, "curriculum.json"), "w") as f:
            json.dump({"model": asdict(cur.model), "train": asdict(cur.train), "stages": [asdict(s) for s in cur.stages],
                       "ds_config": ds_cfg, "world_size": world}, f, indent=2)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embeddings" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embeddings" not in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": cur.train.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=1.0, betas=(0.9, 0.98), eps=1e-6)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(cur.stages, s))
    engine, _, _, scheduler = deepspeed.initialize(model=model, optimizer=optimizer, lr_scheduler=scheduler, config=ds_cfg)
    ckpt = os.path.join(out, "checkpoints")
    global_step = 0
    if os.path.exists(os.path.join(ckpt, "latest")):
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
    for si, stage in enumerate(cur.stages):
        end_of = start_of + stage.steps
        if global_step >= end_of:
            start_of = end_of
            continue
        if global_step >= limit:
            break
        subsets = {}
        for j, src in enumerate(stage.sources):
            if src.hardest:
                mined = os.path.join(out, f"stage{si + 1}-{stage.name}-hardest-{j}.json")
                if not os.path.exists(mined):
                    full = StageData(Stage(stage.name, [Source(src.path, src.task)], 1), encoder, base_dir)
                    idx = mine_hardest(engine, full, 0, src.hardest, cur.train.mining_batch_size, rank, world)
                    if rank == 0:
                        with open(mined + ".tmp", "w") as f:
                            json.dump(idx, f)
                        os.replace(mined + ".tmp", mined)
                    torch.distributed.barrier()
                subsets[j] = json.load(open(mined))
                log.info("stage %s: %d hardest examples of %s", stage.name, len(subsets[j]), src.path)
        data = StageData(stage, encoder, base_dir, subsets)
        bar = None
        if rank == 0:
            from codeexecutor.progress import bar as progress_bar

            bar = progress_bar(total=stage.steps, initial=global_step - start_of, desc=f"stage {si + 1} {stage.name}", unit="step")
        engine.train()
        t0, tokens = time.perf_counter(), 0
        while global_step < min(end_of, limit):
            losses = []
            for micro in range(ds_cfg["gradient_accumulation_steps"]):
                batch = data.batch(cur.train.seed, global_step - start_of, micro, rank, ds_cfg["train_micro_batch_size_per_gpu"])
                tokens += int(batch["code_mask"].sum() + batch["trace_mask"].sum())
                batch = {k: v.to(engine.device) for k, v in batch.items()}
                loss = engine(**batch).loss
                engine.backward(loss)
                engine.step()
                losses.append(loss.item())
            global_step += 1
            loss_value = sum(losses) / len(losses)
            if not math.isfinite(loss_value):
                raise RuntimeError(f"loss is {loss_value} at step {global_step}; lower the learning rate")
            if rank == 0:
                bar.update(1)
                bar.set_postfix(loss=f"{loss_value:.3f}")
                if global_step % cur.train.log_every == 0 or global_step == end_of:
                    lr = scheduler.get_last_lr()[0]
                    tps = tokens * world / max(time.perf_counter() - t0, 1e-9)
                    writer.add_scalar("loss", loss_value, global_step)
                    writer.add_scalar("lr", lr, global_step)
                    writer.add_scalar("tokens_per_s", tps, global_step)
                    with open(log_path, "a") as f:
                        f.write(json.dumps({"step": global_step, "stage": stage.name, "loss": loss_value, "lr": lr,
                                            "tokens_per_s": tps}) + "\n")
            if global_step % cur.train.save_every == 0 or global_step == end_of:
                save_checkpoint(engine, ckpt, global_step, cur.train.keep_checkpoints, rank)
        if bar is not None:
            bar.close()
        if global_step >= end_of:
            export_model(engine, tok, os.path.join(out, f"stage{si + 1}-{stage.name}"), rank, zero_stage)
            if rank == 0:
                plot_losses(log_path, os.path.join(out, "loss.png"))
        start_of = end_of
    if global_step < total and global_step % cur.train.save_every:  # stopped early (--max-steps): resumable
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
    ap = argparse.ArgumentParser(prog="codeexecutor.train", description="Curriculum pretraining under DeepSpeed.")
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
        print(f"codeexecutor.train: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
