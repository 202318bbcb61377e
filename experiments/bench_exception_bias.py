"""Crash detection with a bias on `<exception>` at step ends, chosen on the valid split
from free decodes, then checked by a biased decode of the test split (greedy, the
release's metric for the traces).

    .venv/bin/python experiments/bench_exception_bias.py --run runs/quality/run [--limit 300]

A model that saw few crashing programs ranks `<exception>` second where a step ends and
never writes it. Its margin there (generation/verdict.py) is a crash score: one free
greedy decode of the valid split gives each program's highest margin, and for greedy
search a bias B turns a program's verdict into a crash exactly when that margin exceeds
-B. So the bias with the best valid detection accuracy is found without decoding again;
the test split is then decoded freely (AUROC, the verdict the replay predicts) and with
the bias (detection, localisation and kind of the crash; what the bias costs the traces
of every test set). The phases resume after a kill; the report goes to
benchmarks/results/exception-bias-<device>.json with a PNG of the curves.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import time

from codeexecutor.atomic import write_json

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))  # _common, bench_quality

from _common import RESULTS, ROOT, chosen_model, dataset_folders, device_label, model_arguments

ERRORS = ("errors", "codenetmut")  # crashing programs and their negatives: scored together


RULES = {
    "none": {"names": False, "values": False},
    "names": {"names": True, "values": False},
    "values": {"names": False, "values": True},
    "both": {"names": True, "values": True},
}


def _decode(
    model: str, folders: dict[str, str], split: str, limit: int, bias: float, rules: str = "none", at: str = "step"
) -> dict:
    """One greedy decode of the split: per dataset its trace scores, the runtime-error
    metrics, and per crash-set program (crashed, peak margin, crash written)."""
    from codeexecutor.generation.decoding import Decoding
    from eval.evaluate import EvalOptions, evaluate_model

    phase = {"split": split, "exception_bias": bias, "datasets": {}, "programs": []}
    start = time.perf_counter()
    for parent in dict.fromkeys(os.path.dirname(f) for f in folders.values()):
        report = evaluate_model(
            model,
            parent,
            split=split,
            limit=limit,
            decoding=Decoding(beam=1, exception_bias=bias, exception_at=at, **RULES[rules]),
            progress=False,
            options=EvalOptions(batch_size=16),
        )
        for name, scores in report["datasets"].items():
            phase["datasets"][name] = {
                "examples": scores["examples"],
                "split": scores["split"],
                "trace_accuracy": scores["table3"]["trace_accuracy"],
                "output_accuracy": scores["table3"]["output_accuracy"],
                "unfinished_share": (scores.get("unfinished") or {}).get("share"),
            }
        if "runtime_errors" in report:
            phase["runtime_errors"] = report["runtime_errors"]
        phase["programs"] += [
            {
                "dataset": p["dataset"],
                "crashed": p["crashed"],
                "peak": p["exception_peak"],
                "end": p.get("exception_end"),
                "finished": p["finished"],
                "written": "<exception>" in p["prediction"],
            }
            for p in report["predictions"]
            if p["dataset"] in ERRORS
        ]
        print(
            f"  {split} bias {bias}: {', '.join(report['datasets'])} done ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    phase["seconds"] = round(time.perf_counter() - start, 1)
    return phase


def _score(p: dict, at: str = "step") -> float:
    """The free decode's margin that a bias must beat: at every step end its peak; at the
    trace's end, its margin at `</s>` (a crash already written: always; a trace cut at
    the cap never ends: never)."""
    if at == "end":
        if p["written"]:
            return math.inf
        return p["end"] if p.get("finished") and p.get("end") is not None else -math.inf
    return -math.inf if p["peak"] is None else p["peak"]


def replay(programs: list[dict], bias: float, at: str = "step") -> dict:
    """Detection as a greedy decode with `bias` (acting `at`) would give it: a crash where
    the free decode's margin > -bias."""
    tp = sum(_score(p, at) > -bias and p["crashed"] for p in programs)
    fp = sum(_score(p, at) > -bias and not p["crashed"] for p in programs)
    pos = sum(p["crashed"] for p in programs)
    neg = len(programs) - pos
    return {
        "bias": bias,
        "detection_accuracy": 100 * (tp + neg - fp) / len(programs),
        "tp": tp,
        "fp": fp,
        "true_positive_rate": 100 * tp / pos if pos else None,
        "false_positive_rate": 100 * fp / neg if neg else None,
    }


def choose_bias(programs: list[dict], at: str = "step") -> float:
    """The bias with the best replayed detection accuracy: midway between two adjacent peaks
    (never on one), the smallest such bias on ties; 0 when none beats it."""
    peaks = sorted({_score(p, at) for p in programs if math.isfinite(_score(p, at))})
    candidates = [0.0] + [-(a + b) / 2 for a, b in zip(peaks, peaks[1:])] + ([-peaks[0] + 1.0] if peaks else [])
    candidates = sorted({round(c, 4) for c in candidates if c >= 0})
    best = max(candidates, key=lambda c: (replay(programs, c, at)["detection_accuracy"], -c))
    return best


def auroc(programs: list[dict], at: str) -> float | None:
    from codeexecutor.modeling.trace_metrics import crash_score_auroc

    return crash_score_auroc([_score(p, at) for p in programs], [p["crashed"] for p in programs])


def curve(programs: list[dict], top: float, at: str = "step") -> list[dict]:
    steps = 80
    return [replay(programs, top * i / steps, at) for i in range(steps + 1)]


def plot(report: dict, png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for split, style in (("valid", "-"), ("test", "--")):
        pts = report["curves"].get(split)
        if not pts:
            continue
        xs = [p["bias"] for p in pts]
        ax.plot(xs, [p["detection_accuracy"] for p in pts], style, color="C0", label=f"detection accuracy ({split})")
        ax.plot(xs, [p["true_positive_rate"] for p in pts], style, color="C2", label=f"crashes caught ({split})")
        ax.plot(xs, [p["false_positive_rate"] for p in pts], style, color="C3", label=f"false alarms ({split})")
    ax.axvline(report["chosen_bias"], color="k", lw=0.8, label=f"chosen on valid: {report['chosen_bias']:.2f}")
    ax.set_xlabel("exception bias at step ends (nats)")
    ax.set_ylabel("%")
    ax.set_title("crash verdicts replayed from free greedy decodes")
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    model_arguments(ap, "test sets decoded with and without the bias (the crashing programs come with codenetmut)")
    ap.add_argument("--limit", type=int, default=300, help="examples per dataset and split (a fixed sample)")
    ap.add_argument("--bias", type=float, help="skip the choice on valid and use this bias")
    ap.add_argument(
        "--at",
        choices=("step", "end"),
        default="step",
        help="where the bias acts: every step end, or only where the trace would end (generation/verdict.py)",
    )
    ap.add_argument(
        "--rules",
        choices=RULES,
        default="none",
        help="state rules of every decode (generation/constraints.py): "
        "the replay holds under them too, as they never act where a step ends",
    )
    args = ap.parse_args()
    model = chosen_model("bench_exception_bias", args)
    if args.limit < 1 or "codenetmut" not in args.datasets:
        print(
            "bench_exception_bias: --limit must be >= 1 and --datasets must include codenetmut (the crash sets)",
            file=sys.stderr,
        )
        sys.exit(2)
    folders = dataset_folders("bench_exception_bias", args.run, args.data, args.datasets)
    crash_sets = {"codenetmut": folders["codenetmut"]}
    stem = f"exception-bias-{device_label()}" + ("" if args.rules == "none" else f"-{args.rules}")
    name = stem + ("" if args.at == "step" else f"-at-{args.at}")
    partial = RESULTS / f"{stem}.partial.json"  # the free decodes, whatever `at`
    state = json.loads(partial.read_text()) if partial.exists() else {}
    key = {
        "model": os.path.relpath(os.path.abspath(model), ROOT),
        "limit": args.limit,
        "datasets": args.datasets,
        "rules": args.rules,
    }
    if state.get("key") != key:
        state = {"key": key}

    def phase(label: str, run):
        if label not in state:
            print(f"{label} ...", flush=True)
            state[label] = run()
            RESULTS.mkdir(parents=True, exist_ok=True)
            write_json(partial, state, indent=None)  # a kill loses at most the phase under way
        else:
            print(f"{label}: done before, reused", flush=True)
        return state[label]

    if args.bias is None:
        valid = phase("valid_free", lambda: _decode(model, crash_sets, "valid", args.limit, 0.0, args.rules))
        bias = choose_bias(valid["programs"], args.at)
    else:
        valid, bias = None, args.bias
    free = phase("test_free", lambda: _decode(model, folders, "test", args.limit, 0.0, args.rules))
    biased = (
        free
        if bias == 0
        else phase(
            f"test_bias_{args.at}_{bias}",
            lambda: _decode(model, folders, "test", args.limit, bias, args.rules, args.at),
        )
    )
    predicted = replay(free["programs"], bias, args.at)
    agree = sum((_score(f, args.at) > -bias) == b["written"] for f, b in zip(free["programs"], biased["programs"]))
    top = max(2 * bias, 4.0)
    report = {
        **key,
        "device": device_label(),
        "decoding": "greedy (beam 1)",
        "metric": "release's (trace scores); detection over the crashing test programs and the CodeNetMut ones",
        "chosen_bias": bias,
        "chosen_on": "valid" if valid else "given",
        "at": args.at,
        "valid": {
            "replay": replay(valid["programs"], bias, args.at),
            "crash_score_auroc": auroc(valid["programs"], args.at),
            "programs": len(valid["programs"]),
        }
        if valid
        else None,
        "test_free": {k: v for k, v in free.items() if k != "programs"},
        "test_replayed_at_bias": predicted,
        "test_crash_score_auroc": auroc(free["programs"], args.at),
        "test_biased": {k: v for k, v in biased.items() if k != "programs"},
        "replay_agrees": {"programs": len(free["programs"]), "same_verdict": agree},
        "curves": {
            **({"valid": curve(valid["programs"], top, args.at)} if valid else {}),
            "test": curve(free["programs"], top, args.at),
        },
    }
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, str(out.with_suffix(".png")))
    # the free decodes stay in the partial file for a run with the other `at`
    e0, e1 = free["runtime_errors"], biased["runtime_errors"]
    print(
        f"bias {bias:.3f} (chosen on {report['chosen_on']}); replay agrees on {agree}/{len(free['programs'])} verdicts"
    )
    print(f"{'':28} {'free':>10} {'biased':>10}")
    print(f"{'detection accuracy':28} {e0['detection_accuracy']:>10.1f} {e1['detection_accuracy']:>10.1f}")
    print(f"{'TP / FP':28} {str(e0['tp']) + ' / ' + str(e0['fp']):>10} {str(e1['tp']) + ' / ' + str(e1['fp']):>10}")
    print(
        f"{'localisation (of crashes)':28} {e0['localisation_accuracy'] or 0:>10.1f} "
        f"{e1['localisation_accuracy'] or 0:>10.1f}"
    )
    print(f"{'crash-score AUROC (' + args.at + ')':28} {report['test_crash_score_auroc'] or 0:>10.1f}")
    for d in free["datasets"]:
        a, b = free["datasets"][d], biased["datasets"][d]
        print(
            f"{d + ' trace acc (cut %)':28} {a['trace_accuracy']:>5} ({a['unfinished_share'] or 0:.0f}) "
            f"{b['trace_accuracy']:>5} ({b['unfinished_share'] or 0:.0f})"
        )
    print(f"report: {out}")


if __name__ == "__main__":
    main()
