"""The quality run: how well does a model trained within a wall-clock budget execute code?

    .venv/bin/python benchmarks/bench_quality.py --budget-minutes 60 [--preset mini]

1. Builds (or reuses, `--data`) the three datasets from the shared corpora: CodeNetMut
   from atcoder-python and atcoder-python-2 (with the error-trace set), Tutorial from the
   tutorial sources, SingleLine from the CodeNetMut traces.
2. Trains the recipe (`--recipe`, default curricula/recipes/cpu-hour.yaml: the model,
   its settings and the three stages) within the budget: a short calibration measures
   seconds per step of each stage at the run's token budget (a step of long CodeNet
   traces costs more than one of SingleLine lines), then the steps of each stage are its
   share of the budget (STAGE_SHARES), less the estimated mining time; after each stage
   the stages left are re-planned from the speed measured. Options given on the command
   line (`--preset`, `--state`, ...) override the recipe's fields and name the result file.
3. Evaluates the final model on every test split (greedy, `--eval-limit` examples per
   set, a fixed sample): Table 3 with the release's metric, originals and mutants of
   held-out problems apart, runtime-error detection / localisation / kind on the
   crashing test programs against the CodeNetMut test programs.
4. Writes benchmarks/results/quality-<device>.json and the learning curves
   (quality-<device>-curves.png); the model stays in the run folder (`model` in the JSON).

A budget buys more steps on a faster machine; `--steps SL,TUT,CN` (a committed run's
`steps`) trains exactly that run anywhere, to compare its numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from _common import RESULTS, ROOT, busy_share, device_label, fast_bf16, machine

from codeexecutor.modeling.rotary import POSITIONS as POSITION_KINDS

SHARED = ROOT.parent / "shared" / "data"
CORPORA = [SHARED / "atcoder-python", SHARED / "atcoder-python-2"]
FUNCTION_CORPORA = [SHARED / "thealgorithms-python", SHARED / "keon-algorithms"]
FUNCTION_MUTANTS = (3, 2)  # mutation attempts on a program's definitions, and on its call's arguments
FUNCTION_ERRORS_SHARE = 1 / 3  # the crashing functions' weight against the clean ones', as stage 3 weighs CodeNet's
RECIPE = ROOT / "curricula" / "recipes" / "cpu-hour.yaml"  # the model this run trains, bar the steps
RECIPE_DATA = "runs/quality/data-aug3"  # the recipe's data.dir, which --data replaces
STAGE_SHARES = {"singleline": 0.55, "tutorial": 0.2, "codenet": 0.25}  # the budget's share per stage; SingleLine is the CPU hour's target
AUGMENT = 3  # SingleLine training variants per program (curricula/augment.py): three epochs of the real ones over-fit
MAX_TOKENS = {"cpu": 1024, "gpu": 6144}  # token budget per step: the recipe's on a CPU; a GPU wants full batches
BUSY = 0.25  # warn above this share of CPU time taken by other processes before the calibration
MINING_POOL = 32768  # SingleLine examples scored for stage 2's hardest third: a forward pass each
AUTOCAST = "bf16" if fast_bf16() else None  # bf16 forward passes where the CPU has native bf16 matmuls
DS_CONFIG = "single.json"  # one process, no ZeRO: nothing to partition, and ZeRO-2's buffers cost a fifth of a step


def load_recipe(path: str | os.PathLike = RECIPE) -> dict:
    import yaml

    try:
        with open(path) as f:
            recipe = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        refuse(f"cannot read the recipe {path} ({str(exc).splitlines()[0]}); pass a curriculum YAML, e.g. {RECIPE}")
    names = [st.get("name") for st in recipe.get("stages", [])] if isinstance(recipe, dict) else []
    if names != list(STAGE_SHARES):
        refuse(f"{path}: a quality recipe has the stages {', '.join(STAGE_SHARES)} (found {names})")
    return recipe


def refuse(message: str) -> None:
    """Bad input: one line on stderr, exit status 2."""
    print(f"bench_quality: {message}", file=sys.stderr)
    sys.exit(2)


def sh(args: list[str], log) -> None:
    print("$", " ".join(args), flush=True)
    subprocess.run(args, check=True, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def build(data: str, log, mutants: int, singleline_limit: int, corpora: list[str], tutorial: str,
          codenet_limit: int | None = None, workers: int = 2, augment: int = 0, functions: list[str] = ()) -> dict:
    cli = [sys.executable, "-m", "codeexecutor", "build"]
    corpora = [c for c in corpora if os.path.isdir(c)]
    if not corpora:
        sys.exit("bench_quality: no CodeNet-layout corpora (default: ../shared/data/atcoder-python, atcoder-python-2)")
    if not os.path.isdir(os.path.join(data, "codenetmut", "codenetmut")):
        sh(cli + ["codenetmut", "--codenet", *corpora, "--out", f"{data}/codenetmut", "--mutants", str(mutants),
                  "--workers", str(workers)] + (["--limit", str(codenet_limit)] if codenet_limit else []), log)
    if not os.path.isdir(os.path.join(data, "tutorial", "tutorial")):
        sh(cli + ["tutorial", "--sources", tutorial, "--out", f"{data}/tutorial", "--mutants", "100", "--workers", str(workers)], log)
    if os.path.isdir(os.path.join(data, "singleline", "singleline")):
        from curricula.singleline import built_params

        built = built_params(os.path.join(data, "singleline")).get("augment", 0)
        if built != augment:
            refuse(f"{data}/singleline was built with --augment {built}, this run asks for {augment}: "
                   f"pass --augment {built}, or delete {data}/singleline to build it again")
    else:
        sh(cli + ["singleline", "--from", f"{data}/codenetmut", "--out", f"{data}/singleline", "--limit", str(singleline_limit),
                  "--workers", str(workers), "--augment", str(augment)], log)
    functions = [c for c in functions if os.path.isdir(c)]
    if functions and not os.path.isdir(os.path.join(data, "functions", "functions")):
        sh(cli + ["functions", "--from", *functions, "--out", f"{data}/functions", "--workers", str(workers),
                  "--mutants", str(FUNCTION_MUTANTS[0]), "--input-mutants", str(FUNCTION_MUTANTS[1])], log)
    names = ("codenetmut", "tutorial", "singleline") + (("functions",) if os.path.isdir(os.path.join(data, "functions", "functions")) else ())
    return {name: json.load(open(os.path.join(data, name, "stats.json")))["datasets"] for name in names}


def curriculum(recipe: dict, data: str, out: str, steps: dict[str, int], hardest: int, mine_from: int | None = None,
               model: dict | None = None, train: dict | None = None, errors_weight: float | None = None,
               functions_weight: float | None = None, functions_stage: float | None = None) -> dict:
    """The recipe with this run's steps (warmup a tenth of a stage, at most 200), its data
    folder, run folder and mining sizes, and the options given (`model`, `train`: fields
    to override; `errors_weight`: stage 3's weight of the crashing programs;
    `functions_weight`: stage 3's weight of the functions set, its crashes a third of
    that, 0 leaving both out; `functions_stage`: the share of stage 3's steps that
    become a fourth stage, `split_functions_stage`)."""
    import copy

    cur = copy.deepcopy(recipe)
    cur["model"].update(model or {})
    cur["train"].update(output_dir=out, **(train or {}))
    cur.setdefault("data", {})["dir"] = data  # the stages' paths are relative to it
    for stage in cur["stages"]:
        n = steps[stage["name"]]
        stage.update(steps=n, warmup=max(1, min(200, n // 10)))
        for src in stage["sources"]:
            if "hardest" in src:
                src["hardest"] = hardest
                src.pop("mine_from", None)
                if mine_from:
                    src["mine_from"] = mine_from
            if errors_weight is not None and src["path"].endswith("codenetmut/errors"):
                src["weight"] = errors_weight
    if functions_weight is not None:
        last = cur["stages"][-1]
        last["sources"] = [src for src in last["sources"] if not functions_source(src)]
        if functions_weight > 0:
            last["sources"] += [
                {"path": "functions/functions", "task": "codenet", "weight": functions_weight},
                {"path": "functions/functions_errors", "task": "codenet",
                 "weight": round(functions_weight * FUNCTION_ERRORS_SHARE, 4)}]
    if functions_stage is not None:
        split_functions_stage(cur, functions_stage)
    return cur


def functions_source(src: dict) -> bool:
    """Whether a stage's source is of the functions build (its path under data.dir: functions/...)."""
    return ("/" + src["path"]).find("/functions/") >= 0


def split_functions_stage(cur: dict, share: float) -> None:
    """Stage 3 (in place) becomes two: its first 1 - `share` of steps without the
    functions set, then a `functions` stage of the rest where the functions set takes the
    examples it had in the whole of stage 3, and the other sources the rest in stage 3's
    proportions. Every source is drawn as often as before (in expectation); only when
    the functions come changes. A share below the functions set's part of stage 3 cannot
    hold its examples and is refused."""
    import copy

    last = cur["stages"][-1]
    is_functions = functions_source
    total = sum(src.get("weight", 1.0) for src in last["sources"])
    part = sum(src.get("weight", 1.0) for src in last["sources"] if is_functions(src)) / total
    if not part:
        refuse("--functions-stage needs the functions set in stage 3 (a --functions-weight above 0)")
    if not part < share < 1:
        refuse(f"--functions-stage takes a share of stage 3's steps between the functions set's part of it "
               f"({part:.3f}) and 1 (got {share:g})")
    steps = last["steps"]
    tail = copy.deepcopy(last)
    tail_steps = max(1, round(steps * share))
    tail.update(name="functions", steps=tail_steps, warmup=max(1, min(200, tail_steps // 10)))
    head_steps = max(1, steps - tail_steps)
    last.update(steps=head_steps, warmup=max(1, min(200, head_steps // 10)))
    last["sources"] = [src for src in last["sources"] if not is_functions(src)]
    functions_share = part / share  # the tail's share of functions examples: all of stage 3's, in fewer steps
    rest = 1 - part
    for src in tail["sources"]:
        w = src.get("weight", 1.0) / total
        src["weight"] = round(w / part * functions_share if is_functions(src) else w / rest * (1 - functions_share), 4)
    cur["stages"].append(tail)


def train(cur: dict, run: str, log, max_steps: int | None = None) -> float:
    import yaml

    os.makedirs(run, exist_ok=True)
    path = os.path.join(run, "curriculum.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(cur, f)
    start = time.perf_counter()
    args = [sys.executable, "-m", "codeexecutor.training", "--curriculum", path, "--ds-config", str(ROOT / "ds_configs" / DS_CONFIG)]
    sh(args + (["--max-steps", str(max_steps)] if max_steps else []), log)
    return time.perf_counter() - start


def plan(seconds: float, per_step: dict[str, float], shares: dict[str, float], mining_s: float = 0.0) -> dict[str, int]:
    """Steps of each stage in `shares` filling `seconds` in proportion to the shares, at
    `per_step` seconds a step; the tutorial stage first pays for mining (`mining_s`)."""
    total = sum(shares.values())
    return {name: max(1, int((seconds * share / total - (mining_s if name == "tutorial" else 0)) / per_step[name]))
            for name, share in shares.items()}


def replan(rest: list[str], seconds_left: float, per_step: dict[str, float], speed: float, overhead_s: float,
           mining_s: float) -> dict[str, int]:
    """Steps of the stages still to train (`rest`) in the seconds left: each stage is
    `speed` times slower than calibrated (the measured over the calibrated seconds per step
    of the stage just trained) and costs `overhead_s` besides its steps (start-up, the
    stage-end evaluation and export, as measured)."""
    room = max(0.0, seconds_left - overhead_s * len(rest))
    return plan(room, {n: per_step[n] * speed for n in rest}, {n: STAGE_SHARES[n] for n in rest},
                mining_s * speed if "tutorial" in rest else 0.0)


def train_in_budget(make_cur, run: str, log, budget_s: float, per_step: dict[str, float], steps: dict[str, int],
                    mining_s: float, clock=time.perf_counter) -> tuple[float, dict[str, int], list[dict]]:
    """Train the stages one process each (each resumes from the previous stage's end
    checkpoint) and after each re-plan the steps of the stages left from the time left and
    the speed measured. The calibration samples a few seconds of a shared machine whose
    speed drifts: one run calibrated at 0.140 s per SingleLine step, then took 0.179 s and
    overran a 60-minute budget by 12 minutes. Stage 1 itself still runs its planned steps.
    Returns (training seconds, the steps trained, the re-plans)."""
    steps, names, replans = dict(steps), list(steps), []
    start = clock()
    for i, name in enumerate(names):
        t = clock()
        train(make_cur(steps), run, log, max_steps=sum(steps[n] for n in names[: i + 1]))
        if i + 1 == len(names):
            break
        wall = clock() - t
        ran = stage_summary(run)[name]["seconds"]  # the steps alone: no start-up, mining, evaluation or export
        measured = ran / steps[name]
        speed = measured / per_step[name]
        overhead = max(0.0, wall - ran - (mining_s * speed if name == "tutorial" else 0.0))
        left = budget_s - (clock() - start)
        steps.update(replan(names[i + 1:], left, per_step, speed, overhead, mining_s))
        replans.append({"after": name, "seconds_per_step": round(measured, 4), "speed_vs_calibration": round(speed, 3),
                        "overhead_seconds": round(overhead, 1), "seconds_left": round(left, 1),
                        "steps": {n: steps[n] for n in names[i + 1:]}})
        print(f"after {name}: {speed:.2f}x the calibrated step time, {left / 60:.1f} min left; "
              f"re-planned {replans[-1]['steps']}", flush=True)
    return clock() - start, steps, replans


CALIBRATION_STEPS = {"singleline": 10, "tutorial": 8, "codenet": 8}  # at 6,144 tokens per step


def calibration_steps(max_tokens: int) -> dict[str, int]:
    """As many calibration tokens at any budget: 60 / 48 / 48 steps at 1,024 tokens."""
    return {name: max(n, round(n * 6144 / max_tokens)) for name, n in CALIBRATION_STEPS.items()}


def calibrate(recipe: dict, data: str, work: str, hardest: int, log, model: dict, train_opts: dict,
              functions_weight: float | None = None) -> dict[str, float]:
    """Seconds per optimizer step of each stage at this token budget, from some steps of
    each: a CodeNet step with its long traces costs more than a SingleLine step. The first
    step of every stage, which pays for the stage's set-up, is left out (kept in, eight
    0.35 s steps measured 0.45 s, and a 60-minute run trained 45). Stage 2 mines as many
    hardest SingleLine examples as the run will (at most 4,096): from a handful, its
    SingleLine batches would be a few rows, and its steps cheap (1.04 s where the run then
    took 1.8). It scores twice that many, not the run's whole pool: the mining's time is
    estimated apart. The run's tokenizer is trained here, once."""
    steps = calibration_steps(train_opts.get("max_tokens") or recipe["train"]["max_tokens"])
    hardest = min(hardest, 4096)
    cur = curriculum(recipe, data, f"{work}/calibration", steps, hardest, 2 * hardest, model,
                     {**train_opts, "eval_examples": 0, "log_every": 1}, functions_weight=functions_weight)
    shutil.rmtree(f"{work}/calibration", ignore_errors=True)
    train(cur, f"{work}/calibration", log)
    return calibration_rates(f"{work}/calibration/train_log.jsonl")


def calibration_rates(log_path: str) -> dict[str, float]:
    """Seconds per step of each stage in a calibration's train log, its first step left out."""
    rows = [json.loads(line) for line in open(log_path) if '"loss"' in line]
    out = {}
    for name in STAGE_SHARES:
        stage = [r for r in rows if r["stage"] == name]
        out[name] = (stage[-1]["stage_seconds"] - stage[0]["stage_seconds"]) / (len(stage) - 1)
    return out


def finished_run(run: str, work: str) -> tuple[dict[str, float], float, dict[str, int]]:
    """(calibration seconds per step, training seconds, steps per stage) of a run trained
    before, read from its logs: what `--score-only` reports beside a new evaluation. The
    training seconds are the stages' own (start-ups and stage-end evaluations left out)."""
    log_path, calibration = os.path.join(run, "train_log.jsonl"), os.path.join(work, "calibration", "train_log.jsonl")
    if not os.path.exists(os.path.join(run, "final", "config.json")) or not os.path.exists(log_path):
        refuse(f"--score-only needs a finished run: {run}/final and {run}/train_log.jsonl (train it first, without the flag)")
    if not os.path.exists(calibration):
        refuse(f"--score-only needs the run's calibration log {calibration} (it sits beside the run folder)")
    last: dict[str, dict] = {}
    for line in open(log_path):
        row = json.loads(line)
        if "loss" in row:
            last[row["stage"]] = row
    steps, before = {}, 0
    for name in STAGE_SHARES:
        if name not in last:
            refuse(f"{log_path} has no {name} stage: the run did not finish (train it again, without --score-only)")
        steps[name], before = last[name]["step"] - before, last[name]["step"]
    return calibration_rates(calibration), sum(r["stage_seconds"] for r in last.values()), steps


def singleline_breakdown(predictions: list[dict], data: str) -> dict:
    """SingleLine test accuracy (the release's metric) apart for examples whose every
    value after the line appears verbatim in the code (`copy`: the line leaves the values
    or picks one of them, e.g. `mn = min(mn, x)`) and the rest (`computed`: `c %= 2019`)."""
    import datasets

    from eval.trace_metrics import release_singleline_metrics

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
    return {kind: {"examples": len(golds), "trace_accuracy": release_singleline_metrics(preds, golds)["trace_accuracy"] if golds else None}
            for kind, (preds, golds) in groups.items()}


def stage_summary(run: str) -> dict:
    rows = [json.loads(line) for line in open(os.path.join(run, "train_log.jsonl"))]
    out = {}
    for r in rows:
        if "loss" in r:
            out.setdefault(r["stage"], {}).update(steps_logged_to=r["step"], real_tokens=r["stage_tokens"],
                                                  examples_seen=r.get("stage_examples"),
                                                  seconds=round(r["stage_seconds"], 1), final_loss=r["loss"],
                                                  padding_share=r["padding_share"])
    return out


def result_name(device: str, recipe: dict, model: dict, errors_weight: float | None = None,
                functions_weight: float | None = None, functions_stage: float | None = None) -> str:
    """quality-<device>, with the preset, positions, trace state, vocabulary and stage 3's
    crash weight appended where they differ from the recipe's, so that a variant's run
    never overwrites the recipe's results."""
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
    parts += [f"functions{functions_weight:g}"] if functions_weight is not None else []
    return "-".join(parts + ([f"functions-stage{functions_stage:g}"] if functions_stage else []))


def stale_build(data: str) -> bool:
    """True when the CodeNetMut build under `data` has no call depths (traced before they existed)."""
    import datasets

    from codeexecutor.modeling.profiles import lacks_depth

    return lacks_depth(datasets.load_from_disk(os.path.join(data, "codenetmut", "codenetmut"))["train"])


def recipe_functions_weight(recipe: dict) -> float:
    return next((src.get("weight", 1.0) for src in recipe["stages"][-1]["sources"] if src["path"].endswith("functions/functions")), 0.0)


def recipe_errors_weight(recipe: dict) -> float | None:
    return next((src.get("weight", 1.0) for src in recipe["stages"][-1]["sources"] if src["path"].endswith("codenetmut/errors")), None)


def options(args, recipe: dict, device: str) -> tuple[dict, dict]:
    """The model and train fields this run sets over the recipe: those given on the command
    line, the tokens per step on a GPU, and bf16 autocast where the CPU has it."""
    model = {k: v for k, v in (("preset", args.preset), ("dropout", args.dropout), ("positions", args.positions),
                               ("vocab_size", args.vocab_size), ("trace_state", args.state),
                               ("step_order", args.order), ("code_window", args.code_window),
                               ("exception_weight", args.exception_weight)) if v is not None}
    if args.split_digits:
        model["split_digits"] = True
    train = {"eval_examples": args.valid_examples, "eval_decode_examples": args.valid_examples // 4}
    if args.max_tokens or device != "cpu":
        train["max_tokens"] = args.max_tokens or MAX_TOKENS["gpu"]
    if args.autocast:
        train["autocast"] = args.autocast
    return model, train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-minutes", type=float, required=True, help="wall-clock budget of the training (all stages, mining included)")
    ap.add_argument("--recipe", default=str(RECIPE), help="the curriculum to train, whose steps the budget replaces "
                    f"(default {RECIPE.relative_to(ROOT)}); its data.dir ({RECIPE_DATA}) becomes --data")
    ap.add_argument("--preset", help="a model size named in codeexecutor/modeling/model.py PRESETS (default: the recipe's; "
                    "mini: a CPU hour; small: one GPU)")
    ap.add_argument("--data", help="built datasets, reused when present (default runs/quality/data, or data-augK "
                    "with --augment K)")
    ap.add_argument("--run", default=str(ROOT / "runs" / "quality" / "run"), help="the training run's folder")
    ap.add_argument("--lr", type=float, help="stage 1's learning rate, the later stages' scaled alike (default: the recipe's)")
    ap.add_argument("--max-tokens", type=int, help=f"token budget per micro-batch (default: the recipe's on a CPU, "
                    f"{MAX_TOKENS['gpu']} on a GPU)")
    ap.add_argument("--mutants", type=int, default=8, help="mutation attempts per CodeNet program when building")
    ap.add_argument("--singleline-limit", type=int, default=60000)
    ap.add_argument("--augment", type=int, default=AUGMENT, metavar="K",
                    help=f"variants (new names and values) of every SingleLine training program (default {AUGMENT})")
    ap.add_argument("--eval-limit", type=int, default=300, help="test examples per dataset (a fixed sample)")
    ap.add_argument("--corpora", nargs="+", default=[str(c) for c in CORPORA], metavar="DIR",
                    help="CodeNet-layout corpora to build CodeNetMut from (default: the shared atcoder-python ones)")
    ap.add_argument("--tutorial-sources", default=str(SHARED / "python-tutorial" / "tutorial_rst"), metavar="DIR")
    ap.add_argument("--codenet-limit", type=int, help="build from at most this many programs (a quick build)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="sandbox workers of the build")
    ap.add_argument("--build-only", action="store_true", help="build the datasets and stop")
    ap.add_argument("--split-digits", action="store_true", help="train the tokenizer with one token per digit")
    ap.add_argument("--dropout", type=float, help="hidden and attention dropout (default: the recipe's)")
    ap.add_argument("--autocast", choices=["bf16", "none"], default=AUTOCAST or "none",
                    help=f"forward passes under bfloat16 autocast, float32 weights (default here: {AUTOCAST or 'none'})")
    ap.add_argument("--positions", choices=POSITION_KINDS,
                    help="the release's learned absolute positions or rotary ones (modeling/rotary.py; default: the recipe's)")
    ap.add_argument("--vocab-size", type=int, help="the trained BPE tokenizer's vocabulary (default: the recipe's)")
    ap.add_argument("--valid-examples", type=int, default=48,
                    help="valid examples scored at each stage end (a quarter of them decoded); 0: none")
    ap.add_argument("--steps", metavar="SL,TUT,CN", help="the steps of the three stages, no calibration: reproduces a "
                    "committed run (its `steps`) on a machine of another speed")
    ap.add_argument("--state", choices=["full", "delta"],
                    help="trace steps write the whole state (full) or only what changed (delta: docs/trace-format.md; "
                         "default: the recipe's)")
    ap.add_argument("--order", choices=["start", "end"],
                    help="a line that calls a function writes its step before the call's steps (start, the release's) "
                         "or after them (end: docs/trace-format.md; default: the recipe's)")
    ap.add_argument("--score-only", action="store_true",
                    help="score the finished run in --run again (its final model), without calibrating or training: "
                         "for a run whose evaluation was interrupted")
    ap.add_argument("--code-window", choices=["head", "ends"],
                    help="a program longer than the code length is read from its start (head, the release's) or from "
                         "its start and its last lines (ends: docs/trace-format.md; default: the recipe's)")
    ap.add_argument("--exception-weight", type=float, help="loss weight of the `<exception>` token, a crash's first "
                    "(default: the recipe's, else every content token's 10)")
    ap.add_argument("--errors-weight", type=float, help="stage 3's weight of the crashing programs (default: the recipe's)")
    ap.add_argument("--functions-weight", type=float, help="stage 3's weight of the functions set (functions called on "
                    "their doctest and test inputs; its crashes weigh a third of that; 0: left out; default: the recipe's)")
    ap.add_argument("--function-corpora", nargs="*", default=[str(c) for c in FUNCTION_CORPORA], metavar="DIR",
                    help="folders of modules with doctests to build the functions set from (default: the shared "
                         "thealgorithms-python and keon-algorithms; none: no functions set)")
    ap.add_argument("--functions-stage", type=float, metavar="SHARE",
                    help="the last SHARE of stage 3's steps become a stage of the functions set, which takes there "
                         "all the examples it had in stage 3 (every source drawn as often; default: none, a share "
                         "of stage 3)")
    args = ap.parse_args()
    recipe = load_recipe(args.recipe)
    for flag, value in (("--errors-weight", args.errors_weight), ("--functions-weight", args.functions_weight)):
        if value is not None and not 0 <= value <= 10:
            refuse(f"{flag} takes a weight between 0 and 10 (got {value:g})")
    if args.lr is not None:
        if args.lr <= 0:
            refuse(f"--lr must be positive (got {args.lr:g})")
        scale = args.lr / recipe["stages"][0]["lr"]
        for stage in recipe["stages"]:
            stage["lr"] *= scale
    if args.functions_stage is not None:  # refused now, not after the calibration
        curriculum(recipe, "data", "run", dict.fromkeys(STAGE_SHARES, 100), 1, functions_weight=args.functions_weight,
                   functions_stage=args.functions_stage)
    args.autocast = None if args.autocast == "none" else args.autocast
    args.data = args.data or str(ROOT / "runs" / "quality" / ("data" if args.augment == 0 else f"data-aug{args.augment}"))
    fixed_steps = None
    if args.steps:
        try:
            fixed_steps = dict(zip(STAGE_SHARES, (int(n) for n in args.steps.split(",")), strict=True))
        except ValueError:
            refuse(f"--steps takes three step counts, e.g. 983,462,463 (got {args.steps!r})")

    from codeexecutor.progress import quiet_libraries

    quiet_libraries()

    device = device_label()
    model_opts, train_opts = options(args, recipe, device)
    max_tokens = train_opts.get("max_tokens") or recipe["train"]["max_tokens"]
    work = os.path.dirname(args.run)
    os.makedirs(work, exist_ok=True)
    log = open(os.path.join(work, "bench_quality.log"), "a")
    t0 = time.perf_counter()
    sizes = build(args.data, log, args.mutants, args.singleline_limit, args.corpora, args.tutorial_sources,
                  args.codenet_limit, args.workers, args.augment, args.function_corpora)
    build_s = time.perf_counter() - t0
    order = model_opts.get("step_order", recipe["model"].get("step_order", "start"))
    if order == "end" and stale_build(args.data):
        refuse(f"{args.data} was built before steps carried their call depth, which step order `end` needs: move it "
               "away and run again to rebuild it (or give --data a new folder)")
    if args.build_only:
        print(json.dumps(sizes, indent=2))
        return
    singleline_train = sizes["singleline"]["singleline"]["train"]
    scored = min(singleline_train, MINING_POOL)  # mined in stage 2, the hardest third kept
    hardest = max(1, scored // 3)
    busy = busy_share()
    if busy is not None and busy > BUSY:
        print(f"bench_quality: warning: {100 * busy:.0f}% of this machine's CPU time goes to other processes; the "
              "calibration will measure slower steps and plan fewer of them, so this result will not compare with a "
              "run on a quiet machine (stop the other work first)", file=sys.stderr, flush=True)
    if args.score_only:
        per_step, train_s, steps = finished_run(args.run, work)
    else:
        per_step = calibrate(recipe, args.data, work, hardest, log, model_opts, train_opts, args.functions_weight)
    budget = args.budget_minutes * 60
    mining_s = scored / max(1, max_tokens // 64) * per_step["singleline"] / 3  # forward only
    planned = fixed_steps or plan(budget * 0.93, per_step, STAGE_SHARES, mining_s)  # 7%: start-ups and stage-end evaluations
    rates = ", ".join(f"{k} {v:.3f}" for k, v in per_step.items())
    print(f"calibration (s/step): {rates}; stages {planned} ({sum(planned.values())} steps) in {args.budget_minutes:g} min", flush=True)
    if not args.score_only:
        shutil.rmtree(args.run, ignore_errors=True)
    run_model = {**model_opts, "tokenizer": os.path.join(work, "calibration", "tokenizer")}  # trained once, in the calibration

    def make_cur(steps: dict[str, int]) -> dict:
        return curriculum(recipe, args.data, args.run, steps, hardest, scored, run_model, train_opts, args.errors_weight,
                          args.functions_weight, args.functions_stage)

    if args.score_only:  # trained before: its model scored again
        replans = []
        print(f"scoring {args.run}/final as trained ({steps}, {train_s / 60:.1f} min in its stages)", flush=True)
    elif fixed_steps:  # a reproduction: the committed steps, whatever the time
        train_s, steps, replans = train(make_cur(planned), args.run, log), planned, []
    else:
        train_s, steps, replans = train_in_budget(make_cur, args.run, log, budget, per_step, planned, mining_s)
    model = os.path.join(args.run, "final")
    sys.path.insert(0, str(ROOT))
    from eval.evaluate import evaluate_model, table3

    t1 = time.perf_counter()
    report = evaluate_model(model, args.data, split="test", limit=args.eval_limit, beam=1, batch_size=16, progress=False)
    eval_s = time.perf_counter() - t1
    predictions = report.pop("predictions")
    with open(os.path.join(args.run, "test_predictions.jsonl"), "w") as f:  # for error analysis
        f.writelines(json.dumps(p) + "\n" for p in predictions)
    params = sum(p.numel() for p in __import__("codeexecutor.modeling.loading", fromlist=["load_model"]).load_model(model).parameters())
    cur = make_cur(steps)
    last_mix = {src["path"].rsplit("/", 1)[-1]: src.get("weight", 1.0) for src in cur["stages"][-1]["sources"]}
    result = {
        "device": device, "machine": machine(), "state": cur["model"]["trace_state"],
        "step_order": cur["model"].get("step_order", "start"), "code_window": cur["model"].get("code_window", "head"),
        "exception_weight": cur["model"].get("exception_weight"),
        "recipe": os.path.relpath(args.recipe, ROOT),
        "preset": cur["model"]["preset"], "parameters": params, "budget_minutes": args.budget_minutes,
        "training_seconds": round(train_s, 1), "build_seconds": round(build_s, 1), "eval_seconds": round(eval_s, 1),
        "calibration_seconds_per_step": {k: round(v, 4) for k, v in per_step.items()},
        "busy_before_calibration": busy,
        "stage_shares": STAGE_SHARES, "last_stage_mix": last_mix, "planned_steps": planned, "replans": replans, "steps": steps,
        "stages": stage_summary(args.run),
        "lr": [st["lr"] for st in cur["stages"]], "max_tokens": cur["train"]["max_tokens"],
        "split_digits": cur["model"]["split_digits"], "dropout": cur["model"]["dropout"],
        "autocast": cur["train"].get("autocast"), "positions": cur["model"]["positions"], "vocab_size": cur["model"]["vocab_size"],
        "singleline_augment": args.augment, "functions_weight": (  # stage 3's, before a functions stage
            recipe_functions_weight(recipe) if args.functions_weight is None else args.functions_weight),
        "functions_stage": args.functions_stage, "stage_steps": {st["name"]: st["steps"] for st in cur["stages"]},
        "stage_mixes": {st["name"]: {src["path"].rsplit("/", 1)[-1]: src.get("weight", 1.0) for src in st["sources"]}
                        for st in cur["stages"]},
        "command": " ".join(["benchmarks/bench_quality.py"] + sys.argv[1:]),
        "singleline_mining": {"scored": scored, "kept": hardest},
        "dataset_sizes": sizes,
        "metric": report["metric"], "decoding": "greedy (beam 1)", "eval_limit_per_set": args.eval_limit,
        "test": {name: {"examples": e["examples"], **{k: v for k, v in e["table3"].items() if k not in ("programs",)},
                        "by_kind": e.get("by_kind", {}), "ours_aligned": e["aligned"], "unfinished": e.get("unfinished"),
                        **({"expansion": e["expansion"]} if "expansion" in e else {})}
                 for name, e in report["datasets"].items()},
        "singleline_by_answer": singleline_breakdown(predictions, args.data),
        "runtime_errors": report.get("runtime_errors"),
        "runtime_errors_functions": report.get("runtime_errors_functions"),
        "model": model,
    }
    if args.score_only:
        result["note"] = "scored again after training (--score-only): training_seconds are the stages' own, from the train log"
    if train_s > budget * 1.05 and not fixed_steps:  # a reproduction trains its steps, whatever they take here
        result["note"] = f"training took {train_s / 60:.1f} minutes against a budget of {args.budget_minutes:g}"
    RESULTS.mkdir(exist_ok=True)
    name = result_name(device, recipe, model_opts, args.errors_weight if args.errors_weight != recipe_errors_weight(recipe) else None,
                       args.functions_weight if args.functions_weight not in (None, recipe_functions_weight(recipe)) else None,
                       args.functions_stage)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    if os.path.exists(os.path.join(args.run, "loss.png")):
        shutil.copy(os.path.join(args.run, "loss.png"), RESULTS / f"{name}-curves.png")
    print(table3(report))
    print(f"report: {path}")


if __name__ == "__main__":
    main()
