"""The quality run: how well does a model trained within a wall-clock budget execute code?

    .venv/bin/python benchmarks/bench_quality.py --budget-minutes 60 [--preset mini]

1. Builds (or reuses, `--data`) the three datasets from the shared corpora: CodeNetMut
   from atcoder-python and atcoder-python-2 (with the error-trace set), Tutorial from the
   tutorial sources, SingleLine from the CodeNetMut traces.
2. Trains the three-stage curriculum (SingleLine; hardest SingleLine + Tutorial;
   + CodeNetMut and crashes) within the budget: a short calibration measures seconds
   per step of each stage at the run's token budget (a step of long CodeNet traces costs
   more than one of SingleLine lines), then the steps of each stage are its share of the
   budget (STAGE_SHARES), less the estimated mining time. Evaluates while training.
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
# The budget's share of each stage. SingleLine test accuracy grew with stage 1's steps
# (28.5% after 2,400, 41.3% after 7,360 without augmentation) and stages 2 and 3 only kept
# it (46.7% after stage 1, 44.7% and 46.7% after the later ones): at 0.5 / 0.2 / 0.3 the
# run ended at 46.67%, so SingleLine, this CPU run's target, now has 0.55. Measured with
# bf16 autocast and no ZeRO (9,479 SingleLine steps where the 0.5 run had 7,360): stage 1
# ended at 46.0% (held-out loss 0.67 against 0.71), the run at 44.33%, and Tutorial and
# CodeNetMut lost (23.7% and 11.0% against 29.0% and 14.3%). SingleLine has stopped gaining
# from steps at this model size; 0.5 / 0.2 / 0.3 is the better split for the next run.
STAGE_SHARES = {"singleline": 0.55, "tutorial": 0.2, "codenet": 0.25}
# SingleLine training variants per program (curricula/augment.py; new names and values,
# 31,626 -> 118,370 training examples). In the full 60-minute run the SingleLine stage
# ends at 45.0% test trace accuracy with 3 variants against 41.3% without (held-out loss
# 0.77 against 0.96: without them, three epochs of the same examples over-fit). A 400-step
# pilot had not gained from them (10.5% against 13.0%): too short to over-fit. Six variants
# (205,284 training examples, 1.15 epochs in 11,744 stage-1 steps) did not help: stage 1
# ended at 45.0% (beam 10: 45.3%) and a held-out loss of 0.74, against 46.0% and 0.67 with
# three; the real programs, 16% of the mix instead of 27%, are seen less.
AUGMENT = 3
# Stages 2 and 3 at this fraction of the first stage's learning rate, stage 2's SingleLine
# half split between the mined hardest examples and all of them. With the full rate and
# only the hardest (the paper's mix), SingleLine test trace accuracy fell from 45.0% at the
# end of stage 1 to 30.3% at the end of stage 2, and stage 3 recovered it to 37.3%.
# At a quarter of the rate, stages 2 and 3 of the rotary 60-minute run again from its stage-1
# checkpoint (same steps) ended at the same SingleLine 48.7% (held-out loss 0.73 against
# 0.77), Tutorial 21.0% against 20.0%, CodeNetMut 12.7% against 15.0%: no gain, kept at half.
LATER_LR = 0.5
# Stage 3's mix (weights; the sampler normalises them). Each later stage takes SingleLine
# back: over the 59-minute rotary run its held-out loss rose from 0.683 to 0.701 in stage 2,
# where SingleLine is half the mix, and to 0.772 in stage 3, where it was a third (0.34 /
# 0.33 / 0.33 / 0.1); SingleLine test trace accuracy of the stage exports went 52.0%,
# 49.3%, 48.7% (results/stage-exports-cpu.jsonl), while Tutorial's training loss reached
# 1e-5 in stage 3 (its 5,837 examples memorised). So stage 3 gives SingleLine half of the
# mix, mostly from Tutorial (results/quality-cpu-stage3-third.json: the run before). With the
# same steps (in float32 on an AVX2-only CPU) the held-out SingleLine loss went 0.662, 0.625,
# 0.656 over the stages, and the final model reached SingleLine 51.0% (48.7% before),
# Tutorial 27.3% (20.0%), CodeNetMut 15.3% (15.0%; aligned output 12.7% against 9.3%)
# (results/quality-cpu-steps-11375.json); stage 1 alone had 52.7% there (52.0% in the bf16
# run). A true 60-minute budget on that AVX2 CPU (7,610 / 2,055 / 3,083 steps) ended at
# SingleLine 51.3%, Tutorial 28.0%, CodeNetMut 14.7% (results/quality-cpu.json), and it
# predicted no crash at all (TP 0; on the crashing programs whose trace it finished too).
# Stage 3 again from that run's stage-2 export with the crash share at 0.3 (same steps,
# a fresh optimizer; results/stage-exports-cpu.jsonl, "pilot") predicted 22 of 300 crashes
# (10 false alarms; detection 52.0%, 69.0% over finished traces, against 61.9%) at SingleLine
# 50.3%, CodeNetMut 14.0%, but more traces hit the length cap (CodeNetMut 40.3% against
# 33.3%): not yet the default; a full run decides. The full 60-minute run with 0.3
# (`--errors-weight 0.3`; 8,071 / 2,285 / 3,488 steps, 61.0 minutes; results/
# quality-cpu-errors0.3.json) predicted 29 crashes (15 false alarms; detection 52.3%,
# 71.9% over finished traces, localisation 65.5% of those detected) at SingleLine 50.7%,
# Tutorial 36.0% (28.0%), CodeNetMut 12.7% (14.7%), but CodeNetMut traces cut at the cap
# went from 33.3% to 56.0% and the crashing programs' from 59.0% to 76.3%: kept at 0.1.
LAST_MIX = {"singleline": 0.5, "tutorial": 0.2, "codenet": 0.3, "errors": 0.1}
# Token budget per step. On a CPU, where a step's cost is its tokens, smaller batches buy
# more optimizer steps for the same time: SingleLine-only pilots of 12.5 minutes on this
# 2-core VM (mini, lr 1e-3, 200 test examples, greedy) reached 13.0% at 6,144 tokens
# (400 steps), 22.5% at 2,048 (1,200 steps), 25.0% at 1,024 (2,400 steps, 13.7 minutes).
# A GPU wants its batches full.
MAX_TOKENS = {"cpu": 1024, "gpu": 6144}
# A warning above this share of CPU time busy before calibration: one decode beside the
# calibration measured Tutorial at 0.430 s/step against 0.26 s quiet.
BUSY = 0.25
# Hidden and attention dropout: none, for budgets this short. SingleLine pilots of 2,400
# steps at 1,024 tokens (mini, 200 test examples, greedy): 28.5% without dropout, 25.0%
# with RoBERTa's 0.1; at lr 2e-3 instead of 1e-3, 24.0%; 4,800 steps of 512 tokens,
# 29.5% for more time per token; one token per digit, 18.5%. Over the full 60-minute run
# (7,231 SingleLine steps) the training loss fell to 0.05 while the held-out loss stayed
# near 0.95: past about three epochs, dropout 0.1 may do better; not measured yet.
DROPOUT = 0.0
# Stage 2 keeps the hardest third of the SingleLine examples it scores, and scores at most
# this many (a fixed random sample): a forward pass each, so mining 118,370 augmented
# examples would take about 9 of the run's 60 minutes (the unaugmented 31,626, 2.5).
MINING_POOL = 32768
# Forward passes (training and mining) under bfloat16 autocast, weights and optimizer in
# float32 (`train.autocast`), where bf16 matmuls are native: on this VM's CPU (AVX512_BF16)
# a mini step of 1,024 tokens takes 0.15 s against 0.22 s in float32. A SingleLine pilot
# of 2,400 steps: 28.0% test trace accuracy under autocast, 28.5% in float32 (200 examples).
AUTOCAST = "bf16" if fast_bf16() else None
# One process: no ZeRO (nothing to partition). ZeRO-2's gradient buffers cost a fifth of
# a mini step here: 0.198 s per SingleLine step of 1,024 tokens under autocast, 0.169 s
# without ZeRO (0.233 s in float32 with ZeRO-2, the previous run's set-up).
DS_CONFIG = "single.json"
# The CPU preset stays `mini`. `mini-wide` (4 x 384, 10.6 M parameters, a step 1.9x mini's)
# over the same 60 minutes trained 6,323 SingleLine steps: SingleLine 42.7% after stage 1
# and 39.3% at the end, against mini's 46.0% and 44.3%; Tutorial gained (32.0% against
# 23.7%), CodeNetMut did not (8.7% against 11.0%) (results/quality-cpu-mini-wide-absolute.json).
PRESET = "mini"
# Positions: rotary (modeling/rotary.py), not the release's learned absolute table. Over the
# 60-minute run (13,156 / 3,284 / 3,964 steps; it overran to 72 minutes) rotary ones reached
# SingleLine 51.7% after stage 1 and 48.3% at the end, Tutorial 28.0%, CodeNetMut 15.0%
# (results/quality-cpu-rotary.json), against 46.7% for absolute positions after the same
# 13,156 stage-1 steps (pilots-cpu.jsonl, p13-abs-13156; 300 test examples each) and 44.3% at
# the end of the absolute run (results/quality-cpu-absolute.json). In 2,400-step pilots the
# two were level (28.5% and 28.0%). Within the 60 minutes (59.2, re-planned: 11,375 / 2,438 /
# 4,306 steps, stage 3 a third SingleLine): SingleLine 48.7% at the end, Tutorial 20.0%,
# CodeNetMut 15.0% (results/quality-cpu-stage3-third.json). `--positions absolute` is the
# release's architecture.
POSITIONS = "rotary"
# The trained BPE tokenizer's vocabulary. A 2,000-token one in a 2,400-step pilot: 27.0%
# against 28.0% (200 test examples), a step 14% quicker, computed answers worse (5.1% / 9.2%).
VOCAB = 8000


def refuse(message: str) -> None:
    """Bad input: one line on stderr, exit status 2."""
    print(f"bench_quality: {message}", file=sys.stderr)
    sys.exit(2)


def sh(args: list[str], log) -> None:
    print("$", " ".join(args), flush=True)
    subprocess.run(args, check=True, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def build(data: str, log, mutants: int, singleline_limit: int, corpora: list[str], tutorial: str,
          codenet_limit: int | None = None, workers: int = 2, augment: int = 0) -> dict:
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
    return {name: json.load(open(os.path.join(data, name, "stats.json")))["datasets"] for name in ("codenetmut", "tutorial", "singleline")}


def curriculum(data: str, out: str, preset: str, steps: dict[str, int], lr: float, max_tokens: int, hardest: int,
               eval_every: int, mine_from: int | None = None, tokenizer: str | None = None, valid_examples: int = 48, split_digits: bool = False,
               dropout: float = DROPOUT, autocast: str | None = None, positions: str = POSITIONS, vocab_size: int = VOCAB,
               last_mix: dict[str, float] = LAST_MIX, state: str = "full") -> dict:
    sl, tut = f"{data}/singleline/singleline", f"{data}/tutorial/tutorial"
    cn, err = f"{data}/codenetmut/codenetmut", f"{data}/codenetmut/errors"
    warm = lambda n: max(1, min(200, n // 10))  # noqa: E731
    return {
        "model": {"preset": preset, "vocab_size": vocab_size, "max_code_length": 256, "max_trace_length": 768, "split_digits": split_digits,
                  "dropout": dropout, "positions": positions, "trace_state": state,
                  **({"tokenizer": tokenizer} if tokenizer else {})},
        "train": {"output_dir": out, "micro_batch_size": 16, "grad_accum": 1, "save_every": 1000, "log_every": 20, "mining_batch_size": 128,
                  "max_tokens": max_tokens, "eval_every": eval_every, "eval_examples": valid_examples, "eval_decode_examples": valid_examples // 4,
                  **({"autocast": autocast} if autocast else {})},
        "stages": [
            {"name": "singleline", "steps": steps["singleline"], "lr": lr, "warmup": warm(steps["singleline"]),
             "sources": [{"path": sl, "task": "singleline"}]},
            {"name": "tutorial", "steps": steps["tutorial"], "lr": lr * LATER_LR, "warmup": warm(steps["tutorial"]),
             "sources": [{"path": sl, "task": "singleline", "weight": 0.25, "hardest": hardest,
                          **({"mine_from": mine_from} if mine_from else {})},
                         {"path": sl, "task": "singleline", "weight": 0.25},
                         {"path": tut, "task": "tutorial", "weight": 0.5}]},
            {"name": "codenet", "steps": steps["codenet"], "lr": lr * LATER_LR, "warmup": warm(steps["codenet"]),
             "sources": [{"path": sl, "task": "singleline", "weight": last_mix["singleline"]},
                         {"path": tut, "task": "tutorial", "weight": last_mix["tutorial"]},
                         {"path": cn, "task": "codenet", "weight": last_mix["codenet"]},
                         {"path": err, "task": "codenet", "weight": last_mix["errors"]}]},
        ],
    }


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


def calibrate(data: str, work: str, preset: str, lr: float, max_tokens: int, hardest: int, log,
              split_digits: bool = False, dropout: float = DROPOUT, autocast: str | None = None,
              positions: str = POSITIONS, vocab_size: int = VOCAB, state: str = "full") -> dict[str, float]:
    """Seconds per optimizer step of each stage at this token budget, from some steps of
    each: a CodeNet step with its long traces costs more than a SingleLine step. The first
    step of every stage, which pays for the stage's set-up, is left out (kept in, eight
    0.35 s steps measured 0.45 s, and a 60-minute run trained 45). Stage 2 mines as many
    hardest SingleLine examples as the run will (at most 4,096): from a handful, its
    SingleLine batches would be a few rows, and its steps cheap (1.04 s where the run then
    took 1.8). It scores twice that many, not the run's whole pool: the mining's time is
    estimated apart."""
    steps = calibration_steps(max_tokens)
    hardest = min(hardest, 4096)
    cur = curriculum(data, f"{work}/calibration", preset, steps, lr, max_tokens, hardest, 0, mine_from=2 * hardest,
                     split_digits=split_digits, dropout=dropout, autocast=autocast, positions=positions, vocab_size=vocab_size,
                     state=state)
    cur["train"].update(eval_examples=0, log_every=1)
    shutil.rmtree(f"{work}/calibration", ignore_errors=True)
    train(cur, f"{work}/calibration", log)
    rows = [json.loads(line) for line in open(f"{work}/calibration/train_log.jsonl") if '"loss"' in line]
    out = {}
    for name, n in steps.items():
        stage = [r for r in rows if r["stage"] == name]
        out[name] = (stage[-1]["stage_seconds"] - stage[0]["stage_seconds"]) / (len(stage) - 1)
    return out


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


def result_name(device: str, preset: str = PRESET, positions: str = POSITIONS, vocab_size: int = VOCAB,
                errors_weight: float = LAST_MIX["errors"], state: str = "full") -> str:
    """quality-<device>, with the preset, positions, trace state, vocabulary and stage 3's
    crash weight appended where they are not the defaults, so that a variant's run never
    overwrites the default run's results."""
    parts = [f"quality-{device}"] + ([preset] if preset != PRESET else []) + ([positions] if positions != POSITIONS else [])
    parts += [state] if state != "full" else []
    parts += [f"vocab{vocab_size}"] if vocab_size != VOCAB else []
    return "-".join(parts + ([f"errors{errors_weight:g}"] if errors_weight != LAST_MIX["errors"] else []))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-minutes", type=float, required=True, help="wall-clock budget of the training (all stages, mining included)")
    ap.add_argument("--preset", default=PRESET, help="a model size named in codeexecutor/modeling/model.py PRESETS (mini: a CPU hour; small: one GPU)")
    ap.add_argument("--data", help="built datasets, reused when present (default runs/quality/data, or data-augK "
                    "with --augment K)")
    ap.add_argument("--run", default=str(ROOT / "runs" / "quality" / "run"), help="the training run's folder")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--max-tokens", type=int, help=f"token budget per micro-batch (default {MAX_TOKENS['cpu']} on a CPU, "
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
    ap.add_argument("--dropout", type=float, default=DROPOUT, help=f"hidden and attention dropout (default {DROPOUT})")
    ap.add_argument("--autocast", choices=["bf16", "none"], default=AUTOCAST or "none",
                    help=f"forward passes under bfloat16 autocast, float32 weights (default here: {AUTOCAST or 'none'})")
    ap.add_argument("--positions", choices=POSITION_KINDS, default=POSITIONS,
                    help=f"the release's learned absolute positions or rotary ones (modeling/rotary.py; default {POSITIONS})")
    ap.add_argument("--vocab-size", type=int, default=VOCAB, help=f"the trained BPE tokenizer's vocabulary (default {VOCAB})")
    ap.add_argument("--valid-examples", type=int, default=48,
                    help="valid examples scored at each stage end (a quarter of them decoded); 0: none")
    ap.add_argument("--steps", metavar="SL,TUT,CN", help="the steps of the three stages, no calibration: reproduces a "
                    "committed run (its `steps`) on a machine of another speed")
    ap.add_argument("--state", choices=["full", "delta"], default="full",
                    help="trace steps write the whole state (full) or only what changed (delta: modeling/compact.py)")
    ap.add_argument("--errors-weight", type=float, default=LAST_MIX["errors"],
                    help=f"stage 3's weight of the crashing programs (default {LAST_MIX['errors']}; the others: {LAST_MIX})")
    args = ap.parse_args()
    if not 0 <= args.errors_weight <= 10:
        refuse(f"--errors-weight takes a weight between 0 and 10 (got {args.errors_weight:g})")
    last_mix = {**LAST_MIX, "errors": args.errors_weight}
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
    args.max_tokens = args.max_tokens or MAX_TOKENS["cpu" if device == "cpu" else "gpu"]
    work = os.path.dirname(args.run)
    os.makedirs(work, exist_ok=True)
    log = open(os.path.join(work, "bench_quality.log"), "a")
    t0 = time.perf_counter()
    sizes = build(args.data, log, args.mutants, args.singleline_limit, args.corpora, args.tutorial_sources,
                  args.codenet_limit, args.workers, args.augment)
    build_s = time.perf_counter() - t0
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
    per_step = calibrate(args.data, work, args.preset, args.lr, args.max_tokens, hardest, log,
                         args.split_digits, args.dropout, args.autocast, args.positions, args.vocab_size,
                         args.state)  # trains the tokenizer too
    budget = args.budget_minutes * 60
    mining_s = scored / max(1, args.max_tokens // 64) * per_step["singleline"] / 3  # forward only
    planned = fixed_steps or plan(budget * 0.93, per_step, STAGE_SHARES, mining_s)  # 7%: start-ups and stage-end evaluations
    rates = ", ".join(f"{k} {v:.3f}" for k, v in per_step.items())
    print(f"calibration (s/step): {rates}; stages {planned} ({sum(planned.values())} steps) in {args.budget_minutes:g} min", flush=True)
    shutil.rmtree(args.run, ignore_errors=True)

    def make_cur(steps: dict[str, int]) -> dict:
        return curriculum(args.data, args.run, args.preset, steps, args.lr, args.max_tokens, hardest, 0,  # evaluate at stage ends
                          mine_from=scored,  # all of them scored when the pool holds them all
                          tokenizer=os.path.join(work, "calibration", "tokenizer"),  # trained once, in the calibration
                          valid_examples=args.valid_examples, split_digits=args.split_digits, dropout=args.dropout,
                          autocast=args.autocast, positions=args.positions, vocab_size=args.vocab_size, last_mix=last_mix,
                          state=args.state)

    if fixed_steps:  # a reproduction: the committed steps, whatever the time
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
    result = {
        "device": device, "machine": machine(), "state": args.state, "preset": args.preset, "parameters": params, "budget_minutes": args.budget_minutes,
        "training_seconds": round(train_s, 1), "build_seconds": round(build_s, 1), "eval_seconds": round(eval_s, 1),
        "calibration_seconds_per_step": {k: round(v, 4) for k, v in per_step.items()},
        "busy_before_calibration": busy,
        "stage_shares": STAGE_SHARES, "last_stage_mix": last_mix, "later_lr": LATER_LR, "planned_steps": planned, "replans": replans, "steps": steps,
        "stages": stage_summary(args.run),
        "lr": args.lr, "max_tokens": args.max_tokens, "split_digits": args.split_digits, "dropout": args.dropout,
        "autocast": args.autocast, "positions": args.positions, "vocab_size": args.vocab_size,
        "singleline_augment": args.augment,
        "singleline_mining": {"scored": scored, "kept": hardest},
        "dataset_sizes": sizes,
        "metric": report["metric"], "decoding": "greedy (beam 1)", "eval_limit_per_set": args.eval_limit,
        "test": {name: {"examples": e["examples"], **{k: v for k, v in e["table3"].items() if k not in ("programs",)},
                        "by_kind": e.get("by_kind", {}), "ours_aligned": e["aligned"], "unfinished": e.get("unfinished"),
                        **({"expansion": e["expansion"]} if "expansion" in e else {})}
                 for name, e in report["datasets"].items()},
        "singleline_by_answer": singleline_breakdown(predictions, args.data),
        "runtime_errors": report.get("runtime_errors"),
        "model": model,
    }
    if train_s > budget * 1.05 and not fixed_steps:  # a reproduction trains its steps, whatever they take here
        result["note"] = f"training took {train_s / 60:.1f} minutes against a budget of {args.budget_minutes:g}"
    RESULTS.mkdir(exist_ok=True)
    name = result_name(device, args.preset, args.positions, args.vocab_size, args.errors_weight, args.state)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    if os.path.exists(os.path.join(args.run, "loss.png")):
        shutil.copy(os.path.join(args.run, "loss.png"), RESULTS / f"{name}-curves.png")
    print(table3(report))
    print(f"report: {path}")


if __name__ == "__main__":
    main()
