"""The models this repository ships (models/NAME): they load offline from a fresh clone,
state what they are, and trace a program."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from .conftest import ROOT

pytest.importorskip("torch")
FOLDERS = (
    sorted(p for p in (ROOT / "models").glob("*") if (p / "config.json").exists()) if (ROOT / "models").is_dir() else []
)
VALUE_MODELS = [p for p in FOLDERS if json.loads((p / "config.json").read_text()).get("value_model")]
MODELS = [p for p in FOLDERS if p not in VALUE_MODELS]  # trace models


def test_at_least_one_model_is_shipped():
    assert MODELS, "no model under models/: the README's first example needs one"


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_a_shipped_model_is_small_bf16_and_carded(model):
    from safetensors import safe_open

    size = sum(f.stat().st_size for f in model.iterdir() if f.is_file())
    assert size <= 50 * 10**6, f"{model.name} is {size / 1e6:.1f} MB; the repository ships models of at most 50 MB"
    with safe_open(str(model / "model.safetensors"), "pt") as f:
        dtypes = {str(f.get_slice(k).get_dtype()) for k in f.keys()}
    assert dtypes <= {"BF16", "I64"}, dtypes
    card = (model / "README.md").read_text()
    for needed in ("license:", "## Data", "## Scores", "trace accuracy", "codeexecutor trace"):
        assert needed in card, needed
    config = json.loads((model / "config.json").read_text())
    assert config["model_type"] == "codeexecutor" and config.get("trace_python")


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_a_shipped_model_traces_offline_from_the_command_line(model, tmp_path):
    prog = tmp_path / "sum.py"
    prog.write_text("a, b = map(int, input().split())\ns = 0\nfor i in range(b - a):\n    s += i\nprint(s - a)\n")
    (tmp_path / "in.txt").write_text("8 13\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "no-hub-cache")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "trace",
            str(prog),
            "--stdin",
            str(tmp_path / "in.txt"),
            "--model",
            str(model.relative_to(ROOT)),
            "--json",
            "--compare",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["steps"] and report["steps"][0]["line"] == 1  # it reads the program and writes its first line
    assert report["ground_truth"]["stdout"] == "2\n"


def test_the_value_model_is_shipped():
    assert VALUE_MODELS, "no value model under models/: exec --fill's default predictor needs one"


@pytest.mark.parametrize("model", VALUE_MODELS, ids=lambda p: p.name)
def test_a_shipped_value_model_is_small_carded_and_fills_a_snippet(model, tmp_path):
    from safetensors import safe_open

    size = sum(f.stat().st_size for f in model.iterdir() if f.is_file())
    assert size <= 10**6, f"{model.name} is {size / 1e6:.1f} MB: more would crowd what a GPU call carries"
    with safe_open(str(model / "model.safetensors"), "pt") as f:
        assert {str(f.get_slice(k).get_dtype()) for k in f.keys()} <= {"F16", "BF16", "I8"}
    card = (model / "README.md").read_text()
    for needed in ("license:", "## Data", "## Scores", "codeexecutor exec", "torch"):
        assert needed in card, needed
    prog = tmp_path / "snippet.py"
    prog.write_text(
        "if not has_min_size(all_data):\n    raise RuntimeError('x')\nn = len(all_data) * split\nprint(n)\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "codeexecutor", "exec", str(prog), "--fill", str(model.relative_to(ROOT)), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    kinds = {i["name"]: i["kind"] for i in report["injections"] if i["use"] == "name"}
    assert kinds["has_min_size"] == "callable" and kinds["all_data"] in ("list", "tuple", "str", "dict")
    assert 1 in report["covered_lines"] and 3 in report["covered_lines"]


def test_the_shipped_trace_model_carries_a_small_int8_crash_detector():
    """The crash detector beside the shipped trace model (docs/runtime-errors.md): int8, small
    enough for a GPU call's working tree, its threshold from a validation split, and it
    tells a misspelt name from the program it was misspelt in."""
    from safetensors import safe_open

    from codeexecutor.generation.search import TraceGenerator
    from codeexecutor.modeling.line_facts import FACTS

    model = ROOT / "models" / "codeexecutor-mini-cpu"
    size = (model / "detector.safetensors").stat().st_size
    assert size <= 1.2 * 10**6, f"the detector is {size / 1e6:.2f} MB: more would crowd what a GPU call carries"
    with safe_open(str(model / "detector.safetensors"), "pt") as f:
        assert (f.metadata() or {}).get("quantization") == "int8-rows"
    info = json.loads((model / "detector.json").read_text())
    assert {"NameError", "TypeError", "ValueError", "other"} <= set(info["kinds"]) and info["facts"] == FACTS
    assert 0 < info["threshold"] < 1 and info["valid"]["programs"] > 1000
    detector = TraceGenerator(str(model), device="cpu").detector
    fixed = "n = int('4')\ntotal = 0\nfor i in range(n):\n    total += i\nprint(total)\n"
    crash, clean = detector.predict([fixed.replace("print(total)", "print(totl)"), fixed])
    assert crash.crashed and crash.type == "NameError" and crash.line == 5, crash
    assert clean.probability < crash.probability


def test_the_default_trace_model_is_the_best_shipped_one_on_the_fixed_sample(tmp_path):
    from codeexecutor.modeling.shipped import DEMO, default_model, ranked

    def folder(name, kind, limit, accuracy):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"model_type": kind}))
        sets = {"codenetmut": {"trace_accuracy": accuracy}}
        (tmp_path / name / "scores.json").write_text(json.dumps({"sets": sets, "limit": limit}))

    assert default_model(str(tmp_path)) == DEMO  # nothing shipped: the demo's model
    folder("cpu", "codeexecutor", 300, 12.0)
    folder("gpu", "codeexecutor", 300, 31.0)
    folder("gpu-on-fewer", "codeexecutor", 100, 60.0)  # another sample: not compared
    folder("values", "value-model", 300, 99.0)  # not a trace model
    assert [pathlib.Path(f).name for _, f in ranked(str(tmp_path))] == ["gpu", "cpu"]
    assert pathlib.Path(default_model(str(tmp_path))).name == "gpu"
    best = ranked()[0][1]  # this repository's: models/codeexecutor-mini-cpu until a better one lands
    assert pathlib.Path(default_model()).resolve() == pathlib.Path(best).resolve()
