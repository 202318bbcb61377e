"""What one training process is told to run: a `TrainOrder`, its curriculum checked once.

A person starts training with a curriculum YAML (`python -m codeexecutor.training
--curriculum C.yaml`, run_pretrain.sh): the process reads and checks it itself
(`TrainOrder.from_curriculum`). `codeexecutor pretrain` has read and checked its recipe
already, so it hands its training process the order whole instead: the checked curriculum
with the attempt's path applied, the DeepSpeed config, the budget and the folders, written
as JSON (`save`) and read back field for field (`load`), with no second check and no
second set of options. A file of another format is refused in one line.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass

from codeexecutor.atomic import write_json
from codeexecutor.errors import ConfigError
from codeexecutor.training.config import (
    Curriculum,
    DataArgs,
    ModelArgs,
    ScoreArgs,
    Source,
    Stage,
    TokenizerArgs,
    TrainArgs,
)
from codeexecutor.training.precision import AUTO

FORMAT = "codeexecutor-train-order/1"  # the file's format; a reader of another refuses it


@dataclass
class TrainOrder:
    """One training process's work: `curriculum` (checked), `ds_config` (a DeepSpeed JSON,
    or auto: chosen by the device), `base_dir` (what the curriculum's paths are relative
    to), `max_steps` (stop after this global step; the rest resumes later) and `minutes`
    (the stages' steps fitted into this many minutes, training/budget.py)."""

    curriculum: Curriculum
    ds_config: str = AUTO
    base_dir: str = "."
    max_steps: int | None = None
    minutes: float | None = None

    @classmethod
    def from_curriculum(
        cls,
        path: str,
        ds_config: str = AUTO,
        base_dir: str = ".",
        output_dir: str | None = None,
        steps: tuple[int | None, float | None] = (None, None),
    ) -> TrainOrder:
        """A person's order: the curriculum YAML at `path`, read and checked here;
        `output_dir` in place of its train.output_dir; `steps`: (max_steps, minutes)."""
        cur = Curriculum.load(path, base_dir)
        if output_dir:
            cur.train.output_dir = output_dir
        return cls(cur, ds_config, base_dir, *steps)

    def on_path(self, attention: str, compile: bool | str) -> TrainOrder:
        """The same order on another attention kernel and compile setting (a safer path,
        training/fallback.py)."""
        model = dataclasses.replace(self.curriculum.model, attention=attention)
        train = dataclasses.replace(self.curriculum.train, compile=compile)
        return dataclasses.replace(self, curriculum=dataclasses.replace(self.curriculum, model=model, train=train))

    def save(self, path: str) -> str:
        write_json(path, {"format": FORMAT, **asdict(self)})
        return path

    @classmethod
    def load(cls, path: str) -> TrainOrder:
        """The order `save` wrote, field for field (its curriculum was checked when it was made)."""
        try:
            with open(path) as f:
                raw = json.load(f)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot read the training order {path} ({exc}): `codeexecutor pretrain` writes it"
            ) from exc
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
            raise ConfigError(
                f"{path} is not a training order of this version (format {found!r}, expected {FORMAT!r}): "
                "give a curriculum YAML with --curriculum, or run `codeexecutor pretrain --resume` again"
            )
        try:
            c = raw["curriculum"]
            stages = [Stage(**{**s, "sources": [Source(**src) for src in s["sources"]]}) for s in c["stages"]]
            cur = Curriculum(
                ModelArgs(**c["model"]),
                TrainArgs(**c["train"]),
                stages,
                DataArgs(**c["data"]),
                TokenizerArgs(**c["tokenizer"]),
                ScoreArgs(**c["score"]),
            )
            return cls(cur, raw["ds_config"], raw["base_dir"], raw["max_steps"], raw["minutes"])
        except (KeyError, TypeError) as exc:  # a field missing or unknown: a file edited by hand or cut short
            raise ConfigError(
                f"{path} is not a whole training order ({type(exc).__name__}: {exc}): write it again"
            ) from exc
