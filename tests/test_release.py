"""The released CodeExecutor checkpoint's layout runs through our tools exactly as through
the release's own inference: loading, tokenizer ids, source layout, beam search, decoding.

The checkpoint is a tiny random one written at test time in exactly the released layout
(tests/release_layout.py); the reference is a port of the release's inference
(tests/release_port.py). Both run in float64, so that the cached and the recomputed
forward passes cannot differ by rounding.
"""

import json
import pathlib
import subprocess
import sys

import pytest
import torch

from codeexecutor.errors import UsageError
from codeexecutor.generation.decoding import Decoding

from .conftest import FIXTURES, ROOT
from .release_layout import RELEASE_ADDED, write_release_checkpoint
from .release_port import SlowTokenizer, load_release_encoder, release_generate, source_ids

PROGRAMS = sorted((FIXTURES / "programs").glob("*.py")) + sorted((ROOT / "curricula" / "demo").rglob("*.py"))
SNIPPETS = [
    "s = ['x', 'y', 'z']\n",
    "a, b = 3, 4\nc = (a ** 2 + b ** 2) ** 0.5\nprint(c)\n",
    "words = 'the quick brown fox'.split()\nlengths = {w: len(w) for w in words}\n",
    "x = -7\nwhile x < 0:\n    x += 3\nprint(x)\n",
]


def _sources() -> list[str]:
    return [p.read_text() for p in PROGRAMS] + SNIPPETS


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """Two released-layout checkpoints: one whose generations end at varied lengths, one
    that often generates <pad> and <s> (masked keys, padding positions, the cut at id 0)."""
    root = tmp_path_factory.mktemp("released")
    return {
        "eos": write_release_checkpoint(root / "eos", seed=0, eos_pull=3.0),
        "pad": write_release_checkpoint(root / "pad", seed=1, pad_pull=3.0),
    }


def test_twenty_programs_at_least():
    assert len(_sources()) >= 20


def test_the_released_layout_loads_as_official_with_the_tied_head(released):
    from codeexecutor.generation import TraceGenerator

    gen = TraceGenerator(str(released["eos"]), device="cpu")
    assert gen.profile.name == "official" and not gen.profile.exception_step
    assert (
        gen.model.config.vocab_size
        == len(gen.tok)
        == json.loads((released["eos"] / "vocab.json").read_text()).__len__() + 211
    )
    assert gen.model.lm_head.weight.data_ptr() == gen.model.roberta.embeddings.word_embeddings.weight.data_ptr()
    assert gen.tok.convert_tokens_to_ids(RELEASE_ADDED[0]) == len(
        json.loads((released["eos"] / "vocab.json").read_text())
    )
    assert "<exception>" not in gen.tok.get_vocab()


def test_encoding_and_source_layout_match_the_slow_tokenizer(released):
    from codeexecutor.generation import TraceGenerator

    gen = TraceGenerator(str(released["eos"]), device="cpu")
    slow = SlowTokenizer(released["eos"])
    traces = [
        "<line> <0> <state> s : [ x , y , z ] </state>",
        "<line>  <3>\t<state>a : 1 <dictsep> b : 'q r'</state>\n<output> 3",
        "<state> x : 1 </state>",
        "<output>  two  words  <line> <1> <state></state>",
    ]
    for src in _sources():
        text = gen.code_input(src)
        assert gen.encoder.ids(text) == slow.encode(text)
        assert gen.encoder.code(text) == [i for i in source_ids(slow, text) if i != slow.vocab["<pad>"]]
    for text in traces:
        ids = gen.encoder.ids(text)
        assert ids == slow.encode(text)
        assert gen.encoder.decode(ids) == slow.decode(ids)
    assert gen.encoder.decode(gen.encoder.ids(traces[0])) == traces[0]  # spaces around the format's tokens


def test_long_code_is_cut_to_251_tokens_before_mask0(released):
    from codeexecutor.generation import TraceGenerator

    gen = TraceGenerator(str(released["eos"]), device="cpu")
    text = gen.code_input("\n".join(f"v{i} = {i} * {i}" for i in range(120)))
    ids = gen.encoder.code(text)
    assert len(ids) == 256 and ids[-2:] == [gen.encoder.mask0, gen.encoder.eos]
    assert ids[3:-2] == gen.encoder.ids(text)[:251]


@pytest.mark.parametrize("which", ["eos", "pad"])
@pytest.mark.parametrize("beam", [1, 10])
def test_generations_are_token_identical_to_the_release(released, which, beam):
    from codeexecutor.generation import TraceGenerator

    path = released[which]
    gen = TraceGenerator(str(path), device="cpu", dtype=torch.float64)
    slow = SlowTokenizer(path)
    encoder = load_release_encoder(path)
    inputs = [gen.code_input(src) for src in _sources()]
    ours = gen.generate(inputs, Decoding(beam=beam, max_length=48, names=False, values=False), batch_size=6)
    lengths, pads = set(), 0
    for text, got in zip(inputs, ours):
        ref = release_generate(encoder, source_ids(slow, text), beam, 48, slow.vocab["<mask0>"], slow.vocab["</s>"])
        assert got.text == slow.decode(ref), text
        lengths.add(len(ref))
        pads += slow.vocab["<pad>"] in ref
    if which == "eos":
        assert len(lengths) > 1  # generations end at varied lengths
    else:
        assert pads  # generated <pad> tokens were exercised


def test_generation_stops_at_768_tokens_like_the_release(tmp_path):
    from codeexecutor.generation import TraceGenerator

    path = write_release_checkpoint(tmp_path / "long", seed=2)  # no pull: </s> is never likely
    gen = TraceGenerator(str(path), device="cpu", dtype=torch.float64)
    slow = SlowTokenizer(path)
    text = gen.code_input(SNIPPETS[0])
    got = gen.generate([text], Decoding(beam=1, names=False, values=False))[0]  # default length: the model's cap, 768
    ref = release_generate(
        load_release_encoder(path), source_ids(slow, text), 1, 768, slow.vocab["<mask0>"], slow.vocab["</s>"]
    )
    assert got.tokens == len(ref) == 768
    assert got.text == slow.decode(ref)


def test_trace_command_runs_the_released_layout(released, tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(SNIPPETS[1])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "trace",
            str(prog),
            "--model",
            str(released["eos"]),
            "--beam",
            "2",
            "--max-length",
            "24",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["format_profile"] == "official"
    assert report["model_input"] == "<codenet> <0> a , b = 3 , 4 <1> c = ( a ** 2 + b ** 2 ) ** 0.5 <2> print ( c )"
    assert report["crash_margin"] is None  # the release's format has no <exception> step
    assert report["constrained"] == {"names": False, "values": False}  # the release's decoding, rules and all
    biased = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "trace",
            str(prog),
            "--model",
            str(released["eos"]),
            "--beam",
            "1",
            "--max-length",
            "8",
            "--exception-bias",
            "2",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert biased.returncode == 2 and "no <exception> step" in biased.stderr and "Traceback" not in biased.stderr
    capped = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "trace",
            str(prog),
            "--model",
            str(released["eos"]),
            "--beam",
            "1",
            "--max-length",
            "8",
            "--constrain-values",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert capped.returncode == 2 and "lexical tokens" in capped.stderr and "Traceback" not in capped.stderr


def test_missing_weights_are_an_error_not_random(released, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    from codeexecutor.modeling.loading import load_model

    broken = tmp_path / "broken"
    shutil.copytree(released["eos"], broken)
    weights = load_file(str(broken / "model.safetensors"))
    del weights["encoder.layer.1.attention.self.query.weight"]
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(UsageError, match="encoder.layer.1.attention.self.query.weight"):
        load_model(str(broken))


def test_malformed_config_is_one_clear_error(released, tmp_path):
    import shutil

    from codeexecutor.modeling.loading import load_model

    bad = tmp_path / "bad"
    shutil.copytree(released["eos"], bad)
    (bad / "config.json").write_text("{not json")
    with pytest.raises(UsageError, match="config.json is not valid JSON"):
        load_model(str(bad))


def test_hub_id_offline_says_how_to_fetch(monkeypatch, tmp_path):
    from codeexecutor.modeling.loading import resolve

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(UsageError) as err:
        resolve("microsoft/codeexecutor")
    msg = str(err.value)
    assert "hf download microsoft/codeexecutor" in msg and "--model codeexecutor" in msg and "\n" not in msg


def test_hub_id_resolves_from_a_local_hub_cache(released, monkeypatch, tmp_path):
    """The hub path is real: a hub id found in the Hugging Face cache layout loads offline."""
    import shutil

    from codeexecutor.generation import TraceGenerator

    cache = tmp_path / "hub"
    rev = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--microsoft--codeexecutor"
    shutil.copytree(released["eos"], repo / "snapshots" / rev)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    gen = TraceGenerator("microsoft/codeexecutor", device="cpu")
    assert gen.profile.name == "official"


def test_cli_refuses_a_hub_id_offline_with_one_line(tmp_path):
    import os

    prog = tmp_path / "p.py"
    prog.write_text("x = 1\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-m", "codeexecutor", "trace", str(prog), "--model", "microsoft/codeexecutor"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.strip() and "[WARNING]" not in line]
    assert len(lines) == 1 and "hf download" in lines[0] and "Traceback" not in out.stderr


def _release_file(path: pathlib.Path, pool) -> pathlib.Path:
    """A small test file in the release's format (JSON Lines: id, code, code_tokens, trace, trace_tokens)."""
    from codeexecutor.modeling.format import release_code_tokens
    from codeexecutor.modeling.profiles import Profile

    profile = Profile("official", exception_step=False)
    with path.open("w") as f:
        for i, src in enumerate(SNIPPETS + [p.read_text() for p in PROGRAMS[:4]]):
            result = pool.execute(src)
            trace = profile.trace(result.steps)
            f.write(
                json.dumps(
                    {
                        "id": i,
                        "code": src,
                        "code_tokens": release_code_tokens(src),
                        "trace": trace.split(" <line> "),
                        "trace_tokens": trace.split(" "),
                    }
                )
                + "\n"
            )
    return path


def test_evaluate_reads_the_release_test_format(released, tmp_path, pool):
    data = _release_file(tmp_path / "codenetmut_test.json", pool)
    first = json.loads(data.read_text().splitlines()[0])
    assert first["code_tokens"] == ["<0>", "s", "=", "[", "'x'", ",", "'y'", ",", "'z'", "]"]
    assert first["trace_tokens"] == [
        "<line>",
        "<0>",
        "<state>",
        "s",
        ":",
        "[",
        "x",
        ",",
        "y",
        ",",
        "z",
        "]",
        "</state>",
    ]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "evaluate",
            "--model",
            str(released["eos"]),
            "--data",
            str(data),
            "--beam",
            "2",
            "--max-length",
            "16",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "inference/metric.py" in out.stdout and "codenet" in out.stdout
    report = json.loads((tmp_path / "codenetmut_test.evaluation.json").read_text())
    entry = report["datasets"]["codenet"]
    assert entry["examples"] == 8 and set(entry["table3"]) >= {
        "output_accuracy",
        "trace_accuracy",
        "line_f1",
        "identifier_f1",
    }
    preds = [
        json.loads(line)
        for line in (tmp_path / "codenetmut_test.evaluation.predictions.jsonl").read_text().splitlines()
    ]
    assert len(preds) == 8 and preds[0]["gold"] == first["trace"][0]


def test_evaluate_gold_is_cut_at_766_tokens(released):
    from codeexecutor.generation import TraceGenerator

    gen = TraceGenerator(str(released["eos"]), device="cpu")
    long_trace = " ".join(f"<line> <{i % 200}> <state> v : {i} </state>" for i in range(400))
    gold = gen.encoder.gold(long_trace)
    assert len(gen.encoder.ids(gold)) == 766 and long_trace.startswith(gold)


def test_evaluate_rejects_a_file_that_is_not_in_the_release_format(released, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"code": "x = 1"}\n')
    out = subprocess.run(
        [sys.executable, "-m", "codeexecutor", "evaluate", "--model", str(released["eos"]), "--data", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 2 and "bad.json:1" in out.stderr and "Traceback" not in out.stderr
