"""The optimizer engine around the model: plain torch on one process, DeepSpeed on several.

`TorchEngine` is the one-process engine and the faster one on one GPU: AdamW with its
fused kernel, `clip_grad_norm_` over foreach kernels, the learning-rate schedule, and
nothing that reads a value back to the host (no overflow check, no `synchronize`, no
gradient-norm test: a run's loss is checked for finiteness at its log steps). It
answers the calls the loop makes of a DeepSpeed engine (`engine(**batch)`,
`backward`, `step`, `save_checkpoint`, `load_checkpoint`, `module`, `device`), so one
loop drives either. Gradient accumulation divides each micro-step's loss by the count
and steps the optimizer on the last one, as DeepSpeed does.

`train.engine` chooses: `auto` is torch for one process (ZeRO partitions nothing there)
unless the DeepSpeed config asks for fp16, whose loss scaling DeepSpeed does; DeepSpeed
for several. A DeepSpeed config's `bf16` section becomes bfloat16 autocast over float32
weights and AdamW in the torch engine; its ZeRO stage is ignored (one process).
"""

from __future__ import annotations

import json
import os
from typing import Literal, get_args

from codeexecutor.atomic import replacing, write_text
from codeexecutor.errors import ConfigError

Engine = Literal["auto", "torch", "deepspeed"]  # train.engine
ENGINES = get_args(Engine)
MARKER = "engine.json"  # in a checkpoint folder: which engine wrote it


def choose(kind: str, world: int, ds_cfg: dict) -> str:
    """The engine a run uses: `train.engine`, with `auto` resolved. The torch engine
    steps one process: several without DeepSpeed would train apart, each its own copy."""
    if kind == "torch" and world > 1:
        raise ConfigError(
            f"train.engine torch trains one process and this run has {world}: several processes "
            "share their gradients through DeepSpeed (train.engine deepspeed, or auto)"
        )
    if kind != "auto":
        return kind
    fp16 = ds_cfg.get("fp16", {}).get("enabled", False)
    return "torch" if world == 1 and not fp16 else "deepspeed"


class TorchEngine:
    def __init__(self, model, optimizer, scheduler, accum: int, max_norm: float, device, precision: str | None) -> None:
        self.module, self.optimizer, self.lr_scheduler = model, optimizer, scheduler
        self.accum, self.max_norm, self.device, self.precision = accum, max_norm, device, precision
        self.micro = 0
        self.params = [p for p in model.parameters() if p.requires_grad]

    def __call__(self, **kwargs):
        return self.module(**kwargs)

    def train(self) -> None:
        self.module.train()

    def eval(self) -> None:
        self.module.eval()

    def fp16_enabled(self) -> bool:
        return False

    def backward(self, loss) -> None:
        (loss / self.accum if self.accum > 1 else loss).backward()

    def step(self) -> None:
        """After each micro-step; the optimizer steps on the last of each accumulation."""
        import torch

        self.micro += 1
        if self.micro % self.accum:
            return
        if self.max_norm:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_norm, foreach=True)  # the norm stays on the device
        self.optimizer.step()
        self.lr_scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def save_checkpoint(self, folder: str, tag: str, client_state: dict) -> None:
        """folder/tag/state.pt (weights, optimizer, schedule, client state), then
        folder/latest naming the tag: each written to a temporary name and renamed."""
        import torch

        path = os.path.join(folder, tag)
        os.makedirs(path, exist_ok=True)
        state = {
            "module": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.lr_scheduler.state_dict(),
            "client": client_state,
        }
        with replacing(os.path.join(path, "state.pt")) as tmp:
            torch.save(state, tmp)
        write_text(os.path.join(folder, MARKER), json.dumps({"engine": "torch"}))
        write_text(os.path.join(folder, "latest"), tag)

    def load_checkpoint(self, folder: str):
        """(path, client state) of the newest checkpoint, loaded into the engine."""
        import torch

        with open(os.path.join(folder, "latest")) as f:
            path = os.path.join(folder, f.read().strip())
        state = torch.load(os.path.join(path, "state.pt"), map_location=self.device, weights_only=False)
        self.module.load_state_dict(state["module"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.lr_scheduler.load_state_dict(state["scheduler"])
        return path, state["client"]


def checkpoint_engine(folder: str) -> str | None:
    """Which engine wrote the checkpoints in `folder` (None: none there)."""
    if not os.path.exists(os.path.join(folder, "latest")):
        return None
    marker = os.path.join(folder, MARKER)
    if os.path.exists(marker):
        with open(marker) as f:
            return json.load(f)["engine"]
    return "deepspeed"  # DeepSpeed writes no marker of ours


def optimizer_for(model, weight_decay: float, device):
    """AdamW over the model (no decay on biases, norms and embeddings), with its fused
    kernel where the device has one (CUDA, and the CPU since torch 2.4)."""
    import torch

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embeddings" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embeddings" not in n)]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=1.0, betas=(0.9, 0.98), eps=1e-6, fused=True)
    except (RuntimeError, TypeError):  # no fused kernel for this device or dtype: the foreach one
        return torch.optim.AdamW(groups, lr=1.0, betas=(0.9, 0.98), eps=1e-6, foreach=True)
