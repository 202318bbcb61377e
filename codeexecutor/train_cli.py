"""`codeexecutor pretrain`: a recipe from its data to a scored model (codeexecutor/pretrain.py);
`tokenizer` and `tokenize`, its two data steps, on their own."""

from __future__ import annotations

import argparse

from codeexecutor.pretrain import PHASES  # light: the module imports its heavy parts in its phases


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--recipe",
        "--curriculum",
        dest="recipe",
        default="curricula/demo.yaml",
        help="recipe YAML (curricula/recipes/; default curricula/demo.yaml)",
    )
    p.add_argument(
        "--minutes",
        type=float,
        help="fit the stages' steps into this many minutes of training, each from "
        "its measured speed (default: the recipe's steps)",
    )
    p.add_argument(
        "--out", "--output-dir", dest="out", metavar="DIR", help="the run's folder (default: train.output_dir)"
    )
    p.add_argument("--resume", action="store_true", help="carry on the run in --out where it stopped")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="change one field of the recipe (model.preset=small, stages.codenet.steps=100); repeatable",
    )
    p.add_argument(
        "--ds-config", help="DeepSpeed JSON of the training (default auto: chosen by the device, ds_configs/README.md)"
    )
    p.add_argument(
        "--launcher",
        action="store_true",
        help="train through run_pretrain.sh (the deepspeed launcher: "
        "GPUS_PER_NODE, NNODES, HOSTFILE from the environment)",
    )
    p.add_argument("--no-score", action="store_true", help="leave the test samples unscored")
    p.add_argument(
        "--until",
        choices=PHASES,
        help="stop after this phase (`--until tokenize`: the data and its ids, "
        "ready for a GPU lease or a later --resume)",
    )
    p.add_argument("--base-dir", default=".", help="folder the recipe's paths are relative to")


def _run(args: argparse.Namespace) -> int:
    from codeexecutor.pretrain import Pretrain, TrainProcess

    process = TrainProcess(args.minutes, args.ds_config, args.launcher)
    Pretrain(args.recipe, args.out, args.resume, args.base_dir, args.overrides, not args.no_score, process).run(
        until=args.until
    )
    return 0


def _tokenizer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curriculum", required=True, help="curriculum YAML whose sources the tokenizer learns from")
    p.add_argument("--base-dir", default=".", help="folder the curriculum's dataset paths are relative to")
    p.add_argument("--out", required=True, metavar="DIR", help="the tokenizer's folder (set model.tokenizer to it)")
    p.add_argument("--sample", type=int, default=200_000, help="rows read at most, evenly from the distinct sources")


def _tokenizer_run(args: argparse.Namespace) -> int:
    from codeexecutor.errors import UsageError
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.tokenized import train_curriculum_tokenizer

    if args.sample < 1:
        raise UsageError("--sample must be >= 1")
    report = train_curriculum_tokenizer(
        Curriculum.load(args.curriculum, args.base_dir), args.base_dir, args.out, args.sample
    )
    print(f"tokenizer: {args.out} ({report['vocab_size']} tokens from {report['distinct_texts']} distinct texts)")
    return 0


def _tokenize_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curriculum", required=True, help="curriculum YAML whose sources to tokenize")
    p.add_argument("--base-dir", default=".", help="folder the curriculum's dataset paths are relative to")
    p.add_argument("--tokenizer", required=True, metavar="DIR", help="the tokenizer (codeexecutor tokenizer --out DIR)")
    p.add_argument(
        "--out", required=True, metavar="DIR", help="folder of the tokenized sources and their curriculum.yaml"
    )
    p.add_argument("--workers", type=int, default=None, help="processes tokenizing (datasets.map num_proc)")


def _tokenize_run(args: argparse.Namespace) -> int:
    import os

    from codeexecutor.errors import UsageError
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.setup import check_action_sources
    from codeexecutor.training.tokenized import tokenize_curriculum

    if not os.path.isfile(os.path.join(args.tokenizer, "tokenizer.json")):
        raise UsageError(f"no tokenizer at {args.tokenizer}: make one with codeexecutor tokenizer --out DIR")
    cur = Curriculum.load(args.curriculum, args.base_dir)
    check_action_sources(cur, cur.profile(), args.base_dir)
    markers = tokenize_curriculum(cur, args.base_dir, args.tokenizer, args.out, args.workers)
    for path, m in markers.items():
        print(f"{path}: {m['rows']} rows ({m['fits']})")
    print(f"curriculum: {os.path.join(args.out, 'curriculum.yaml')}")
    return 0


def _values_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--recipe", default="curricula/recipes/values.yaml", help="value recipe YAML (default %(default)s)")
    p.add_argument("--data", help="the events' folder (default: the recipe's data)")
    p.add_argument("--out", required=True, metavar="DIR", help="the value model's folder")
    p.add_argument("--minutes", type=float, help="training budget (default: the recipe's)")
    p.add_argument("--init", choices=("scratch", "embeddings", "encoder"), help="where the weights start")
    p.add_argument("--resume", action="store_true", help="carry on a stopped run of the same --out")


def _values_run(args: argparse.Namespace) -> int:
    import json

    from codeexecutor.training.values import ValueRecipe, train

    recipe = ValueRecipe.load(args.recipe, {"data": args.data, "minutes": args.minutes, "init": args.init})
    report = train(recipe, args.out, resume=args.resume)
    print(json.dumps({"out": args.out, "steps": report["steps"], "best": report["best"]}))
    return 0


def _detector_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="models/codeexecutor-mini-cpu", help="the trace model (default %(default)s)")
    p.add_argument("--data", required=True, metavar="DIR", help="a `codeexecutor build bugs` folder")
    p.add_argument("--out", required=True, metavar="DIR", help="the model folder the detector is saved in")
    p.add_argument("--minutes", type=float, default=20.0, help="training budget (default %(default)s)")
    p.add_argument("--layers", type=int, default=2, help="the detector's own Transformer layers (default %(default)s)")
    p.add_argument("--descriptions", metavar="PROBLEMS.jsonl", help="give each program its problem's input spec")
    p.add_argument(
        "--functions",
        metavar="DIR",
        help="a `build bugs --from` folder: its train and valid programs (the functions' bugs) join --data's",
    )
    p.add_argument("--resume", action="store_true", help="carry on a stopped run of the same --out")


def _detector_run(args: argparse.Namespace) -> int:
    import json

    from codeexecutor.errors import UsageError
    from codeexecutor.training.detector import DetectorRecipe, train_detector

    if args.minutes <= 0 or args.layers < 0:
        raise UsageError("--minutes must be > 0 and --layers >= 0")
    recipe = DetectorRecipe(
        minutes=args.minutes, layers=args.layers, descriptions=args.descriptions, functions=args.functions
    )
    report = train_detector(args.model, args.data, args.out, recipe, resume=args.resume)
    print(json.dumps({"out": args.out, "steps": report["steps"], "best": report["best"]}))
    return 0


# The subcommands this module defines, by name: (help, add_arguments, run); codeexecutor/cli.py lists them.
COMMANDS = {
    "pretrain": ("train a recipe: build its data, tokenizer, tokens, stages, scores and card (resumable)", _args, _run),
    "tokenizer": (
        "train a curriculum's tokenizer in a step of its own, on a bounded sample",
        _tokenizer_args,
        _tokenizer_run,
    ),
    "tokenize": ("tokenize a curriculum's sources once, for one tokenizer and format", _tokenize_args, _tokenize_run),
    "train-values": ("train guided execution's value model from `build values` events", _values_args, _values_run),
    "train-detector": (
        "train the crash detector beside a trace model from a `build bugs` folder",
        _detector_args,
        _detector_run,
    ),
}
