"""Here, before a lease: the wheels a call carries (what the lent GPU machine's image
lacks, at the versions requirements.txt pins, for its Python 3.12) into .campaign/whl, and
the lease's plan: the seconds of its steps, the model it continues, the room a call leaves.

    .venv/bin/python gpu_run/wheels.py            # .campaign/whl (a minute; pip download)
    bash gpu_run/run.sh --plan                    # the plan, ready or not, in a few lines
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from codeexecutor.atomic import replacing  # noqa: E402  (after the checkout is on the path)

LIMIT = 64 * 2**20  # what one device call carries, working tree included
PACK = ROOT / ".campaign"
# The wheels a call carries (gpu_run/recipe.yaml `wheels`): what the lease imports that the
# image lacks, DeepSpeed's for the second call, transformers slimmed, what is built here.
_W = yaml.safe_load((ROOT / "gpu_run" / "recipe.yaml").read_text())["wheels"]
CARRY, DEEPSPEED, BUILD = _W["carry"], _W["deepspeed"], _W["build"]
SLIM = {name: (folder, tuple(keep)) for name, (folder, keep) in _W["slim"].items()}
# The packages the device's image has (the device tool's KINDS.md, nvidia-h200): a fact of
# the machine, against which a carried wheel's requirements are checked.
DEVICE_HAS = set(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath
msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-ml-py onnx opencv-python-headless optax opt-einsum packaging pandas pathspec patsy peft pillow pip pluggy
portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks
pytest python-dateutil pyyaml regex requests rich sacrebleu safetensors scikit-learn scipy seaborn sentencepiece
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server
threadpoolctl tiktoken tokenizers toolz torch tqdm transformers triton typer typing-extensions typing-inspect urllib3
werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
)
PLATFORMS = [
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_35_x86_64",
    "any",
]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            out[norm(name)] = version.strip()
    return out


def download(dest: pathlib.Path, deepspeed: bool = True) -> None:
    """The carried wheels into `dest`: CARRY, and DeepSpeed's where `deepspeed`."""
    versions = pins()
    names = CARRY + (DEEPSPEED if deepspeed else [])
    specs = [f"{n}=={versions[norm(n)]}" if norm(n) in versions else n for n in names]
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *platforms,
            "-d",
            str(dest),
            *specs,
        ],
        check=True,
    )
    if deepspeed:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(dest),
                *[f"{n}=={versions[norm(n)]}" for n in BUILD],
            ],
            check=True,
            env={**os.environ, "DS_BUILD_OPS": "0"},
        )
    for name, (folder, keep) in SLIM.items():
        for wheel in dest.glob(f"{name}-*.whl"):
            slim(wheel, folder, keep)


def slim(wheel: pathlib.Path, folder: str, keep: tuple[str, ...]) -> dict:
    """Rewrite `wheel` without the entries under `folder` whose next path part is not in
    `keep` (its RECORD rewritten to match); returns the sizes before and after."""
    before = wheel.stat().st_size

    def kept(name: str) -> bool:
        return not name.startswith(folder) or name[len(folder) :].split("/", 1)[0] in keep

    with (
        replacing(wheel) as tmp,
        zipfile.ZipFile(wheel) as src,
        zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out,
    ):
        for info in src.infolist():
            if not kept(info.filename):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = "".join(
                    line + "\n" for line in data.decode().splitlines() if kept(line.split(",", 1)[0])
                ).encode()
            out.writestr(info, data)
    return {"before": before, "after": wheel.stat().st_size}


def requirements(wheel: pathlib.Path) -> list[str]:
    """Names a wheel requires on Python 3.12 / Linux, extras left out."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    env = {
        "python_version": "3.12",
        "python_full_version": "3.12.3",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "implementation_name": "cpython",
        "os_name": "posix",
        "extra": "",
    }
    out = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(env):
                out.append(norm(req.name))
    return out


def missing(whl: pathlib.Path) -> dict[str, list[str]]:
    carried = {norm(w.name.split("-")[0]) for w in whl.glob("*.whl")}
    have = carried | {norm(n) for n in DEVICE_HAS}
    gaps = {}
    for w in sorted(whl.glob("*.whl")):
        need = [r for r in requirements(w) if r not in have]
        if need:
            gaps[w.name] = need
    return gaps


def plan(models: pathlib.Path = ROOT / "models") -> str:
    """The lease's steps and seconds, the model it continues, the room; refused (exit 2)
    where what the call carries is over LIMIT or a carried wheel needs what is not there."""
    import json

    from lease import previous, settings

    from codeexecutor.packed_cli import tree_bytes

    s = settings(False)
    after = s["after_training"]
    steps = stepping_seconds(s)
    lines = [
        f"a call of {s['seconds']} s: the data (the committed ids), a training process of "
        f"{steps + s['outside_steps']['training']} s (about {steps} s of steps), export {after['export']} s, "
        f"score {after['score']} s ({s['score']['limit']} examples a set); "
        f"then `--measure`: {s['measure']['seconds']} s"
    ]
    before = previous(models, s)
    if before:
        t = before["totals"]
        speed = before["leases"][-1].get("example_tokens_per_s")
        lines.append(
            f"continues models/{s['model']}: {t['leases']} leases, {t['training_minutes']} training minutes, "
            f"{t['example_tokens']:,} example tokens; the last trained {speed or '?'} example tokens a second"
        )
    else:
        lines.append(f"no models/{s['model']} yet: the first lease trains {s['first']} from scratch")
    wheels = sum(f.stat().st_size for f in (PACK / "whl").glob("*.whl")) if (PACK / "whl").is_dir() else 0
    tree = tree_bytes()
    if wheels and missing(PACK / "whl"):
        raise SystemExit(f"gpu_run: carried wheels need what is neither carried nor there: {missing(PACK / 'whl')}")
    model = 0 if before else int8_bytes(s)  # a committed model is in the tree already
    lines.append(
        f"carried: a working tree of {tree / 2**20:.1f} MiB and {wheels / 2**20:.1f} MiB of wheels, "
        f"{(LIMIT - tree - wheels) / 2**20:.1f} MiB of the {LIMIT / 2**20:.0f} left"
        + ("" if wheels else "; no wheels yet: python gpu_run/wheels.py")
        + (
            f"; {(LIMIT - tree - wheels - model) / 2**20:.1f} with the model (about {model / 2**20:.1f} MiB)"
            if model
            else ""
        )
    )
    if tree + wheels + model > LIMIT:
        raise SystemExit(
            f"gpu_run: {(tree + wheels + model) / 2**20:.1f} MiB, the committed model with it, is over what "
            "a call carries: drop a part of the data (codeexecutor packed drop) or carry fewer wheels"
        )
    manifest = json.loads((ROOT / "curricula" / "packed" / "manifest.json").read_text())
    speed = (before["leases"][-1].get("example_tokens_per_s") if before else None) or s["speed"]
    stages = s["later"] if before else yaml.safe_load((ROOT / s["first"]).read_text())["stages"]
    trained = stepping_seconds(s) * speed
    lines.append(
        f"data: {manifest['tokens']:,} tokens committed (fingerprint {manifest['fingerprint']}); at {speed:,} "
        f"example tokens a second the call trains {trained / 1e6:.0f} M, epochs a source: "
        + ", ".join(f"{n} {e:.1f}" for n, e in epochs(manifest, stages, trained).items())
    )
    return "\n".join(lines)


def epochs(manifest: dict, stages: list[dict], trained: float) -> dict[str, float]:
    """The epochs a training of `trained` example tokens makes over each committed source: a
    stage takes its share of the tokens, its sources their weights' share of its examples
    (so of its tokens, by each source's tokens a row)."""
    from codeexecutor.training.tokenized import folder_name

    def figures(name: str) -> tuple[int, int]:
        parts = manifest["sources"][name]["parts"].values()
        return sum(p["rows"] for p in parts), sum(p["tokens"] for p in parts)

    taken = dict.fromkeys(manifest["sources"], 0.0)
    for st in stages:
        share = st.get("share") or 1 / len(stages)
        srcs = [(folder_name(x["path"]), x.get("weight", 1.0)) for x in st["sources"]]
        per_row = {n: figures(n)[1] / max(figures(n)[0], 1) for n, _ in srcs}
        mass = sum(w * per_row[n] for n, w in srcs)
        for n, w in srcs:
            taken[n] += trained * share * w * per_row[n] / mass
    return {n: taken[n] / max(figures(n)[1], 1) for n in sorted(taken)}


def stepping_seconds(s: dict) -> int:
    """The seconds of training steps a call leaves: its seconds less what comes after the
    training and what the recipe's `outside_steps` counts outside them."""
    return s["seconds"] - sum(s["after_training"].values()) - sum(s["outside_steps"].values())


def int8_bytes(s: dict) -> int:
    """The bytes the lease's model takes in int8 (modeling/int8.py): its word embeddings in
    bfloat16, every other matrix one byte a value and a float32 scale a row."""
    import yaml

    from codeexecutor.modeling.model import PRESETS

    preset = yaml.safe_load((ROOT / s["first"]).read_text())["model"]["preset"]
    preset = next((x.split("=", 1)[1] for x in s["set"] if x.startswith("model.preset=")), preset)
    h, layers, ff = (PRESETS[preset][k] for k in ("hidden_size", "num_hidden_layers", "intermediate_size"))
    vocab = 8213  # the committed tokenizer's, with the format tokens
    per_layer = 4 * h * h + 2 * h * ff + (4 * h + h + ff) * 4
    return int(1.05 * (2 * vocab * h + layers * per_layer))  # 5% for the biases, norms and the output head


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="gpu_run/wheels.py", description="the wheels a lease carries; its plan")
    ap.add_argument("--plan", action="store_true", help="print the lease's plan and the room instead")
    ap.add_argument("--no-deepspeed", action="store_true", help="leave DeepSpeed's wheels out (5.1 MB)")
    a = ap.parse_args(argv)
    if a.plan:
        print(plan())
        return 0
    (PACK / "whl").mkdir(parents=True, exist_ok=True)
    download(PACK / "whl", deepspeed=not a.no_deepspeed)
    gaps = missing(PACK / "whl")
    if gaps:
        print(f"gpu_run: requirements neither carried nor on the device: {gaps}; add them to CARRY", file=sys.stderr)
        return 2
    print(plan())
    return 0


if __name__ == "__main__":
    sys.exit(main())
