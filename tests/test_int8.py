"""Weights shipped as int8 codes a row: the bound on each value's error, the files a loader
reads, and the refusals."""

import json

import pytest

from codeexecutor.generation.decoding import Decoding

torch = pytest.importorskip("torch")


def test_codes_come_back_within_half_a_step_of_each_row():
    from codeexecutor.modeling.int8 import MIN_ELEMENTS, SCALE, dequantize, quantize

    g = torch.Generator().manual_seed(0)
    tensors = {
        "w": torch.randn(64, 128, generator=g) * torch.linspace(0.01, 3, 64)[:, None],  # rows of unlike sizes
        "zero_row": torch.cat([torch.zeros(1, 128), torch.randn(63, 128, generator=g)]),
        "norm": torch.randn(128, generator=g),
        "small": torch.randn(8, 8, generator=g),
        "ids": torch.arange(10),
    }
    codes = quantize(tensors)
    assert codes["w"].dtype == torch.int8 and codes["w" + SCALE].shape == (64,)
    assert codes["norm"].dtype == torch.bfloat16 and codes["small"].dtype == torch.bfloat16  # 64 < MIN_ELEMENTS
    assert 8 * 8 < MIN_ELEMENTS <= 64 * 128 and codes["ids"].dtype == torch.int64
    back = dequantize(codes)
    assert set(back) == set(tensors)
    for name in ("w", "zero_row"):
        step = tensors[name].abs().amax(dim=1, keepdim=True) / 127
        assert bool(((back[name] - tensors[name]).abs() <= step / 2 + 1e-7).all())
    assert bool((back["zero_row"][0] == 0).all()) and torch.equal(back["ids"], tensors["ids"])
    assert codes["w"].abs().amax().item() == 127  # each row's largest value is a full code


def test_an_int8_folder_loads_as_the_model_and_from_pretrained_alone_refuses_it(overfit_model, tmp_path):
    from safetensors.torch import load_file, save_file

    from codeexecutor.errors import UsageError
    from codeexecutor.generation import TraceGenerator
    from codeexecutor.modeling.int8 import INT8_FILE
    from codeexecutor.modeling.loading import load_model
    from codeexecutor.modeling.model import CodeExecutorModel
    from codeexecutor.training.card import Training, write_card
    from codeexecutor.training.export import save_shipped

    model, rows = overfit_model
    float_size = (model / "model.safetensors").stat().st_size
    params = save_shipped(str(model), str(tmp_path / "int8"), "int8")
    save_shipped(str(model), str(tmp_path / "bf16"), "bf16")
    folder = tmp_path / "int8"
    assert sorted(p.name for p in folder.iterdir() if "safetensors" in p.name) == [INT8_FILE]
    bf16_size = (tmp_path / "bf16" / "model.safetensors").stat().st_size
    assert (
        bf16_size < 0.55 * float_size and (folder / INT8_FILE).stat().st_size < 0.9 * bf16_size
    )  # float32 on disk here
    from safetensors import safe_open

    with safe_open(
        str(folder / INT8_FILE), "pt"
    ) as f:  # the output layer (tied embeddings) kept in bf16, the rest int8
        kinds = {k: str(f.get_slice(k).get_dtype()) for k in f.keys()}
    assert kinds["roberta.embeddings.word_embeddings.weight"] == "BF16" and "I8" in kinds.values()

    a, b = load_model(str(model)), load_model(str(folder))
    assert not b.training and b.lm_head.weight is b.roberta.embeddings.word_embeddings.weight
    assert params == sum(p.numel() for p in a.parameters())
    sa, sb = a.state_dict(), b.state_dict()
    assert set(sa) == set(sb)
    for name, value in sa.items():  # each value within half a step of its row's codes (bf16 for vectors)
        limit = value.abs().amax(dim=-1, keepdim=True) / 254 if value.dim() == 2 else value.abs() / 128
        assert bool(((sb[name] - value).abs() <= limit + 1e-6).all()), name
    assert (
        TraceGenerator(str(folder))
        .generate([rows[0]["input"]], Decoding(beam=1, max_length=40, names=False, values=False))[0]
        .text
    )

    with pytest.raises(OSError):  # no model.safetensors: a loader that does not know int8 finds no weights
        CodeExecutorModel.from_pretrained(str(folder))
    write_card(folder, scores={"sets": {}}, training=Training("test", None, None, 0, "test"))
    assert (
        "weights in int8" in (folder / "README.md").read_text()
        and f"{params:,} parameters" in (folder / "README.md").read_text()
    )

    unmarked = load_file(str(folder / INT8_FILE))
    save_file(unmarked, str(folder / INT8_FILE), metadata={"format": "pt"})  # codes without the scheme's mark
    with pytest.raises(UsageError, match="quantization None"):
        load_model(str(folder))
    assert json.loads((folder / "config.json").read_text())["model_type"] == "codeexecutor"


def test_the_benchmark_scores_both_copies_on_the_same_examples(overfit_model, demo_data, tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    model, _ = overfit_model
    env = {**os.environ, "CODEEXECUTOR_RESULTS": str(tmp_path / "results")}
    run = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_int8.py",
            "--model",
            str(model),
            "--data",
            str(demo_data),
            "--limit",
            "3",
            "--work",
            str(tmp_path / "work"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads((tmp_path / "results" / f"int8-{model.name}.json").read_text())
    assert report["bytes"]["int8"] < report["bytes"]["reference"] and report["limit"] == 3
    assert {"singleline", "tutorial", "codenetmut"} <= set(report["sets"])
    for s in report["sets"].values():
        assert 0 <= s["identical"] <= 100 and set(s) == {"reference", "int8", "identical"}
