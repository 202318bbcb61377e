"""Tokenizer in a step of its own, and sources tokenized once (training/tokenized.py)."""

import json
import pathlib

import pytest
import yaml

from .conftest import ROOT

pytest.importorskip("torch")


def _demo_curriculum(demo_data, tmp_path, **model):
    from codeexecutor.training.config import Curriculum

    raw = yaml.safe_load((ROOT / "curricula" / "demo.yaml").read_text())
    for stage in raw["stages"]:
        for src in stage["sources"]:
            src["path"] = str(demo_data / src["path"].split("demo_out/data/", 1)[1])
    raw["model"].update(vocab_size=600, **model)
    raw["train"]["output_dir"] = str(tmp_path / "run")
    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(raw))
    return Curriculum.load(str(path)), path


def test_tokenized_sources_give_the_batches_the_built_ones_give(demo_data, tmp_path):
    from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.data import StageData
    from codeexecutor.training.setup import resolve_profile
    from codeexecutor.training.tokenized import tokenize_curriculum, train_curriculum_tokenizer

    cur, _ = _demo_curriculum(demo_data, tmp_path)
    report = train_curriculum_tokenizer(cur, ".", str(tmp_path / "tok"), sample=300)
    assert all(n <= 300 // len(report["rows_read"]) + 1 for n in report["rows_read"].values())
    markers = tokenize_curriculum(cur, ".", str(tmp_path / "tok"), str(tmp_path / "tokenized"))
    assert len(markers) == len({s.path for st in cur.stages for s in st.sources})  # each source once
    tokenized = Curriculum.load(str(tmp_path / "tokenized" / "curriculum.yaml"))
    profile = resolve_profile(cur)
    encoder = Encoder(
        load_tokenizer(str(tmp_path / "tok"), exception=profile.exception_step, delta=profile.delta),
        cur.model.max_code_length,
        cur.model.max_trace_length,
        profile,
    )
    for built, ready in zip(cur.stages, tokenized.stages):
        a = StageData(built, encoder, ".", max_tokens=2048)
        b = StageData(ready, encoder, ".", max_tokens=2048)
        assert (
            a.fits
            == {s.path: markers[s.path]["fits"] for s in built.sources}
            == {s.path: b.fits[r.path] for s, r in zip(built.sources, ready.sources)}
        )
        for step in range(3):
            x, y = a.batch(0, step, 0, 0, 8)["row"], b.batch(0, step, 0, 0, 8)["row"]
            assert x.keys() == y.keys() and all(
                x[k] == y[k] if isinstance(x[k], int) else (x[k] == y[k]).all() for k in x
            )
    folder = next((tmp_path / "tokenized").glob("*singleline*"))
    features = json.loads((folder / "dataset_info.json").read_text())["features"]
    assert features["code_ids"]["feature"]["dtype"] == "int16"  # 2 bytes a token


@pytest.mark.parametrize("profile", [("exact", "delta", "end"), ("official", "full", "start")])
def test_rows_encoded_in_one_tokenizer_call_get_the_ids_of_one_call_a_text(demo_data, tmp_path, profile):
    """`Encoder.encode_rows` encodes a batch's texts in one call of the Rust tokenizer: the
    same ids, lengths and fits as encoding each text on its own."""
    import datasets

    from codeexecutor.modeling.profiles import Profile
    from codeexecutor.modeling.tokenizer import Encoder, train_tokenizer

    name, state, order = profile
    prof = Profile(name, name == "exact", state, order)
    rows = []
    for build in ("codenetmut/codenetmut", "codenetmut/errors", "tutorial/tutorial", "singleline/singleline"):
        train = datasets.load_from_disk(str(demo_data / build))["train"]
        rows += list(train.select(range(min(40, len(train)))))
    texts = [t for r in rows for t in prof.example(r)]
    enc = Encoder(
        train_tokenizer(texts, vocab_size=600, min_frequency=1, delta=prof.delta), 64, 96, prof
    )  # short: cuts occur
    batch = {k: [r[k] for r in rows] for k in rows[0]}
    got = enc.encode_rows(batch)
    fits = []
    for i, row in enumerate(rows):
        code, target = prof.example(row)
        trace_ids, fit = enc.fit_trace(target)
        fits.append(fit)
        assert got["code_ids"][i] == enc.code(code) and got["trace_ids"][i] == (trace_ids or []), i
        assert got["fit"][i] == fit and got["trace_len"][i] == len(trace_ids or [])
    assert {"whole", "cut_at_step"} <= set(fits)  # both kinds of target were compared


def test_a_tokenized_source_refuses_another_tokenizer(demo_data, tmp_path):
    from codeexecutor.errors import ConfigError
    from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.data import StageData
    from codeexecutor.training.setup import resolve_profile
    from codeexecutor.training.tokenized import tokenize_curriculum, train_curriculum_tokenizer

    cur, _ = _demo_curriculum(demo_data, tmp_path)
    train_curriculum_tokenizer(cur, ".", str(tmp_path / "tok"), sample=200)
    train_curriculum_tokenizer(cur, ".", str(tmp_path / "other"), sample=50)
    tokenize_curriculum(cur, ".", str(tmp_path / "tok"), str(tmp_path / "tokenized"))
    ready = Curriculum.load(str(tmp_path / "tokenized" / "curriculum.yaml"))
    profile = resolve_profile(cur)
    other = Encoder(
        load_tokenizer(str(tmp_path / "other"), exception=profile.exception_step, delta=profile.delta),
        cur.model.max_code_length,
        cur.model.max_trace_length,
        profile,
    )
    with pytest.raises(ConfigError, match="tokenized for another run: tokenizer"):
        StageData(ready.stages[0], other, ".")


def test_tokenize_started_again_keeps_the_sources_it_finished(demo_data, tmp_path, capsys):
    import shutil

    from codeexecutor.training.tokenized import tokenize_curriculum, train_curriculum_tokenizer

    cur, _ = _demo_curriculum(demo_data, tmp_path)
    train_curriculum_tokenizer(cur, ".", str(tmp_path / "tok"), sample=200)
    train_curriculum_tokenizer(cur, ".", str(tmp_path / "other"), sample=50)
    first = tokenize_curriculum(cur, ".", str(tmp_path / "tok"), str(tmp_path / "t"))
    folders = {p: tmp_path / "t" / m["folder"] for p, m in first.items()}
    stamps = {p: f.stat().st_mtime_ns for p, f in folders.items()}
    lost = next(iter(folders))
    shutil.rmtree(folders[lost])  # as if killed while writing that source
    capsys.readouterr()
    again = tokenize_curriculum(cur, ".", str(tmp_path / "tok"), str(tmp_path / "t"))
    err = capsys.readouterr().err
    assert again == first and err.count("tokenized before") == len(first) - 1
    assert all(folders[p].stat().st_mtime_ns == stamps[p] for p in folders if p != lost)
    other = tokenize_curriculum(cur, ".", str(tmp_path / "other"), str(tmp_path / "t"))  # another tokenizer: all again
    assert "tokenized before" not in capsys.readouterr().err
    assert all(other[p]["tokenizer"] != first[p]["tokenizer"] for p in first)


def test_a_run_on_tokenized_sources_evaluates_on_the_built_valid_rows(demo_data, tmp_path):
    import json

    from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.evaluation import StageEvaluator
    from codeexecutor.training.setup import resolve_profile
    from codeexecutor.training.tokenized import tokenize_curriculum, train_curriculum_tokenizer

    cur, _ = _demo_curriculum(demo_data, tmp_path)
    train_curriculum_tokenizer(cur, ".", str(tmp_path / "tok"), sample=200)
    markers = tokenize_curriculum(cur, ".", str(tmp_path / "tok"), str(tmp_path / "t"))
    ready = Curriculum.load(str(tmp_path / "t" / "curriculum.yaml"))
    profile = resolve_profile(cur)
    encoder = Encoder(
        load_tokenizer(str(tmp_path / "tok"), exception=profile.exception_step, delta=profile.delta),
        cur.model.max_code_length,
        cur.model.max_trace_length,
        profile,
    )
    stage = ready.stages[-1]
    built = StageEvaluator(cur.stages[-1], encoder, ".", loss_examples=8, decode_examples=2)
    tokenized = StageEvaluator(stage, encoder, ".", loss_examples=8, decode_examples=2)
    assert built.sources and len(tokenized.sources) == len(built.sources)
    assert [v["split"] for v in tokenized.sources.values()] == [v["split"] for v in built.sources.values()]
    gone = stage.sources[0].path  # its built dataset moved away: that source is not evaluated, the others are
    marker = pathlib.Path(gone) / "tokenized.json"
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "source": str(tmp_path / "moved")}))
    left = StageEvaluator(stage, encoder, ".", loss_examples=8, decode_examples=2)
    assert len(left.sources) == len(tokenized.sources) - 1 and all(gone not in k for k in left.sources)
    assert markers


def test_the_tokenizer_and_tokenize_commands(demo_data, tmp_path):
    import subprocess
    import sys

    _, path = _demo_curriculum(demo_data, tmp_path)

    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "codeexecutor", *a],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )

    out = run("tokenizer", "--curriculum", str(path), "--out", str(tmp_path / "tok"), "--sample", "400")
    assert out.returncode == 0 and (tmp_path / "tok" / "tokenizer.json").exists(), out.stderr[-2000:]
    out = run("tokenize", "--curriculum", str(path), "--tokenizer", str(tmp_path / "tok"), "--out", str(tmp_path / "t"))
    assert out.returncode == 0 and (tmp_path / "t" / "curriculum.yaml").exists(), out.stderr[-2000:]
    bad = run(
        "tokenize", "--curriculum", str(path), "--tokenizer", str(tmp_path / "nowhere"), "--out", str(tmp_path / "u")
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "no tokenizer" in bad.stderr


def test_the_step_speed_bench_sizes_its_model_to_the_curriculums_tokenizer(demo_data, tmp_path, monkeypatch):
    """The GPU draw's throughput step measures the step on the packed rows, whose ids run to
    the tokenizer's size (its format tokens too): a model sized to a fixed vocabulary would
    index past its embeddings."""
    import time

    from codeexecutor.modeling.tokenizer import load_tokenizer
    from codeexecutor.training.tokenized import train_curriculum_tokenizer

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from _step_speed import measure_step

    cur, path = _demo_curriculum(demo_data, tmp_path)
    train_curriculum_tokenizer(cur, ".", str(tmp_path / "tok"), sample=300)
    raw = yaml.safe_load(path.read_text())
    raw["model"]["tokenizer"] = str(tmp_path / "tok")
    path.write_text(yaml.safe_dump(raw))
    size = len(load_tokenizer(str(tmp_path / "tok")))
    assert size > 40
    out = measure_step("tiny", 2048, str(path), "torch", time.perf_counter() + 300, vocab=40)
    assert out["vocab"] >= size and out["tokens_per_s"] > 0 and "stopped" not in out
