"""What the benchmarks share: paths, the real programs they run on, writing their reports."""

from __future__ import annotations

import json
import os
import pathlib
import random
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "atcoder-python"
RESULTS = pathlib.Path(
    os.environ.get("CODEEXECUTOR_RESULTS") or ROOT / "benchmarks" / "results"
)  # another folder, for a run that keeps its files elsewhere
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load_programs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    records = [json.loads(line) for line in (DATA / "index.jsonl").open()]
    records = random.Random(seed).sample(records, min(n, len(records)))
    out = []
    for rec in records:
        pid, sid = rec["problem_id"], rec["submission_id"]
        src = (DATA / "data" / pid / "Python" / f"{sid}.py").read_text(encoding="utf-8", errors="replace")
        inp = DATA / "derived" / "input_output" / "data" / pid / "input_0.txt"
        out.append((src, inp.read_text() if inp.exists() else ""))
    return out


def worktree(commit: str) -> pathlib.Path:
    """A checkout of `commit` beside this one (runs/baseline-COMMIT, made once): the code a
    benchmark measures today's against in the same run."""
    import subprocess

    path = ROOT / "runs" / f"baseline-{commit}"
    if not (path / "codeexecutor").is_dir():
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--force", str(path), commit],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    return path


def device_label() -> str:
    """The accelerator's name as a file-name part (`NVIDIA-H100-80GB-HBM3`), or `cpu`."""
    import torch

    return torch.cuda.get_device_name(0).replace(" ", "-") if torch.cuda.is_available() else "cpu"


def write_report(name: str, report: dict) -> pathlib.Path:
    """Write benchmarks/results/NAME.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def fast_bf16() -> bool:
    """Whether bfloat16 matmuls run natively here: a GPU that supports them, or a CPU with
    AVX512_BF16 or AMX instructions (elsewhere autocast to bf16 is emulated, and slower)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def machine() -> dict:
    """What a wall-clock figure depends on: the processor's name, its cores and whether bf16
    is native (on a CPU without AVX512_BF16 a budgeted run trains in float32, fewer steps)."""
    import platform

    import torch

    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        cpu = ""
    return {
        "device": name,
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "bf16_native": fast_bf16(),
        "torch_threads": torch.get_num_threads(),
    }


def busy_share(seconds: float = 2.0) -> float | None:
    """The share of this machine's CPU time that was busy over `seconds` while the caller
    slept (so: other processes), from /proc/stat; None where that cannot be read. A
    calibrated benchmark cannot tell a busy machine from a slow one, so it looks first."""
    import time

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return round(1 - (idle1 - idle0) / total, 3) if total > 0 else None


def model_arguments(ap, datasets_help: str) -> None:
    """The options of a benchmark that scores one run's model on its test sets."""
    ap.add_argument("--run", required=True, help="a training run's folder (its final/ model is scored)")
    ap.add_argument("--model", help="another model folder to score (default RUN/final)")
    ap.add_argument("--data", help="the datasets' folder (default: the one the run's curriculum trained on)")
    ap.add_argument("--datasets", nargs="+", default=["singleline", "tutorial", "codenetmut"], help=datasets_help)


def chosen_model(script: str, args) -> str:
    """The model folder those options name; exits 2 with a line naming the fix when it has none."""
    model = args.model or os.path.join(args.run, "final")
    if not os.path.isfile(os.path.join(model, "config.json")):
        print(f"{script}: no model at {model} (pass --model, or a run whose final/ export exists)", file=sys.stderr)
        sys.exit(2)
    return model


def dataset_folders(script: str, run: str, data: str | None, names: list[str]) -> dict[str, str]:
    """name -> folder of each dataset in `names`, under `data` or else the folder the run's
    curriculum trained on; exits with a line naming the fix when one is missing."""
    if data is None:
        cur = os.path.join(run, "curriculum.json")
        if not os.path.isfile(cur):
            sys.exit(f"{script}: no {cur} to find the datasets from: pass --data DIR")
        with open(cur) as f:
            data = os.path.dirname(os.path.dirname(json.load(f)["stages"][0]["sources"][0]["path"]))  # DATA/NAME/NAME
    from eval.evaluate import find_datasets

    folders = find_datasets(data)
    missing = [d for d in names if d not in folders]
    if missing:
        sys.exit(f"{script}: no dataset {', '.join(missing)} under {data} (found: {', '.join(folders) or 'none'})")
    return {name: folders[name] for name in names}


def score_test(
    model: str,
    folders: dict[str, str],
    limit: int,
    out: pathlib.Path,
    fields: dict,
    names: bool = False,
    values: bool = False,
) -> None:
    """Score `model` (greedy, the release's metric) on the fixed test sample of each dataset
    and append a line per dataset to `out`, `fields` first. Datasets saved in one folder
    score together (the crashing programs come with CodeNetMut). `names`, `values`: decode
    with the state rules (generation/constraints.py), recorded as `constrained_names` and
    `constrained_values`."""
    import time

    from codeexecutor.generation.decoding import Decoding
    from eval.evaluate import EvalOptions, evaluate_model

    out.parent.mkdir(parents=True, exist_ok=True)
    for parent in dict.fromkeys(os.path.dirname(f) for f in folders.values()):
        start = time.perf_counter()
        report = evaluate_model(
            model,
            parent,
            "test",
            limit,
            Decoding(beam=1, names=names, values=values),
            progress=False,
            options=EvalOptions(batch_size=16),
        )
        for name, scores in report["datasets"].items():
            line = {
                **fields,
                "dataset": name,
                "device": device_label(),
                "examples": scores["examples"],
                "metric": report["metric"],
                "decoding": "greedy (beam 1)",
                "constrained_names": names,
                "constrained_values": values,
                **scores["table3"],
                "unfinished_share": (scores.get("unfinished") or {}).get("share"),
                **(
                    {"runtime_errors": report["runtime_errors"]}
                    if name == "errors" and report.get("runtime_errors")
                    else {}
                ),
                "seconds": round(time.perf_counter() - start, 1),
            }
            print(
                f"{os.path.basename(model):<28} {name:<12} trace {line['trace_accuracy']}  "
                f"output {line['output_accuracy']}",
                flush=True,
            )
            with open(out, "a") as f:
                f.write(json.dumps(line) + "\n")
