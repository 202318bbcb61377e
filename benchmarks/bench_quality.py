"""The quality run: how well does a model trained within a wall-clock budget execute code?

    .venv/bin/python benchmarks/bench_quality.py --budget-minutes 60 [variant options]

This script measures; `codeexecutor pretrain` trains. A run is the recipe (`--recipe`,
default curricula/recipes/cpu-hour.yaml), or a variant of it made by the options given
(model and train fields, stage 3's weights of the crashing programs and of the functions
set, the builds' sizes), each a field that `pretrain --set` changes:

    codeexecutor pretrain --recipe R --set model.step_order=end ... --minutes N --out OUT --resume

which builds the datasets that are missing, trains the tokenizer once, tokenizes once,
fits each stage's steps into its share of the minutes from its speed measured after a
warm-up, scores the 300-example test sample of every test set (greedy, the release's
metric) and writes the model card (codeexecutor/pretrain.py). This script then gathers what
a comparison of recipes wants into benchmarks/results/quality-<device>[-variant].json:
the scores with their breakdowns (originals and mutants of held-out problems apart,
runtime errors, SingleLine's copied against computed answers), the steps each stage got
and the learning curves (quality-<device>-curves.png). The variant's options name the
result file, so that no variant overwrites the recipe's.

A budget buys more steps on a faster machine; `--steps SL,TUT,CN` (a committed run's
`steps`) trains exactly that run anywhere, to compare its numbers.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys

from _common import RESULTS, ROOT, busy_share, device_label, fast_bf16, machine

from codeexecutor.modeling.choices import POSITIONS as POSITION_KINDS

RECIPE = ROOT / "curricula" / "recipes" / "cpu-hour.yaml"  # the model this run trains, bar the steps
STAGES = ("singleline", "tutorial", "codenet")  # a quality recipe's stages
FUNCTION_ERRORS_SHARE = 1 / 3  # the crashing functions' weight against the clean ones', as stage 3 weighs CodeNet's
MAX_TOKENS = {"cpu": 1024, "gpu": 6144}  # token budget per step: the recipe's on a CPU; a GPU wants full batches
BUSY = 0.25  # warn above this share of CPU time taken by other processes before the training plans its steps
AUTOCAST = "bf16" if fast_bf16() else None  # bf16 forward passes where the CPU has native bf16 matmuls
DS_CONFIG = "single.json"  # one process, no ZeRO: nothing to partition, and ZeRO-2's buffers cost a fifth of a step


def load_recipe(path: str | os.PathLike = RECIPE) -> dict:
    import yaml

    try:
        with open(path) as f:
            recipe = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        refuse(f"cannot read the recipe {path} ({str(exc).splitlines()[0]}); pass a recipe YAML, e.g. {RECIPE}")
    names = [st.get("name") for st in recipe.get("stages", [])] if isinstance(recipe, dict) else []
    if names != list(STAGES):
        refuse(f"{path}: a quality recipe has the stages {', '.join(STAGES)} (found {names})")
    return recipe


def refuse(message: str) -> None:
    """Bad input: one line on stderr, exit status 2."""
    print(f"bench_quality: {message}", file=sys.stderr)
    sys.exit(2)


def pretrain(recipe_path: str, sets: list[str], out: str, minutes: float | None, log, *extra: str) -> None:
    """`codeexecutor pretrain` on the recipe with this run's `--set` fields, carrying on a
    run already in `out`."""
    cmd = [
        sys.executable,
        "-m",
        "codeexecutor",
        "pretrain",
        "--recipe",
        os.path.abspath(recipe_path),
        "--out",
        out,
        "--resume",
        "--ds-config",
        str(ROOT / "ds_configs" / DS_CONFIG),
        *extra,
    ] + [f"--set={item}" for item in sets]
    cmd += ["--minutes", f"{minutes:g}"] if minutes else []
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        refuse(
            f"codeexecutor pretrain failed (exit {proc.returncode}): see {log.name}; run the same command again to "
            "carry on where it stopped"
        )


def gathered_scores(out: str) -> tuple[dict, list[dict]]:
    """(one report of every scored build: datasets and runtime errors merged, the
    predictions of all), from pretrain's scores (OUT/scores/BUILD.json and its predictions)."""
    report: dict = {"datasets": {}}
    predictions: list[dict] = []
    scores = os.path.join(out, "scores")
    for name in sorted(os.listdir(scores)):
        if not name.endswith(".json") or name == "scores.json" or name.endswith(".predictions.json"):
            continue
        part = json.load(open(os.path.join(scores, name)))
        report["datasets"].update(part["datasets"])
        for key in ("metric", "beam", "runtime_errors", "runtime_errors_functions"):
            if part.get(key) is not None:
                report[key] = part[key]
        lines = os.path.join(scores, name[:-5] + ".predictions.jsonl")
        if os.path.exists(lines):
            predictions += [json.loads(line) for line in open(lines)]
    return report, predictions


def singleline_breakdown(predictions: list[dict], data: str) -> dict:
    """SingleLine test accuracy (the release's metric) apart for examples whose every
    value after the line appears verbatim in the code (`copy`: the line leaves the values
    or picks one of them, e.g. `mn = min(mn, x)`) and the rest (`computed`: `c %= 2019`)."""
    import datasets

    from codeexecutor.modeling.trace_metrics import release_singleline_metrics

    rows = {r["id"]: r for r in datasets.load_from_disk(os.path.join(data, "singleline", "singleline"))["test"]}
    groups: dict[str, tuple[list, list]] = {"copy": ([], []), "computed": ([], [])}
    for p in predictions:
        row = rows.get(p["id"]) if p["dataset"] == "singleline" else None
        if row is None:
            continue
        state = json.loads(row["steps"])[-1]["state"]
        kind = "copy" if all(v in row["code"] for v in state.values()) else "computed"
        groups[kind][0].append(p["prediction"])
        groups[kind][1].append(p["gold"])
    return {
        kind: {
            "examples": len(golds),
            "trace_accuracy": release_singleline_metrics(preds, golds)["trace_accuracy"] if golds else None,
        }
        for kind, (preds, golds) in groups.items()
    }


def stage_summary(run: str) -> dict:
    rows = [json.loads(line) for line in open(os.path.join(run, "train_log.jsonl"))]
    out = {}
    for r in rows:
        if "loss" in r:
            out.setdefault(r["stage"], {}).update(
                steps_logged_to=r["step"],
                real_tokens=r["stage_tokens"],
                examples_seen=r.get("stage_examples"),
                seconds=round(r["stage_seconds"], 1),
                final_loss=r["loss"],
                padding_share=r["padding_share"],
            )
    return out


def result_name(
    device: str, recipe: dict, model: dict, errors_weight: float | None = None, functions_weight: float | None = None
) -> str:
    """quality-<device>, with the preset, positions, trace state, vocabulary and stage 3's
    crash and functions weights appended where they differ from the recipe's, so that a
    variant's run never overwrites the recipe's results."""
    base = recipe["model"]
    changed = lambda key: key in model and model[key] != base.get(key)  # noqa: E731
    parts = [f"quality-{device}"] + [str(model[k]) for k in ("preset", "positions", "trace_state") if changed(k)]
    order = model.get("step_order", base.get("step_order", "start"))
    parts += [f"order-{order}"] if order != base.get("step_order", "start") else []
    window = model.get("code_window", base.get("code_window", "head"))
    parts += [f"window-{window}"] if window != base.get("code_window", "head") else []
    parts += [f"vocab{model['vocab_size']}"] if changed("vocab_size") else []
    parts += [f"excw{model['exception_weight']:g}"] if changed("exception_weight") else []
    parts += [f"errors{errors_weight:g}"] if errors_weight is not None else []
    return "-".join(parts + ([f"functions{functions_weight:g}"] if functions_weight is not None else []))


def stale_build(data: str) -> bool:
    """True when the CodeNetMut build under `data` has no call depths (traced before they existed)."""
    import datasets

    from codeexecutor.modeling.profiles import lacks_depth

    return lacks_depth(datasets.load_from_disk(os.path.join(data, "codenetmut", "codenetmut"))["train"])


def recipe_functions_weight(recipe: dict) -> float:
    return next(
        (
            src.get("weight", 1.0)
            for src in recipe["stages"][-1]["sources"]
            if src["path"].endswith("functions/functions")
        ),
        0.0,
    )


def recipe_errors_weight(recipe: dict) -> float | None:
    return next(
        (
            src.get("weight", 1.0)
            for src in recipe["stages"][-1]["sources"]
            if src["path"].endswith("codenetmut/errors")
        ),
        None,
    )


def options(args, recipe: dict, device: str) -> tuple[dict, list[str]]:
    """(the model fields this run changes, every field it sets over the recipe as
    `pretrain --set` items): those given on the command line, each stage's steps and
    warm-up (a tenth, at most 200) for `--steps`, the tokens per step on a GPU, and bf16
    autocast where the CPU has it."""
    model = {
        k: v
        for k, v in (
            ("preset", args.preset),
            ("dropout", args.dropout),
            ("positions", args.positions),
            ("vocab_size", args.vocab_size),
            ("trace_state", args.state),
            ("step_order", args.order),
            ("code_window", args.code_window),
            ("exception_weight", args.exception_weight),
        )
        if v is not None
    }
    if args.split_digits:
        model["split_digits"] = True
    train = {"eval_examples": args.valid_examples, "eval_decode_examples": args.valid_examples // 4}
    if args.max_tokens or device != "cpu":
        train["max_tokens"] = args.max_tokens or MAX_TOKENS["gpu"]
    if args.autocast:
        train["autocast"] = args.autocast
    fields = {
        **{f"model.{k}": v for k, v in model.items()},
        **{f"train.{k}": v for k, v in train.items()},
        "score.limit": args.eval_limit,
    }
    if args.data:
        fields["data.dir"] = args.data  # the stages' paths are relative to it
    for build, field, value in (
        ("codenetmut", "mutants", args.mutants),
        ("codenetmut", "codenet", args.corpora),
        ("codenetmut", "limit", args.codenet_limit),
        ("tutorial", "sources", args.tutorial_sources),
        ("singleline", "limit", args.singleline_limit),
        ("singleline", "augment", args.augment),
        ("functions", "from", args.function_corpora),
    ):
        if value is not None:
            fields[f"data.builds.{build}.{field}"] = value
    for build in (recipe.get("data") or {}).get("builds") or {} if args.workers else ():
        fields[f"data.builds.{build}.workers"] = args.workers
    for stage in recipe["stages"]:
        name = stage["name"]
        if args.lr is not None:  # stage 1's rate, the later stages' scaled alike
            fields[f"stages.{name}.lr"] = stage["lr"] * args.lr / recipe["stages"][0]["lr"]
        if args.steps:
            fields[f"stages.{name}.steps"] = args.steps[name]
            fields[f"stages.{name}.warmup"] = max(1, min(200, args.steps[name] // 10))
    last = recipe["stages"][-1]["name"]
    if args.errors_weight is not None:
        fields[f"stages.{last}.sources.codenetmut/errors.weight"] = args.errors_weight
    if args.functions_weight is not None:  # its crashes a third of it; 0 leaves both out
        fields[f"stages.{last}.sources.functions/functions.weight"] = args.functions_weight
        fields[f"stages.{last}.sources.functions/functions_errors.weight"] = round(
            args.functions_weight * FUNCTION_ERRORS_SHARE, 4
        )
    return model, [f"{key}={json.dumps(value)}" for key, value in fields.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--budget-minutes",
        type=float,
        help="wall-clock budget of the training (all stages, mining "
        "included); needed unless --steps, --build-only or --score-only",
    )
    ap.add_argument(
        "--recipe",
        default=str(RECIPE),
        help=f"the recipe to train, whose steps the budget replaces (default {RECIPE.relative_to(ROOT)})",
    )
    ap.add_argument(
        "--preset",
        help="a model size named in codeexecutor/modeling/model.py PRESETS (default: the recipe's; "
        "mini: a CPU hour; small: one GPU)",
    )
    ap.add_argument(
        "--data",
        help="the recipe's data.dir: built datasets, reused when present, built there where "
        "missing (default: the recipe's)",
    )
    ap.add_argument(
        "--out",
        "--run",
        dest="out",
        help="the run's folder, `codeexecutor pretrain --out` (default "
        "runs/quality/<result name>; the model is OUT/run/final)",
    )
    ap.add_argument(
        "--lr", type=float, help="stage 1's learning rate, the later stages' scaled alike (default: the recipe's)"
    )
    ap.add_argument(
        "--max-tokens",
        type=int,
        help=f"token budget per micro-batch (default: the recipe's on a CPU, {MAX_TOKENS['gpu']} on a GPU)",
    )
    ap.add_argument(
        "--mutants", type=int, help="mutation attempts per CodeNet program when building (default: the recipe's build)"
    )
    ap.add_argument(
        "--singleline-limit", type=int, help="SingleLine candidates kept when building (default: the recipe's)"
    )
    ap.add_argument(
        "--augment",
        type=int,
        metavar="K",
        help="variants (new names and values) of every SingleLine training program (default: the recipe's)",
    )
    ap.add_argument("--eval-limit", type=int, default=300, help="test examples per dataset (a fixed sample)")
    ap.add_argument(
        "--corpora",
        nargs="+",
        metavar="DIR",
        help="CodeNet-layout corpora to build CodeNetMut from (default: the recipe's, the shared atcoder ones)",
    )
    ap.add_argument("--tutorial-sources", metavar="DIR", help="the tutorial's sources (default: the recipe's)")
    ap.add_argument("--codenet-limit", type=int, help="build from at most this many programs (a quick build)")
    ap.add_argument("--workers", type=int, help="sandbox workers of the builds (default: each build's)")
    ap.add_argument("--build-only", action="store_true", help="build the datasets and stop")
    ap.add_argument("--split-digits", action="store_true", help="train the tokenizer with one token per digit")
    ap.add_argument("--dropout", type=float, help="hidden and attention dropout (default: the recipe's)")
    ap.add_argument(
        "--autocast",
        choices=["bf16", "none"],
        default=AUTOCAST or "none",
        help=f"forward passes under bfloat16 autocast, float32 weights (default here: {AUTOCAST or 'none'})",
    )
    ap.add_argument(
        "--positions",
        choices=POSITION_KINDS,
        help="the release's learned absolute positions or rotary ones (modeling/rotary.py; default: the recipe's)",
    )
    ap.add_argument("--vocab-size", type=int, help="the trained BPE tokenizer's vocabulary (default: the recipe's)")
    ap.add_argument(
        "--valid-examples",
        type=int,
        default=48,
        help="valid examples scored at each stage end (a quarter of them decoded); 0: none",
    )
    ap.add_argument(
        "--steps",
        metavar="SL,TUT,CN",
        help="the steps of the three stages, no time budget: reproduces a "
        "committed run (its `steps`) on a machine of another speed",
    )
    ap.add_argument(
        "--state",
        choices=["full", "delta"],
        help="trace steps write the whole state (full) or only what changed (delta: docs/trace-format.md; "
        "default: the recipe's)",
    )
    ap.add_argument(
        "--order",
        choices=["start", "end"],
        help="a line that calls a function writes its step before the call's steps (start, the release's) "
        "or after them (end: docs/trace-format.md; default: the recipe's)",
    )
    ap.add_argument(
        "--score-only",
        action="store_true",
        help="score the finished run in --out again (its final model), without training: for a run "
        "whose scoring was interrupted",
    )
    ap.add_argument(
        "--code-window",
        choices=["head", "ends"],
        help="a program longer than the code length is read from its start (head, the release's) or from "
        "its start and its last lines (ends: docs/trace-format.md; default: the recipe's)",
    )
    ap.add_argument(
        "--exception-weight",
        type=float,
        help="loss weight of the `<exception>` token, a crash's first "
        "(default: the recipe's, else every content token's 10)",
    )
    ap.add_argument(
        "--errors-weight", type=float, help="stage 3's weight of the crashing programs (default: the recipe's)"
    )
    ap.add_argument(
        "--functions-weight",
        type=float,
        help="stage 3's weight of the functions set (functions called on "
        "their doctest and test inputs; its crashes weigh a third of that; 0: left out; default: the recipe's)",
    )
    ap.add_argument(
        "--function-corpora",
        nargs="+",
        metavar="DIR",
        help="folders of modules with doctests to build the functions set from (default: the recipe's)",
    )
    args = ap.parse_args()
    recipe = load_recipe(args.recipe)
    for flag, value in (("--errors-weight", args.errors_weight), ("--functions-weight", args.functions_weight)):
        if value is not None and not 0 <= value <= 10:
            refuse(f"{flag} takes a weight between 0 and 10 (got {value:g})")
    if args.lr is not None and args.lr <= 0:
        refuse(f"--lr must be positive (got {args.lr:g})")
    if args.steps:
        try:
            args.steps = dict(zip(STAGES, (int(n) for n in args.steps.split(",")), strict=True))
        except ValueError:
            refuse(f"--steps takes three step counts, e.g. 983,462,463 (got {args.steps!r})")
    if not (args.budget_minutes or args.steps or args.build_only or args.score_only):
        refuse("give --budget-minutes N (or --steps SL,TUT,CN, --build-only, --score-only)")
    args.autocast = None if args.autocast == "none" else args.autocast
    device = device_label()
    model_opts, sets = options(args, recipe, device)
    from codeexecutor.errors import ConfigError
    from codeexecutor.training.recipe import apply_overrides

    try:
        variant = apply_overrides(copy.deepcopy(recipe), sets)  # what pretrain trains: for the result's fields
    except ConfigError as exc:
        refuse(f"{args.recipe}: {exc}")
    name = result_name(
        device,
        recipe,
        model_opts,
        args.errors_weight if args.errors_weight != recipe_errors_weight(recipe) else None,
        args.functions_weight if args.functions_weight not in (None, recipe_functions_weight(recipe)) else None,
    )
    out = os.path.abspath(args.out or os.path.join(ROOT, "runs", "quality", name))
    os.makedirs(out, exist_ok=True)
    data = os.path.join(ROOT, variant.get("data", {}).get("dir", "."))
    order = variant["model"].get("step_order", "start")
    if order == "end" and os.path.isdir(os.path.join(data, "codenetmut", "codenetmut")) and stale_build(data):
        refuse(
            f"{data} was built before steps carried their call depth, which step order `end` needs: move it "
            "away and run again to rebuild it (or give --data a new folder)"
        )
    from codeexecutor.progress import quiet_libraries

    quiet_libraries()
    log = open(os.path.join(out, "bench_quality.log"), "a")
    if args.build_only:
        pretrain(args.recipe, sets, out, None, log, "--until", "build")
        return
    if args.score_only:
        record_path = os.path.join(out, "pretrain.json")
        if not os.path.exists(os.path.join(out, "run", "final", "config.json")) or not os.path.exists(record_path):
            refuse(f"--score-only needs a finished run in {out} (its run/final model): train it first")
        record = json.load(open(record_path))
        for phase in ("score", "card"):
            record["phases"].pop(phase, None)
        with open(record_path, "w") as f:
            json.dump(record, f, indent=2)
    busy = busy_share()
    if busy is not None and busy > BUSY and not args.score_only:
        print(
            f"bench_quality: warning: {100 * busy:.0f}% of this machine's CPU time goes to other processes; the "
            "training will measure slower steps and plan fewer of them, so this result will not compare with a "
            "run on a quiet machine (stop the other work first)",
            file=sys.stderr,
            flush=True,
        )
    minutes = None if args.steps else args.budget_minutes
    pretrain(args.recipe, sets, out, minutes, log)
    record = json.load(open(os.path.join(out, "pretrain.json")))
    report, predictions = gathered_scores(out)
    from codeexecutor.modeling.loading import load_model
    from eval.report import table3

    run = os.path.join(out, "run")
    model = os.path.join(run, "final")
    params = sum(p.numel() for p in load_model(model).parameters())
    phases = record["phases"]
    plan_path = os.path.join(run, "plan.json")
    stages = stage_summary(run)
    train_s = sum(s["seconds"] for s in stages.values())
    result = {
        "device": device,
        "machine": machine(),
        "state": variant["model"]["trace_state"],
        "step_order": order,
        "code_window": variant["model"].get("code_window", "head"),
        "exception_weight": variant["model"].get("exception_weight"),
        "recipe": os.path.relpath(args.recipe, ROOT),
        "sets": sets,
        "preset": variant["model"]["preset"],
        "parameters": params,
        "budget_minutes": args.budget_minutes,
        "training_seconds": round(train_s, 1),
        "pretrain_phase_seconds": {k: v.get("seconds") for k, v in phases.items()},
        "busy_before_training": busy,
        "plan": json.load(open(plan_path)) if os.path.exists(plan_path) else None,
        "steps": phases.get("train", {}).get("steps"),
        "stages": stages,
        "stage_shares": {st["name"]: st.get("share") for st in variant["stages"]},
        "lr": [st["lr"] for st in variant["stages"]],
        "max_tokens": variant["train"]["max_tokens"],
        "split_digits": variant["model"].get("split_digits", False),
        "dropout": variant["model"].get("dropout"),
        "autocast": variant["train"].get("autocast"),
        "positions": variant["model"].get("positions"),
        "vocab_size": variant["model"]["vocab_size"],
        "functions_weight": recipe_functions_weight(variant),
        "stage_mixes": {
            st["name"]: {src["path"].rsplit("/", 1)[-1]: src.get("weight", 1.0) for src in st["sources"]}
            for st in variant["stages"]
        },
        "data": variant.get("data"),
        "command": " ".join(["benchmarks/bench_quality.py"] + sys.argv[1:]),
        "metric": report.get("metric"),
        "decoding": "greedy (beam 1)",
        "eval_limit_per_set": variant.get("score", {}).get("limit"),
        "test": {
            name: {
                "examples": e["examples"],
                **{k: v for k, v in e["table3"].items() if k not in ("programs",)},
                "by_kind": e.get("by_kind", {}),
                "ours_aligned": e["aligned"],
                "unfinished": e.get("unfinished"),
                **({"expansion": e["expansion"]} if "expansion" in e else {}),
            }
            for name, e in report["datasets"].items()
        },
        "singleline_by_answer": singleline_breakdown(predictions, data),
        "runtime_errors": report.get("runtime_errors"),
        "runtime_errors_functions": report.get("runtime_errors_functions"),
        "model": os.path.relpath(model, ROOT),
    }
    if args.score_only:
        result["note"] = "scored again after training (--score-only)"
    if minutes and train_s > minutes * 60 * 1.05:
        result["note"] = f"training took {train_s / 60:.1f} minutes against a budget of {minutes:g}"
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    if os.path.exists(os.path.join(run, "loss.png")):
        shutil.copy(os.path.join(run, "loss.png"), RESULTS / f"{name}-curves.png")
    print(table3(report))
    print(f"report: {path}")


if __name__ == "__main__":
    main()
