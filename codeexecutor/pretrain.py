"""`codeexecutor pretrain --recipe R.yaml`: the one way to train, from data to a scored model.

A recipe (curricula/recipes/*.yaml) is a curriculum (model, train, stages) with three more
sections: `data` (where the datasets live and how to build the missing ones), `tokenizer`
(the sample it is trained on) and `score` (what the model is scored on). The command runs
its phases in order, each into the output folder and each skipped when its result is
already there, so the same command with `--resume` carries on from where a killed run
stopped. Until the training has begun, a resumed run may change its schedule (`train`,
`score`, the stages' steps, shares, rates and weights) and `--minutes`: the data phases'
results are kept, and the tokenized sources' curriculum is written again (`data_part`):

    build      each dataset of `data.builds` that is missing (curricula/build.py, resumable)
    tokenizer  one tokenizer on a bounded sample of the sources (unless the model names one or an init)
    tokenize   every source once, for that tokenizer and format (OUT/tokenized, resumable)
    train      the stages on the tokenized sources (OUT/run; its checkpoints resume it); with
               `--minutes` each stage's steps fitted to the time from its measured speed
               (training/budget.py); with `--launcher` through run_pretrain.sh (the deepspeed
               launcher: several GPUs or nodes)
    score      a fixed sample of each dataset's test split, greedy, the release's metric
               (eval/evaluate.py, its answers journaled)
    card       the model card (README.md) beside the final model

Every phase but one runs in this process, as calls of the builders, the tokenizer and the
evaluation. The training runs in a child process, because a device fault breaks the CUDA
context of the process it happens in: the child dies, this process stays sound and starts
the next attempt (training/fallback.py); with `--launcher` the child is the DeepSpeed
launcher, which starts a process per GPU. `OUT/pretrain.json` records each phase as it ends.
The recipe itself is read by training/recipe.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from codeexecutor.atomic import write_json
from codeexecutor.errors import ConfigError
from codeexecutor.training.config import BUILD_FOLDERS, BUILD_OPTIONS, build_folders
from codeexecutor.training.fallback import REFUSAL_FILE
from codeexecutor.training.precision import AUTO
from codeexecutor.training.recipe import data_part, load_recipe

PHASES = ("build", "tokenizer", "tokenize", "train", "score", "card")
MIN_ATTEMPT = 30.0  # seconds of budget a new training process needs to reach a step and export a model
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env(refusal: str) -> dict:
    """The training process's environment: this one's, the checkout first on its import path
    and whatever was there after it (a GPU lease's carried wheels in /tmp/site), and the file
    a refused setting is written to."""
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, REFUSAL_FILE: refusal}


@dataclass(frozen=True)
class TrainProcess:
    """How the training child is started: its budget in minutes (default: the recipe's
    steps), its DeepSpeed config (default: chosen by the child from its device), and
    whether through run_pretrain.sh (the deepspeed launcher: a process per GPU)."""

    minutes: float | None = None
    ds_config: str | None = None
    launcher: bool = False


class Pretrain:
    def __init__(
        self,
        recipe: str,
        out: str | None = None,
        resume: bool = False,
        base_dir: str = ".",
        overrides: list[str] = (),
        score: bool = True,
        process: TrainProcess | None = None,
    ) -> None:
        process = process or TrainProcess()
        minutes, ds_config, launcher = process.minutes, process.ds_config, process.launcher
        self.cur, raw = load_recipe(recipe, base_dir, overrides)
        self.base, self.minutes, self.launcher, self.scoring = base_dir, minutes, launcher, score
        self.out = os.path.abspath(os.path.join(base_dir, out or self.cur.train.output_dir))
        if minutes is not None and not minutes > 0:
            raise ConfigError(f"--minutes must be > 0, got {minutes}")
        self.ds_config = ds_config or AUTO  # chosen by the training process from its device (training/precision.py)
        if self.ds_config != AUTO and not os.path.isfile(self.ds_config):
            raise ConfigError(f"DeepSpeed config not found: {self.ds_config} (see ds_configs/)")
        self.record_path = os.path.join(self.out, "pretrain.json")
        started = os.path.exists(self.record_path)
        if started and not resume:
            raise ConfigError(
                f"{self.out} holds a pretrain run already: add --resume to carry it on, or give --out a new folder"
            )
        self.record = (
            json.load(open(self.record_path)) if started else {"recipe": os.path.abspath(recipe), "phases": {}}
        )
        before = self.record.get("settings") or {}
        training = os.path.isdir(os.path.join(self.out, "run"))  # the schedule and --minutes may change until then
        if started and (
            before.get("recipe") != raw
            and (training or data_part(before.get("recipe") or {}) != data_part(raw))
            or training
            and before.get("minutes") != minutes
        ):
            raise ConfigError(
                f"{self.out} was started with another recipe or settings ({self.record_path}): --resume "
                "carries on the same run; give --out a new folder for this one"
            )
        if started and before.get("recipe") != raw and self.record["phases"].get("tokenize", {}).get("done"):
            print(
                "pretrain: the recipe's schedule changed before training began: its tokenized sources are kept and "
                "their curriculum written again",
                file=sys.stderr,
                flush=True,
            )
            self.record["phases"]["tokenize"]["done"] = False
        self.record["settings"] = {"recipe": raw, "minutes": minutes}

    # -- the phases --------------------------------------------------------------------------
    def run(self, until: str | None = None) -> str:
        """Every phase not done before, in order (up to `until`, included); the final model's
        folder, or the output folder when stopped early."""
        os.makedirs(self.out, exist_ok=True)
        self._save()
        for phase in PHASES[: PHASES.index(until) + 1] if until else PHASES:
            if self.record["phases"].get(phase, {}).get("done"):
                print(f"pretrain: {phase}: done before", file=sys.stderr, flush=True)
                continue
            t = time.time()
            print(f"pretrain: {phase} ...", file=sys.stderr, flush=True)
            detail = getattr(self, f"_{phase}")() or {}
            self.record["phases"][phase] = {"done": True, "seconds": round(time.time() - t, 1), **detail}
            self._save()
        if until and until != PHASES[-1]:
            print(f"pretrain: stopped after {until}; the same command with --resume carries on", file=sys.stderr)
            print(self.out)
            return self.out
        final = os.path.join(self.out, "run", "final")
        print(final)
        return final

    def _at(self, path: str) -> str:
        """A path of the recipe (relative to the base folder) as this process opens it."""
        return path if os.path.isabs(path) or self.base in ("", ".") else os.path.join(self.base, path)

    def _build(self) -> dict:
        """Each missing build of `data.builds`, in this process; the folder options (another
        build's name, folders, a glob pattern) are read relative to the base folder."""
        if self.cur.data.packed:  # committed ids: each source's tokenized folder written back from them
            import pathlib

            from codeexecutor.training.packed import unpack_into

            rows = unpack_into(self.cur, pathlib.Path(self._at(".")), pathlib.Path(self._at(self.cur.data.packed)))
            print(f"pretrain: unpacked {len(rows)} sources from {self.cur.data.packed}", file=sys.stderr, flush=True)
            return {"unpacked": rows}
        from curricula.build import build

        built = []
        for name, spec in self.cur.data.builds.items():
            folder = self._at(os.path.join(self.cur.data.dir, name))
            if os.path.exists(os.path.join(folder, "stats.json")):
                continue
            options = {}
            for key, value in spec.items():
                if key == "kind" or value is None:
                    continue
                if key in BUILD_FOLDERS:
                    values = [
                        self._at(f)
                        for v in (value if isinstance(value, list) else [value])
                        for f in (
                            [os.path.join(self.cur.data.dir, v)]
                            if v in self.cur.data.builds
                            else build_folders(self.base, v)
                        )
                    ]
                    if BUILD_OPTIONS[spec["kind"]][key] is not list and len(values) != 1:
                        raise ConfigError(
                            f"data.builds.{name}.{key}: {value!r} names {len(values)} folders; this option takes one"
                        )
                    value = values if BUILD_OPTIONS[spec["kind"]][key] is list else values[0]
                options[key] = value
            stats = build(spec["kind"], folder, options)
            rows = {k: sum(v.values()) if isinstance(v, dict) else v for k, v in (stats.get("datasets") or {}).items()}
            print(f"pretrain: built {name}: {json.dumps(rows)}", file=sys.stderr, flush=True)
            built.append(name)
        return {"built": built}

    def _tokenizer(self) -> dict:
        if self.cur.model.tokenizer or self.cur.model.init:
            return {"tokenizer": self.cur.model.tokenizer or self.cur.model.init}
        from codeexecutor.training.tokenized import train_curriculum_tokenizer

        path = os.path.join(self.out, "tokenizer")
        report = train_curriculum_tokenizer(self.cur, self.base, path, self.cur.tokenizer.sample)
        return {"tokenizer": path, "vocab_size": report["vocab_size"], "distinct_texts": report["distinct_texts"]}

    def _tokenize(self) -> dict:
        from codeexecutor.modeling.loading import resolve
        from codeexecutor.training.setup import check_action_sources
        from codeexecutor.training.tokenized import tokenize_curriculum

        check_action_sources(self.cur, self.cur.profile(), self.base)
        tokenizer = self.record["phases"]["tokenizer"]["tokenizer"]
        markers = tokenize_curriculum(self.cur, self.base, resolve(tokenizer), os.path.join(self.out, "tokenized"))
        return {"rows": {path: m["rows"] for path, m in markers.items()}}

    def _train(self) -> dict:
        """The training in a child process (`codeexecutor.training`; a device fault breaks
        the CUDA context of the process it happens in, so this process opens none before the
        training is over: only the score phase uses the device here, and a fault there ends
        the command, which --resume carries on from the journaled answers). A
        child that dies (a fault, a compile error, a recompile limit, a kill) is started
        again from its last checkpoint on the next safer path (training/fallback.py), with
        what the budget has left; each attempt and how it ended is recorded."""
        from codeexecutor.training.config import Curriculum
        from codeexecutor.training.fallback import on_path, safer_paths, spend
        from codeexecutor.training.order import TrainOrder

        run = os.path.join(self.out, "run")
        # The tokenized sources' curriculum, checked here once: each attempt's process gets it whole.
        cur = Curriculum.load(os.path.join(self.out, "tokenized", "curriculum.yaml"), self.base)
        cur.train.output_dir = run
        order = TrainOrder(cur, self.ds_config, ".", None, self.minutes)
        # A refused setting is written here by whichever rank refused it: a launcher (torchrun) reports
        # any rank's failure as its own exit 1, and no safer path mends a setting.
        refusal = os.path.join(self.out, "refused.txt")
        env = child_env(refusal)
        attempts = self.record["phases"].setdefault("train", {}).setdefault("attempts", [])
        paths = safer_paths(cur)
        started = time.time()
        for i, path in enumerate(paths):
            if self.minutes and i:  # the time the dead children took, on the wall clock, is spent
                left = spend(run, time.time() - started, self.minutes * 60)
                if left < MIN_ATTEMPT:
                    print(
                        f"pretrain: {max(left, 0):.0f} s of the budget left: no time for another training process",
                        file=sys.stderr,
                        flush=True,
                    )
                    break
            given = on_path(order, path).save(os.path.join(self.out, f"order{i}.json"))
            if self.launcher:  # every rank of the launch on the same path; a rank that dies ends the launch
                env.update(CODEEXECUTOR_ORDER=given, PYTHON=sys.executable)
                cmd = ["bash", os.path.join(ROOT, "run_pretrain.sh")]
            else:
                cmd = [sys.executable, "-m", "codeexecutor.training", "--order", given]
            if os.path.exists(refusal):
                os.remove(refusal)
            child = subprocess.Popen(cmd, cwd=self.base, env=env)
            attempts.append({"path": path or "as the recipe asks", "pid": child.pid, "started": round(time.time(), 1)})
            self._save()
            code = child.wait()
            attempts[-1].update(exit_code=code, seconds=round(time.time() - attempts[-1]["started"], 1))
            self._save()
            if os.path.exists(refusal):  # a bad setting no other path mends
                with open(refusal) as f:
                    raise ConfigError(f.read().strip())
            if code == 0 or code == 2:  # done, or a bad setting refused (its line is printed)
                break
            print(
                f"pretrain: the training process ended with {_ended(code)}; carrying on from its last checkpoint"
                + (f" on {paths[i + 1]}" if i + 1 < len(paths) else ""),
                file=sys.stderr,
                flush=True,
            )
        if not os.path.exists(os.path.join(run, "final", "config.json")):
            raise ConfigError(
                f"the training ended without a final model in {run} ({len(attempts)} attempt(s), the last "
                f"{_ended(attempts[-1]['exit_code'])}): see its train_log.jsonl"
            )
        return {"run": run, "steps": _stage_steps(run), "attempts": attempts}

    def _score(self) -> dict:
        if not self.scoring:
            return {"skipped": "--no-score"}
        from eval.evaluate import EvalOptions, evaluate_model
        from eval.report import save

        scores = os.path.join(self.out, "scores")
        os.makedirs(scores, exist_ok=True)
        sets = {}
        for folder in map(self._at, self._score_folders()):
            name = os.path.basename(os.path.normpath(folder))
            out = os.path.join(scores, f"{name}.json")
            report = evaluate_model(
                os.path.join(self.out, "run", "final"),
                folder,
                self.cur.score.split,
                self.cur.score.limit,  # a killed scoring resumes from its answers
                options=EvalOptions(answers=os.path.splitext(out)[0] + ".answers.jsonl"),
            )
            report = save(report, out)
            for dataset, entry in report["datasets"].items():
                sets[dataset] = {
                    "examples": entry["examples"],
                    **entry["table3"],
                    "aligned": entry.get("aligned"),
                    "unfinished": (entry.get("unfinished") or {}).get("share"),
                }
        with open(os.path.join(scores, "scores.json"), "w") as f:
            json.dump(
                {"split": self.cur.score.split, "limit": self.cur.score.limit, "metric": "release", "sets": sets},
                f,
                indent=2,
            )
        return {"sets": {k: v.get("trace_accuracy") for k, v in sets.items()}}

    def _score_folders(self) -> list[str]:
        """The dataset folders scored: `score.sets` under data.dir, else the build folder of
        every source the stages read (a source `D/codenetmut/errors` is scored with `D/codenetmut`)."""
        if self.cur.score.sets:
            return [os.path.join(self.cur.data.dir, s) for s in self.cur.score.sets]
        seen: dict[str, None] = {}
        for stage in self.cur.stages:
            for src in stage.sources:
                seen.setdefault(os.path.dirname(os.path.normpath(src.path)), None)
        return list(seen)

    def _card(self) -> dict:
        from codeexecutor.training.card import Training, write_card

        final = os.path.join(self.out, "run", "final")
        scores_path = os.path.join(self.out, "scores", "scores.json")
        scores = json.load(open(scores_path)) if os.path.exists(scores_path) else {"sets": {}}
        train = self.record["phases"].get("train", {})
        path = write_card(
            final,
            scores,
            Training(
                device=_device_name(),
                recipe=self.record["recipe"],
                steps=train.get("steps"),
                minutes=round(train.get("seconds", 0) / 60, 1),
                command=" ".join(sys.argv),
            ),
        )
        return {"card": path}

    def _save(self) -> None:
        write_json(self.record_path, self.record, default=str)


def _ended(code: int) -> str:
    import signal

    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


def _stage_steps(run: str) -> dict:
    ends = {}
    with open(os.path.join(run, "train_log.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if "loss" in row:
                ends[row["stage"]] = row["step"]
    out, before = {}, 0
    for name, step in ends.items():
        out[name], before = step - before, step
    return out


def _device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
