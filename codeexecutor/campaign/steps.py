"""The steps of a GPU draw and what they share (campaign/draw.py runs them; the last one,
on the time left, is in campaign/checks.py)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time

from codeexecutor import atomic

ROOT = pathlib.Path(__file__).resolve().parents[2]
# seconds of steps in one draw: a call may run 600, and the machine's start is counted too;
# CAMPAIGN_BUDGET shortens it for a call on what is left of a lease
BUDGET = int(float(os.environ.get("CAMPAIGN_BUDGET", "540")))
SECOND_CALL = 270  # seconds of `run_draw.sh --deepspeed` (deepspeed_call.py) on what a draw leaves of a lease
SMOKE = os.environ.get("CAMPAIGN_SMOKE") == "1"
OUT = pathlib.Path(os.environ.get("OUT") or ROOT / "runs" / "campaign" / "out")
WORK = pathlib.Path(os.environ.get("CAMPAIGN_WORK") or ROOT / "runs" / "campaign")
PACK = pathlib.Path(os.environ.get("CAMPAIGN_PACK") or ROOT / ".campaign")
PIECE = int(float(os.environ.get("CAMPAIGN_PIECE_MIB", "16")) * 2**20)  # the largest file a draw brings back
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "V100": 125.0, "L4": 121.0}  # dense bf16 (V100: fp16)
# The sizes the draw works at: on the accelerator, and at toy scale on the CPU.
SIZES = {
    # speed_runs: what the throughput step measures after the scoring (bench_step.py --speed):
    # the training preset (its graph in inductor's cache by then), then `base` for its MFU.
    # more_runs: measured last, on the time left, beside DeepSpeed's step.
    False: {
        "presets": ("small", "base"),
        "budgets": (12288, 49152),
        "train_preset": "small",
        "speed_runs": ("small:49152", "base:49152"),
        "more_runs": ("small:196608", "base:196608"),
        "decode": 300,
        "launch_steps": 6,
        "fp16_steps": 40,
        "ds": "zero2_bf16.json",
        "autocast": None,
        "score_limit": 100,
        "batch": 320,
        "attention": "flex",
        "launch_need": 110,
        "fp16_need": 45,
        "more_need": 90,
        "tests_need": 90,
        "save_every": 250,
    },  # a checkpoint of `small` (weights and AdamW) is about 280 MB: a second or two
    True: {
        "presets": ("tiny", "mini"),
        "budgets": (1024, 2048),
        "train_preset": "tiny",
        "speed_runs": ("tiny:2048",),
        "more_runs": (),
        "decode": 8,
        "launch_steps": 4,
        "fp16_steps": 0,
        "ds": "cpu.json",
        "autocast": None,
        "score_limit": 4,
        "batch": 8,
        "attention": "sdpa",
        "launch_need": 0,
        "fp16_need": 0,
        "more_need": 10**9,
        "tests_need": 10**9,
        "train_minutes_max": 0.4,
        "save_every": 20,
    },  # a CPU's speed moves with its load: the smoke run stays short
}[SMOKE]
# step: (seconds on the accelerator, seconds in the CPU smoke run, the file it writes, what it does),
# in the order they run: what a draw exists for (a trained model, back here, scored) first, then
# the measurements, then the checks that earlier draws already answered, on the time left. The
# training plans itself (its budget measures its own speed, compile included, and falls back
# from a step that fails to compile), so nothing needs measuring before it. The GPU seconds
# are measured on an H100: preflight 21 s, each training process about 20 s before its first
# step, a deepspeed-launcher run 50 to 80 s.
STEPS = {
    "preflight": (30, 90, "checks.json", "versions, imports, the accelerator, ds_report, a matmul's TFLOP/s, the pack"),
    "unpack": (20, 30, "checks.json", "the packed tokenizer, test samples and each source's ids, as tokenized folders"),
    # the smoke run's 24 s of training, after a child's start-up that a loaded 2-core CPU can
    # stretch past a minute (a CI running two heavy tests at once: 105 s before the end)
    "train": (230, 240, "training.json", "the recipe on the packed data, in the time the steps after it leave"),
    "export": (10, 60, "model-meta.tar", "the model in bf16 safetensors pieces of 16 MiB"),
    "score": (
        60,
        240,
        "scores.json",
        "the six test samples, greedy, batched, cheapest first, in a child stopped at the limit",
    ),
    "throughput": (
        90,
        300,
        "throughput.json",
        "bench_step.py --speed: small and base at 48 k tokens a step (compile "
        "seconds, tokens/s, MFU), greedy decoding at a batch of 300",
    ),
    "checks": (
        100,
        400,
        "checks.json",
        "tests/test_gpu.py (90 s: flex against tiles on the GPU), then on the time "
        "left: 192 k-token steps and DeepSpeed's, run_pretrain.sh stopped and resumed, fp16's loss scale",
    ),
}
RESERVED_AFTER_TRAIN = ("export", "score", "throughput")  # steps the training leaves their time to; `checks` takes
# its own (the GPU tests' 90 s) and what the others leave
SCORE_ORDER = ("singleline", "tutorial", "codenetmut", "functions")  # test builds by decoding cost, cheapest first


class Refused(Exception):
    """The draw cannot start: one line naming the fix, exit 2."""


def plan() -> str:
    """The steps, their time limits on the accelerator (and in the CPU smoke run) and files."""
    lines = [f"{'step':<11} {'GPU s':>6} {'CPU s':>6}  writes           what"]
    for name, (gpu, cpu, file, what) in STEPS.items():
        lines.append(f"{name:<11} {gpu:>6} {cpu:>6}  {file:<16} {what}")
    gpu, cpu = (sum(spec[k] for spec in STEPS.values()) for k in (0, 1))
    lines.append(f"{'total':<11} {gpu:>6} {cpu:>6}  budget of a draw: {BUDGET} s of steps in one call of at most 600 s")
    lines.append(
        f"then, a second call on the lease's last minutes: run_draw.sh --deepspeed ({SECOND_CALL} s: ZeRO-2 fp16 to "
        "200 steps through run_pretrain.sh, its loss scale; overlap_comm off and on; deepspeed.json)"
    )
    return "\n".join(lines)


def write_json(name: str, obj: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    atomic.write_json(OUT / name, obj)


def sh(args: list[str], timeout: float, log: pathlib.Path, env: dict | None = None) -> int:
    """Run a command (its own process group, killed whole at the timeout), output to `log`."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(map(str, args))}\n")
        f.flush()
        proc = subprocess.Popen(
            list(map(str, args)),
            stdout=f,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        try:
            return proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            f.write(f"[campaign] killed at its time limit of {timeout:.0f} s\n")
            return 124
        except BaseException:  # the draw itself is being stopped: its command goes with it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise


def tail(path: pathlib.Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


# -- the pack --------------------------------------------------------------------------------
def check_pack() -> dict:
    from codeexecutor.campaign.pack import verify
    from codeexecutor.errors import UsageError

    manifest_path = PACK / "manifest.json"
    if not manifest_path.is_file():
        raise Refused(
            f"no pack at {PACK}: run codeexecutor draw pack{' --smoke' if SMOKE else ''} where the data "
            "is and carry .campaign with the call"
        )
    manifest = json.loads(manifest_path.read_text())
    try:
        verify(manifest, PACK)  # the working tree beside it as the pack measured it: git may not be here
    except UsageError as exc:
        raise Refused(str(exc)) from None
    if bool(manifest.get("smoke")) != SMOKE:
        raise Refused(
            f"{PACK} is a {'smoke' if manifest.get('smoke') else 'full'} pack and this is "
            f"{'the CPU smoke run' if SMOKE else 'a GPU draw'}: pack with{'out' if not SMOKE else ''} --smoke"
        )
    if not manifest.get("python"):
        raise Refused(f"{PACK} does not say which interpreter traced its data: pack it again")
    return manifest


# -- the steps -------------------------------------------------------------------------------
def preflight(checks: dict, log: pathlib.Path) -> None:
    import platform

    import torch

    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "smoke": SMOKE,
    }
    for name in ("transformers", "tokenizers", "datasets", "deepspeed", "safetensors", "yaml"):
        try:
            info[name] = getattr(__import__(name), "__version__", "present")
        except Exception as exc:  # noqa: BLE001  (any import failure is a reason to stop here)
            if name == "deepspeed" and isinstance(exc, ModuleNotFoundError):  # a pack without room for it
                info[name] = None
                continue
            raise Refused(
                f"cannot import {name} ({type(exc).__name__}: {exc}); carry its wheel (campaign/wheels.py)"
            ) from exc
    import codeexecutor.training.loop  # noqa: F401  (the training loop imports: a broken one stops here)

    if not SMOKE and not torch.cuda.is_available():
        raise Refused("no CUDA device here: run the draw on the lent GPU machine, or set CAMPAIGN_SMOKE=1 on a CPU")
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            device=props.name,
            memory_gib=round(props.total_memory / 2**30, 1),
            sms=props.multi_processor_count,
            bf16=torch.cuda.is_bf16_supported(),
            sdpa={
                "flash": torch.backends.cuda.flash_sdp_enabled(),
                "efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                "math": torch.backends.cuda.math_sdp_enabled(),
            },
        )
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm", "--format=csv"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        info["nvidia_smi"] = smi.stdout.strip()
    else:
        info["device"] = "cpu"
    if info["deepspeed"]:
        ds = subprocess.run([sys.executable, "-m", "deepspeed.env_report"], capture_output=True, text=True, timeout=30)
        info["ds_report"] = re.sub(r"\x1b\[[0-9;]*m", "", ds.stdout + ds.stderr)[-1500:]  # its colours left out
    info["matmul_tflops"] = matmul_tflops()
    info["peak_tflops"] = next((v for k, v in PEAK_TFLOPS.items() if k in info["device"]), None)
    checks["preflight"] = info


def matmul_tflops() -> float:
    """A large bf16 matrix product's rate here (the ceiling MFU is also given against)."""
    import torch

    cuda = torch.cuda.is_available()
    n, dtype = (8192, torch.bfloat16) if cuda else (512, torch.float32)
    dev = "cuda" if cuda else "cpu"
    a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
    for _ in range(3):
        a @ b
    if cuda:
        torch.cuda.synchronize()
    t = time.perf_counter()
    reps = 10
    for _ in range(reps):
        a @ b
    if cuda:
        torch.cuda.synchronize()
    return round(2 * n**3 * reps / (time.perf_counter() - t) / 1e12, 2)


def unpack(checks: dict, manifest: dict) -> None:
    """The pack's tokenizer, curriculum and test samples, and each source's ids written back
    as the tokenized folder the curriculum names."""
    from codeexecutor.campaign.ids import unpack_tokenized

    data = WORK / "data"
    shutil.rmtree(data, ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    t = time.time()
    with tarfile.open(PACK / "data.tar.xz") as tar:
        tar.extractall(WORK, filter="data")
    from concurrent.futures import ProcessPoolExecutor

    from codeexecutor.campaign.pack import part_paths

    names = sorted(manifest["sources"])
    jobs = [([str(p) for p in part_paths(manifest, n, PACK)], str(data / "tokenized" / n)) for n in names]
    with ProcessPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as ex:
        rows = {n: header["rows"] for n, header in zip(names, ex.map(unpack_tokenized, *zip(*jobs)))} if jobs else {}
    for name in names:
        if rows[name] != manifest["sources"][name]["rows"]:
            raise Refused(
                f"the ids of {name} hold {rows[name]} rows, the manifest {manifest['sources'][name]['rows']}: "
                "pack it again"
            )
    checks["unpack"] = {
        "sources": rows,
        "tokens": manifest.get("tokens"),
        "test": manifest["test"],
        "python": manifest["python"],
        "seconds": round(time.time() - t, 1),
    }


def curriculum(
    name: str, stages: list[dict], preset: str, max_tokens: int, model: dict | None = None, **train
) -> pathlib.Path:
    """A curriculum over the packed data: the pack's model settings (and `model`'s), these stages."""
    import yaml

    raw = yaml.safe_load((WORK / "data" / "curriculum.yaml").read_text())
    raw["model"].update(preset=preset, tokenizer=str(WORK / "data" / "tokenizer"), **(model or {}))
    raw["train"].update(
        {
            "output_dir": str(WORK / name),
            "max_tokens": max_tokens,
            "log_every": 1,
            "save_every": 10**9,
            "eval_examples": 0,
            **({"autocast": SIZES["autocast"]} if SIZES["autocast"] else {}),
            **train,
        }
    )
    for st in stages:
        for src in st["sources"]:
            src["path"] = str(WORK / "data" / src["path"]) if not os.path.isabs(src["path"]) else src["path"]
    raw["stages"] = stages
    path = WORK / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def recipe_stages() -> list[dict]:
    import yaml

    return yaml.safe_load((WORK / "data" / "curriculum.yaml").read_text())["stages"]


def train_log(run: pathlib.Path) -> list[dict]:
    path = run / "train_log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_setup(run: pathlib.Path) -> dict:
    """What a run's curriculum.json says it trained on: the engine chosen and the
    `overlap_comm` its DeepSpeed config ended with (None where it wrote none)."""
    try:
        record = json.loads((run / "curriculum.json").read_text())
    except (OSError, ValueError):
        return {"engine": None, "overlap_comm": None}
    zero = (record.get("ds_config") or {}).get("zero_optimization", {})
    return {"engine": record.get("setup", {}).get("engine"), "overlap_comm": zero.get("overlap_comm")}


def skips_after(rows: list[dict], after: int) -> list[int]:
    """The logged steps past `after` at which fp16 skipped an update: DeepSpeed's cumulative
    `skipped_steps` is above the row before's (with `log_every` 1, that step's own skip)."""
    out, before = [], 0
    for r in rows:
        now = r.get("skipped_steps") or 0
        if r["step"] > after and now > before:
            out.append(r["step"])
        before = now
    return out


def speed(name: str, runs, deadline: float, log: pathlib.Path, decode: int = 0, deepspeed: bool = False) -> dict:
    """bench_step.py --speed on rows of the recipe's last stage (its longest traces), each
    measurement written as it ends; what it measured by the deadline."""
    stage = dict(recipe_stages()[-1], steps=1, warmup=1)
    stage["sources"] = [{k: v for k, v in s.items() if k not in ("hardest", "mine_from")} for s in stage["sources"]]
    cur = curriculum(name, [stage], SIZES["train_preset"], SIZES["budgets"][-1])
    out = WORK / f"{name}.json"
    out.unlink(missing_ok=True)
    code = sh(
        [
            sys.executable,
            ROOT / "benchmarks" / "bench_step.py",
            "--speed",
            "--runs",
            *runs,
            "--decode",
            decode,
            *([] if deepspeed else ["--no-deepspeed"]),
            "--curriculum",
            cur,
            "--budget",
            max(5, deadline - time.time() - 5),
            "--out",
            out,
        ],
        deadline - time.time(),
        log,
    )
    report = json.loads(out.read_text()) if out.exists() else {}
    return {"exit_code": code, **report}


def throughput(checks: dict, result: dict, log: pathlib.Path, deadline: float) -> str:
    """The training preset's step at the draw's budget (a clean steady step beside the
    training's own), then `base`'s MFU and greedy decoding at a batch of 300; the step's
    status names the measurements that failed."""
    report = speed("tput", SIZES["speed_runs"], deadline, log, SIZES["decode"])
    result.update(report)
    measured = checks.get("preflight", {}).get("matmul_tflops")
    for r in report.get("steps", []):
        if r.get("achieved_tflops") and measured:
            r["mfu_measured_matmul"] = round(r["achieved_tflops"] / measured, 4)
    return measurements_status(report)


def measurements_status(report: dict) -> str:
    """ok, or which of a speed report's measurements failed and the first error."""
    parts = [(f"{r.get('preset')}:{r.get('tokens_per_step')}", r) for r in report.get("steps", [])]
    parts += [("decode", report["decode"])] if isinstance(report.get("decode"), dict) else []
    failed = [(name, r["error"]) for name, r in parts if "error" in r]
    if not parts:
        return f"failed: no measurement came back (exit code {report.get('exit_code')})"
    if failed:
        return f"failed: {len(failed)} of {len(parts)} measurements ({', '.join(n for n, _ in failed)}): {failed[0][1]}"
    return "ok"


def train(result: dict, log: pathlib.Path, deadline: float) -> None:
    """The recipe's three stages through `codeexecutor pretrain --minutes`: the time up to
    `deadline` less a margin for the process's start until its training loop begins (the
    budget's clock starts there, and pays for the set-up and the compile, whatever they
    take), each stage fixing its steps after its warm-up from its own speed and its share
    of the time left, then fitted again to its planned end (training/budget.py). The data
    comes tokenized in the pack, so its build, tokenizer and tokenize phases have nothing
    to do."""
    startup = 20.0  # imports and the skipped phases before the loop (the second draw: ~20 s to a first step)
    minutes = max(0.2, (deadline - time.time() - startup) / 60)
    if SIZES.get("train_minutes_max"):
        minutes = min(minutes, SIZES["train_minutes_max"])
    stages = recipe_stages()
    for st in stages:
        st["share"] = st.get("share") or 1 / len(stages)
        st["warmup"] = max(1, min(st.get("warmup", 200), 100))
        for src in st["sources"]:
            if src.get("hardest"):
                src["mine_from"] = min(src.get("mine_from") or 4096, 4096)
                src["hardest"] = min(src["hardest"], src["mine_from"] // 3)
    trains = {"preset": SIZES["train_preset"], "max_tokens": SIZES["budgets"][-1], "attention": SIZES["attention"]}
    cur = curriculum(
        "run",
        stages,
        trains["preset"],
        trains["max_tokens"],
        {"attention": trains["attention"]},
        log_every=20,
        save_every=SIZES["save_every"],
    )  # a process that dies resumes from its last save
    shutil.rmtree(WORK / "run", ignore_errors=True)
    result.update(curriculum=str(cur), minutes=round(minutes, 2), trains=trains)
    write_json("training.json", result)
    start = time.time()
    code = sh(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "pretrain",
            "--recipe",
            cur,
            "--out",
            WORK / "run",
            "--minutes",
            f"{minutes:.3f}",
            "--no-score",
            "--ds-config",
            f"ds_configs/{SIZES['ds']}",
        ],
        deadline - time.time(),
        log,
        {"TORCH_LOGS": "recompiles"},
    )  # each recompile and the guard that failed, in the log's tail
    result.update(exit_code=code, seconds=round(time.time() - start, 1))
    collect_training(result, WORK / "run")


def collect_training(result: dict, out: pathlib.Path) -> None:
    """What the `pretrain` run under `out` did, into the step's `result`: its log, plan,
    steps and speed, the path its last process took and each process's attempt. A draw
    whose training.json did not come back is rebuilt from these files and the step's exit
    code and seconds, which its log holds."""
    rows = train_log(out / "run")
    result["log"] = rows
    plan = out / "run" / "plan.json"
    if plan.exists():
        result["plan"] = json.loads(plan.read_text())
    ends = {}  # each stage's last logged row: its steps and stepping seconds
    for r in rows:
        if "loss" in r:
            ends[r["stage"]] = r
    stepped = sum(r["stage_seconds"] for r in ends.values())
    if ends:  # what the run did, for the next draw's plan
        steps = max(r["step"] for r in ends.values())
        result["steps"] = {name: r["step"] for name, r in ends.items()}
        result["measured"] = {
            "steps": steps,
            "stepping_seconds": round(stepped, 1),
            "seconds_per_step": round(stepped / steps, 4),
            "overhead_seconds": round(result["seconds"] - stepped, 1),
            "tokens": sum(r["stage_tokens"] for r in ends.values()),
        }
    setup = out / "run" / "curriculum.json"
    if setup.exists():  # the path the last training process took: precision, attention, compile, fallbacks
        result["setup"] = json.loads(setup.read_text()).get("setup")
    record = out / "pretrain.json"
    if record.exists():  # each training process and how it ended (a dead one is carried on on a safer path)
        result["attempts"] = json.loads(record.read_text())["phases"].get("train", {}).get("attempts")


def trained_model() -> pathlib.Path | None:
    """The run's final model, else its last stage export (a run stopped at its limit)."""
    run = WORK / "run" / "run"
    if (run / "final" / "config.json").exists():
        return run / "final"
    stages = sorted(run.glob("stage*-*/config.json"), key=lambda p: p.parent.name)
    stages = [p.parent for p in stages if not p.parent.name.endswith("-best")]
    return stages[-1] if stages else None


def score(result: dict, model: pathlib.Path, log: pathlib.Path, deadline: float) -> str:
    """The six test samples, greedy and batched, decoded in a child process under the
    step's time limit (`score_sets`): a decode that overruns is stopped, and the test
    builds scored by then are kept. Returns the step's status."""
    parts = WORK / "scores"
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    builds = [p.name for p in test_builds()]
    code = sh([sys.executable, "-m", "codeexecutor.campaign.steps", "score", model, parts], deadline - time.time(), log)
    result.update(
        model=model.name, metric=None, decoding=f"greedy (beam 1), batches of {SIZES['batch']}", sets={}, exit_code=code
    )
    done = []
    for build in builds:
        path = parts / f"{build}.json"
        if not path.exists():
            continue
        report = json.loads(path.read_text())
        done.append(build)
        result["metric"] = report["metric"]
        for name, e in report["datasets"].items():
            result["sets"][name] = {
                "examples": e["examples"],
                **e["table3"],
                "aligned": e.get("aligned"),
                "unfinished": (e.get("unfinished") or {}).get("share"),
                "traced_by": e.get("traced_by"),
                "decode_seconds": report.get("decode_seconds"),
            }
        for key in ("runtime_errors", "runtime_errors_functions"):
            if report.get(key):
                result[key] = report[key]
    result["builds_scored"] = done
    write_json("scores.json", result)
    if code == 124:
        return f"cut at its time limit: {len(done)} of {len(builds)} test builds scored"
    return (
        "ok" if code == 0 and len(done) == len(builds) else f"failed: exit {code}, {len(done)} of {len(builds)} scored"
    )


def test_builds() -> list[pathlib.Path]:
    """The packed test builds, cheapest to decode first (SCORE_ORDER; others after, by name):
    a step cut at its limit has scored the most sets it could."""
    rank = {name: i for i, name in enumerate(SCORE_ORDER)}
    builds = [p for p in (WORK / "data" / "test").iterdir() if p.is_dir()]
    return sorted(builds, key=lambda p: (rank.get(p.name, len(rank)), p.name))


def score_sets(model: str, parts: str) -> None:
    """The child of `score`: each test build scored in turn, its report written as soon
    as it is done (`parts/BUILD.json`, without the predictions)."""
    from codeexecutor.generation.decoding import GREEDY
    from eval.evaluate import EvalOptions, evaluate_model

    for build in test_builds():
        t = time.time()
        report = evaluate_model(
            model,
            str(build),
            split="test",
            limit=SIZES["score_limit"],
            decoding=GREEDY,
            progress=False,
            options=EvalOptions(batch_size=SIZES["batch"]),
        )
        report.pop("predictions", None)
        report["decode_seconds"] = round(time.time() - t, 1)
        atomic.write_json(pathlib.Path(parts) / f"{build.name}.json", report, default=str)
        print(f"[score] {build.name}: {report['decode_seconds']} s", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["score"] and len(sys.argv) == 4:
        score_sets(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: python -m codeexecutor.campaign.steps score MODEL PARTS_DIR (the draw's scoring child)")
