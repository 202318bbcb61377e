"""experiments/interpolate.py: weight interpolation between two exports of one run."""

import pathlib
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _export(path, seed, **kw):
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel

    torch.manual_seed(seed)
    model = CodeExecutorModel(CodeExecutorConfig.preset("tiny", vocab_size=300, pad_token_id=1, **kw))
    model.save_pretrained(path)
    return model


def _logits(model, x, y):
    with torch.no_grad():
        return model.eval()(x, torch.ones_like(x), y, torch.ones_like(y)).logits


def test_interpolated_export_holds_the_weighted_mean_and_loads(tmp_path):
    from interpolate import interpolate

    from codeexecutor.modeling.model import CodeExecutorModel

    a, b = _export(tmp_path / "a", 0), _export(tmp_path / "b", 1)
    x, y = torch.randint(3, 300, (2, 6)), torch.randint(3, 300, (2, 5))
    for alpha, want in ((0.0, a), (1.0, b)):
        got = CodeExecutorModel.from_pretrained(
            interpolate(str(tmp_path / "a"), str(tmp_path / "b"), alpha, str(tmp_path / "m"))
        )
        assert torch.allclose(_logits(got, x, y), _logits(want, x, y), atol=1e-5)
    mid = CodeExecutorModel.from_pretrained(
        interpolate(str(tmp_path / "a"), str(tmp_path / "b"), 0.25, str(tmp_path / "m"))
    )
    pa, pb, pm = (dict(m.named_parameters()) for m in (a, b, mid))
    for name in pm:
        assert torch.allclose(pm[name], 0.75 * pa[name] + 0.25 * pb[name], atol=1e-6), name
    assert mid.lm_head.weight.data_ptr() == mid.roberta.embeddings.word_embeddings.weight.data_ptr()  # still tied
    assert not (tmp_path / "m.tmp").exists()


def test_exports_of_different_shapes_are_refused(tmp_path):
    from interpolate import interpolate

    _export(tmp_path / "a", 0)
    _export(tmp_path / "b", 0, positions="rotary")
    with pytest.raises(SystemExit, match="differ in shape"):
        interpolate(str(tmp_path / "a"), str(tmp_path / "b"), 0.5, str(tmp_path / "m"))
    with pytest.raises(SystemExit, match="no model.safetensors"):
        interpolate(str(tmp_path / "a"), str(tmp_path / "none"), 0.5, str(tmp_path / "m"))


def test_the_script_scores_each_alpha_on_the_test_split(overfit_model, demo_data, tmp_path):
    import json
    import os
    import shutil
    import subprocess

    model, _ = overfit_model
    run = tmp_path / "run"
    run.mkdir()
    shutil.copytree(model, run / "final")
    shutil.copytree(model, run / "stage1-singleline")
    env = {**os.environ, "CODEEXECUTOR_RESULTS": str(tmp_path / "results")}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "experiments" / "interpolate.py"),
            "--a",
            str(run / "stage1-singleline"),
            "--b",
            str(run / "final"),
            "--alphas",
            "0",
            "0.5",
            "--data",
            str(demo_data),
            "--datasets",
            "singleline",
            "--limit",
            "4",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (out,) = (tmp_path / "results").glob("interpolation-*.jsonl")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(x["alpha"], x["dataset"], x["examples"]) for x in lines] == [
        (0.0, "singleline", 4),
        (0.5, "singleline", 4),
    ]
    assert lines[0]["trace_accuracy"] == lines[1]["trace_accuracy"]  # one model at both ends: the same model between
    assert (run / "interp-stage1-singleline-0.5" / "model.safetensors").exists()
    bad = subprocess.run(
        [
            sys.executable,
            str(ROOT / "experiments" / "interpolate.py"),
            "--a",
            str(run / "final"),
            "--b",
            str(run / "final"),
            "--alphas",
            "1.5",
            "--data",
            str(demo_data),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 1 and "--alphas lie in [0, 1]" in bad.stderr and "Traceback" not in bad.stderr
