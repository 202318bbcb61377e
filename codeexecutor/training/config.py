"""Curriculum configuration: grouped dataclasses validated with every problem listed, and
the DeepSpeed JSON config filled in from them (batch identity checked)."""

from __future__ import annotations

import json
import os
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Literal

from codeexecutor.errors import ConfigError
from codeexecutor.modeling.choices import Attention, CodeWindow, Positions, ProfileName, StepOrder, TraceState
from codeexecutor.training.engine import Engine

Anchor = Literal["example", "token"]  # a token-budget batch's first example drawn per example or per token
Autocast = Literal["bf16"]
Split = Literal["test", "valid", "train"]

ROW_BLOCK = 128  # a micro-step row's length is a multiple of FlexAttention's tile (modeling/rows.BLOCK)


def literal_choices(hint) -> tuple | None:
    """The values a field's annotation allows where it is a `Literal` (None among them
    where the field is optional); None for any other annotation."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = typing.get_args(hint)
        inner = [v for m in members if typing.get_origin(m) is Literal for v in typing.get_args(m)]
        if inner:
            return (*inner, None) if type(None) in members else tuple(inner)
    return None


def choice_problems(obj, where: str) -> list[str]:
    """One line for each field of the dataclass `obj` whose value its `Literal` does not allow."""
    hints = typing.get_type_hints(type(obj))
    out = []
    for f in fields(obj):
        choices = literal_choices(hints.get(f.name))
        value = getattr(obj, f.name)
        if choices is not None and value not in choices:
            named = [str(c) for c in choices if c is not None]
            said = named[0] if len(named) == 1 else "one of " + ", ".join(named)
            out.append(f"{where}.{f.name} must be {said}{' or left out' if None in choices else ''}, got {value!r}")
    return out


@dataclass
class ModelArgs:
    """The model and its tokenizer."""

    preset: str = "tiny"  # a size named in modeling.model.PRESETS
    init: str | None = (
        None  # folder or hub id to start from: microsoft/codeexecutor, microsoft/unixcoder-base, a run's export
    )
    tokenizer: str | None = None  # a saved tokenizer; default: init's, else trained on the data
    format_profile: ProfileName | None = None  # official | exact; default: init's (the release: official), else exact
    exception_step: bool = True  # crashing traces end with <exception> (added to the released vocabulary if needed)
    # The three below default to init's (a model continues in the format it learnt), else the first named
    trace_state: TraceState | None = (
        None  # full | delta: a step writes the whole state, or only what changed (modeling/compact.py)
    )
    step_order: StepOrder | None = (
        None  # start | end: a line that calls writes its step before the call's steps, or after them
    )
    code_window: CodeWindow | None = (
        None  # head | ends: a program past max_code_length is read from its start, or its start and last lines
    )
    vocab_size: int = 8000  # for a trained tokenizer
    split_digits: bool = False  # a trained tokenizer: one token per digit (learnable arithmetic)
    max_code_length: int = 256
    max_trace_length: int = 768
    structural_weight: float = 1.0
    other_weight: float = 10.0
    exception_weight: float | None = None  # loss weight of the `<exception>` token, a crash's first; None: other_weight
    dropout: float = (
        0.1  # hidden and attention dropout of a new model (an init keeps its own); 0 learns faster on short budgets
    )
    positions: Positions = (
        "absolute"  # of a new model (an init keeps its own): absolute (the release's) or rotary (modeling/rotary.py)
    )
    attention: Attention = (
        "sdpa"  # of packed training batches: sdpa (a dense mask) or flex (FlexAttention's block mask)
    )


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
    checkpoints: bool = True  # false: no DeepSpeed checkpoint at all (a measurement run, never resumed)
    log_every: int = 10
    mining_batch_size: int = 32
    # Tokens per micro-step: its examples back to back in one row of exactly this many
    # (modeling/rows.py); a multiple of 128 that holds the longest example
    # (max_code_length + max_trace_length). None: micro_batch_size examples padded apart,
    # through the eager Hugging Face forward.
    max_tokens: int | None = None
    # a token-budget batch's first example drawn per example or per token (data.py);
    # token lost at equal steps (experiments/NOTEBOOK.md)
    anchor: Anchor = "example"
    eval_every: int = 0  # evaluate every N steps (0: at each stage end only)
    eval_examples: int = 128  # valid examples per source for the held-out loss (0: no evaluation)
    eval_decode_examples: int = 32  # of those, greedily decoded for trace/output accuracy
    # "bf16": the training and mining forward passes under torch.autocast in bfloat16, with
    # the weights, gradients and optimizer kept in float32 (mixed precision without
    # DeepSpeed's bf16 section, whose bf16 weights lose small updates). On a CPU with
    # bfloat16 instructions (AVX512_BF16, AMX) a matmul runs 2-2.5x faster; see
    # benchmarks/bench_train.py. None: float32 throughout.
    autocast: Autocast | None = None
    engine: Engine = (
        "auto"  # torch | deepspeed | auto: torch for one process, DeepSpeed for several (training/engine.py)
    )
    compile: bool | str = "auto"  # the row step compiled whole: auto on CUDA only (training/step.py), true, false


@dataclass
class Source:
    """One dataset of a stage: a saved DatasetDict (its `train` split is used)."""

    path: str
    task: str
    weight: float = 1.0
    hardest: int | None = None  # keep only the K hardest examples by the previous stage's loss
    mine_from: int | None = None  # score only a fixed random sample of this many examples for `hardest`


@dataclass
class Stage:
    name: str
    sources: list[Source]
    steps: int
    lr: float = 4e-4
    warmup: int = 10_000
    share: float | None = None  # of a --minutes budget (training/budget.py); None: its part of the stages' steps


# What each kind of dataset build takes (`codeexecutor build KIND`'s options, as a recipe
# names them), and which of them name folders (read relative to the base folder).
BUILD_OPTIONS = {
    "codenetmut": {"codenet": list, "mutants": int, "limit": int, "seed": int, "workers": int, "shard": str},
    "tutorial": {"sources": str, "mutants": int, "seed": int, "workers": int},
    "singleline": {"from": str, "limit": int, "augment": int, "per_line": int, "workers": int},
    "actions": {"from": str, "per_program": int, "limit": int, "max_chars": int, "order": str, "seed": int},
    "functions": {
        "from": list,
        "mutants": int,
        "input_mutants": int,
        "lineage": bool,
        "limit": int,
        "workers": int,
        "licence": str,
        "shard": str,
    },
}
BUILD_FOLDERS = {"codenet", "sources", "from"}


def build_folders(base_dir: str, pattern: str) -> list[str]:
    """The folders a build option names (a glob pattern may name several), relative to base_dir."""
    import glob

    if not glob.has_magic(pattern):
        return [pattern] if os.path.isdir(os.path.join(base_dir, pattern)) else []
    found = sorted(glob.glob(os.path.join(base_dir, pattern)))
    return [os.path.relpath(f, base_dir) for f in found if os.path.isdir(f)]


@dataclass
class DataArgs:
    """Where a recipe's datasets live and how to build those that are missing
    (`codeexecutor pretrain`): the stages' source paths are relative to `dir`."""

    dir: str = "."
    builds: dict = field(default_factory=dict)  # name -> {kind: codenetmut|tutorial|singleline|functions, options...}
    # committed ids to unpack instead of building (curricula/packed: training/packed.py); the
    # stages' folders under `dir` are written from them and `builds` is only their provenance
    packed: str | None = None


@dataclass
class TokenizerArgs:
    """A tokenizer trained once, on a bounded sample of the recipe's sources."""

    sample: int = 200_000  # rows read at most, evenly from the distinct sources
    # Code tokens the tokenized ids keep (None: model.max_code_length). Longer than the
    # model reads, they let a later recipe read a longer window from the same ids; a run
    # cuts them to its own window as it loads them (training/tokenized.narrow_code).
    keep_code_length: int | None = None


@dataclass
class ScoreArgs:
    """What `codeexecutor pretrain` scores the trained model on: a fixed sample of each
    dataset folder's split, greedy, the release's metric."""

    limit: int = 300
    split: Split = "test"
    sets: list | None = None  # dataset folders under data.dir; None: every folder the stages read


@dataclass
class Curriculum:
    model: ModelArgs
    train: TrainArgs
    stages: list[Stage] = field(default_factory=list)
    data: DataArgs = field(default_factory=DataArgs)
    tokenizer: TokenizerArgs = field(default_factory=TokenizerArgs)
    score: ScoreArgs = field(default_factory=ScoreArgs)

    @classmethod
    def load(cls, path: str, base_dir: str | None = None) -> Curriculum:
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
            raise ConfigError(
                f"{path} is not a curriculum: expected a mapping with model, train and stages (see curricula/*.yaml)"
            )
        return cls.from_dict(raw, path, base_dir)

    @classmethod
    def from_dict(
        cls, raw: dict, origin: str = "<dict>", base_dir: str | None = None, buildable: bool = False
    ) -> Curriculum:
        """`buildable`: a source folder that is missing but that one of `data.builds` makes
        is no problem (`codeexecutor pretrain` builds it first)."""
        problems: list[str] = []
        top = ("model", "train", "stages", "data", "tokenizer", "score")
        unknown = sorted(set(raw) - set(top))
        if unknown:
            problems.append(f"unknown section(s) {', '.join(map(str, unknown))} (known: {', '.join(top)})")

        def build(kind, data, where):
            if not isinstance(data, dict):
                problems.append(f"{where}: expected a mapping, got {type(data).__name__}")
                return None
            names = {f.name for f in fields(kind)}
            unknown = sorted(set(data) - names)
            if unknown:
                problems.append(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(names))})")
            try:
                made = kind(**{k: v for k, v in data.items() if k in names})
            except TypeError as exc:
                problems.append(f"{where}: {exc}")
                return None
            return made

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
        data = build(DataArgs, raw.get("data") or {}, "data") or DataArgs()
        tokenizer = build(TokenizerArgs, raw.get("tokenizer") or {}, "tokenizer") or TokenizerArgs()
        score = build(ScoreArgs, raw.get("score") or {}, "score") or ScoreArgs()
        if data.dir not in (".", ""):  # the stages' paths are relative to data.dir
            for stage in stages:
                for src in stage.sources:
                    src.path = os.path.normpath(os.path.join(data.dir, src.path))
        cur = cls(model or ModelArgs(), train or TrainArgs(), stages, data, tokenizer, score)
        problems += cur.validate(base_dir, buildable)
        if problems:
            raise ConfigError(f"{origin} has {len(problems)} problem(s):\n  - " + "\n  - ".join(problems))
        return cur

    def profile(self):
        """The run's format profile: the curriculum's; else its init's (the released
        checkpoint is `official`); else `exact`."""
        from codeexecutor.modeling.profiles import Profile

        name, given = self.model.format_profile, {}
        named = (self.model.trace_state, self.model.step_order, self.model.code_window)
        if self.model.init and (name is None or None in named):  # the init's say what the curriculum leaves open
            from codeexecutor.modeling.loading import folder_profile, read_config, resolve

            path = resolve(self.model.init)
            config = read_config(path)
            name = name or folder_profile(path, config)
            given = {k: config.get(k) for k in ("trace_state", "step_order", "code_window")}
        state = self.model.trace_state or given.get("trace_state") or "full"
        order = self.model.step_order or given.get("step_order") or "start"
        window = self.model.code_window or given.get("code_window") or "head"
        if name == "official" and (order, window) != ("start", "head"):
            from codeexecutor.errors import ConfigError

            raise ConfigError(
                f"model.init {self.model.init} is in the release's official format, which writes steps in start "
                "order and reads code from its start: drop model.step_order and model.code_window, or set "
                "model.format_profile: exact"
            )
        return Profile(name or "exact", self.model.exception_step, state, order, window)

    def built_by(self, path: str) -> str | None:
        """The name of the build in `data.builds` that makes the source folder `path`."""
        rel = os.path.relpath(os.path.normpath(path), os.path.normpath(self.data.dir or "."))
        head = rel.split(os.sep)[0]
        return head if not rel.startswith("..") and head in self.data.builds else None

    def validate(self, base_dir: str | None = None, buildable: bool = False) -> list[str]:
        """Every problem of the curriculum, each a line naming the field and what it takes."""
        sections = (("model", self.model), ("train", self.train), ("data", self.data), ("score", self.score))
        return (
            [line for name, section in sections for line in choice_problems(section, name)]
            + self._validate_model()
            + self._validate_train()
            + self._validate_stages(base_dir, buildable)
            + self._validate_recipe(base_dir)
        )

    def _validate_model(self) -> list[str]:
        from codeexecutor.modeling.model import PRESETS

        p = []
        if self.model.preset not in PRESETS:
            p.append(f"model.preset must be one of {', '.join(PRESETS)}, got {self.model.preset!r}")
        if self.model.exception_weight is not None and not 0 <= self.model.exception_weight <= 1000:
            p.append(f"model.exception_weight must be between 0 and 1000, got {self.model.exception_weight!r}")
        if self.model.step_order == "end" and self.model.format_profile == "official":
            p.append(
                "model.step_order end needs the exact profile: the official format is the release's, in start order"
            )
        if self.model.code_window == "ends" and self.model.format_profile == "official":
            p.append(
                "model.code_window ends needs the exact profile: "
                "the official format reads code as the release, from its start"
            )
        keep = self.tokenizer.keep_code_length
        if keep is not None and not self.model.max_code_length <= keep <= 4096:
            p.append(f"tokenizer.keep_code_length must be in [model.max_code_length, 4096], got {keep}")
        if not 8 <= self.model.max_code_length <= 1024 or not 8 <= self.model.max_trace_length <= 1024:
            p.append("model.max_code_length and max_trace_length must be in [8, 1024]")
        if self.model.max_code_length + self.model.max_trace_length > 1024 and self.model.positions != "rotary":
            p.append(
                "model.max_code_length + max_trace_length must be <= 1024 with absolute positions (the release's "
                "table of 1,026): set model.positions: rotary for a longer example"
            )
        if not 0 <= self.model.dropout < 1:
            p.append(f"model.dropout must be in [0, 1), got {self.model.dropout}")
        elif self.model.attention == "flex" and self.model.dropout > 0 and not self.model.init:
            p.append(
                f"model.attention flex takes no attention dropout: set model.dropout: 0 (got {self.model.dropout}), "
                "or model.attention: sdpa"
            )
        return p

    def _validate_train(self) -> list[str]:
        p = []
        if self.train.micro_batch_size < 1 or self.train.grad_accum < 1:
            p.append("train.micro_batch_size and train.grad_accum must be >= 1")
        longest = self.model.max_code_length + self.model.max_trace_length
        if self.train.max_tokens is not None and (self.train.max_tokens % ROW_BLOCK or self.train.max_tokens < longest):
            fit = max(longest, self.train.max_tokens)
            fit = -(-fit // ROW_BLOCK) * ROW_BLOCK
            p.append(
                f"train.max_tokens must be a multiple of {ROW_BLOCK} that holds the longest example "
                f"(max_code_length + max_trace_length = {longest}), got {self.train.max_tokens}: set it to {fit} "
                "or a larger multiple"
            )
        if self.train.compile not in (True, False, "auto"):
            p.append(f"train.compile must be true, false or auto, got {self.train.compile!r}")
        if self.train.eval_every < 0 or self.train.eval_examples < 0 or self.train.eval_decode_examples < 0:
            p.append("train.eval_every, eval_examples and eval_decode_examples must be >= 0")
        return p

    def _validate_stages(self, base_dir: str | None, buildable: bool) -> list[str]:
        from codeexecutor.modeling.format import TASK_TOKENS

        p = []
        if not self.stages:
            p.append("stages: at least one stage is needed")
        for i, st in enumerate(self.stages):
            if st.steps < 1:
                p.append(f"stages[{i}] ({st.name}): steps must be >= 1")
            if not st.lr > 0 or st.warmup < 0:
                p.append(f"stages[{i}] ({st.name}): lr must be > 0 and warmup >= 0")
            if st.share is not None and not st.share > 0:
                p.append(f"stages[{i}] ({st.name}): share must be > 0 (a part of a --minutes budget), got {st.share}")
            if not st.sources:
                p.append(f"stages[{i}] ({st.name}): no sources")
            for j, src in enumerate(st.sources):
                if src.task not in TASK_TOKENS:
                    p.append(
                        f"stages[{i}].sources[{j}]: task must be one of {', '.join(TASK_TOKENS)}, got {src.task!r}"
                    )
                if not src.weight > 0:
                    p.append(f"stages[{i}].sources[{j}]: weight must be > 0")
                if src.hardest is not None and (i == 0 or src.hardest < 1):
                    p.append(f"stages[{i}].sources[{j}]: hardest needs a previous stage and K >= 1")
                if src.mine_from is not None and (src.hardest is None or src.mine_from < src.hardest):
                    p.append(
                        f"stages[{i}].sources[{j}]: mine_from needs hardest and must be >= it "
                        f"(got mine_from {src.mine_from}, hardest {src.hardest})"
                    )
                if (
                    base_dir is not None
                    and not os.path.isdir(os.path.join(base_dir, src.path))
                    and not (buildable and (self.built_by(src.path) or self.data.packed))
                ):
                    p.append(
                        f"stages[{i}].sources[{j}]: dataset folder {src.path} not found "
                        "(build it first: codeexecutor build ..., or name its build under data.builds)"
                    )
        return p

    def _validate_recipe(self, base_dir: str | None) -> list[str]:
        """The recipe sections: each build's kind and options, the folders they read."""
        p = []
        if not isinstance(self.data.builds, dict):
            return [f"data.builds must map names to builds, got {type(self.data.builds).__name__}"]
        for name, spec in self.data.builds.items():
            where = f"data.builds.{name}"
            if not isinstance(spec, dict) or spec.get("kind") not in BUILD_OPTIONS:
                p.append(f"{where}: needs kind: one of {', '.join(BUILD_OPTIONS)}")
                continue
            allowed = BUILD_OPTIONS[spec["kind"]]
            for key, value in spec.items():
                if key == "kind":
                    continue
                if key not in allowed:
                    p.append(f"{where}: unknown option {key} for a {spec['kind']} build (known: {', '.join(allowed)})")
                    continue
                want = allowed[key]
                ok = isinstance(value, want) or (want is list and isinstance(value, str))
                if not ok or (want is int and isinstance(value, bool)):
                    p.append(f"{where}.{key}: expected {want.__name__}, got {value!r}")
                elif key in BUILD_FOLDERS and base_dir is not None:
                    for folder in [value] if isinstance(value, str) else value:
                        if folder not in self.data.builds and not build_folders(base_dir, folder):
                            p.append(f"{where}.{key}: {folder} is not a folder (nor a build of this recipe)")
        if self.tokenizer.sample < 1:
            p.append(f"tokenizer.sample must be >= 1, got {self.tokenizer.sample}")
        if self.score.limit < 0:
            p.append(f"score.limit must be >= 0, got {self.score.limit}")
        return p


def node_count(world_size: int) -> int:
    """The nodes a run spans, from what its launcher sets: DeepSpeed's CROSS_SIZE,
    torchrun's LOCAL_WORLD_SIZE, SLURM's SLURM_NNODES; 1 where none is set."""
    if os.environ.get("CROSS_SIZE"):
        return int(os.environ["CROSS_SIZE"])
    local = os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("LOCAL_SIZE")
    if local:
        return max(1, world_size // int(local))
    return max(1, min(world_size, int(os.environ.get("SLURM_NNODES", "1"))))  # a run may use fewer nodes than it holds


def load_ds_config(path: str, train: TrainArgs, world_size: int, nodes: int = 1) -> dict:
    """Read a DeepSpeed JSON config and fill in the batch sizes from the curriculum.

    Checks DeepSpeed's identity train_batch_size = micro x accumulation x world size.
    `zero_optimization.overlap_comm: "auto"` is on where several nodes share gradients
    (their reduction over the network then runs beside the backward pass) and off on one
    node, where it would only add a device synchronisation to every backward pass
    (ds_configs/README.md)."""
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
        raise ConfigError(
            f"{path}: train_batch_size {given} != micro {micro} x accumulation {accum} x world {world_size} "
            f'= {total}; set it to {total} or to "auto"'
        )
    if "optimizer" in cfg:
        raise ConfigError(
            f'{path}: remove the "optimizer" block; the training loop passes a torch AdamW '
            "(a DeepSpeed optimizer block JIT-compiles fused_adam)"
        )
    half = [k for k in ("bf16", "fp16") if cfg.get(k, {}).get("enabled")]
    if train.autocast and half:
        raise ConfigError(
            f"{path} enables {half[0]} and the curriculum asks for train.autocast {train.autocast}: "
            f"use one (autocast keeps float32 weights; the DeepSpeed section makes them {half[0]})"
        )
    zero = cfg.get("zero_optimization", {})
    if zero.get("overlap_comm") == "auto":
        zero["overlap_comm"] = nodes > 1
    cfg.update(train_micro_batch_size_per_gpu=micro, gradient_accumulation_steps=accum, train_batch_size=total)
    cfg.setdefault("gradient_clipping", train.max_grad_norm)
    return cfg
