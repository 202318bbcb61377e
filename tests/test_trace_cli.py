import json
import shutil
import subprocess
import sys

import pytest

from codeexecutor.generation.decoding import Decoding
from codeexecutor.modeling.format import parse_trace

from .conftest import ROOT

PROGRAM = "rec = input().split()\nn, a, b = map(int, rec)\nnin = [a, b]\nprint(min(nin))\n"


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "codeexecutor", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


@pytest.fixture()
def program(tmp_path):
    p = tmp_path / "p.py"
    p.write_text(PROGRAM)
    i = tmp_path / "in.txt"
    i.write_text("10 3 5\n")
    return p, i


def test_trace_json_has_the_documented_fields(overfit_model, program):
    model, _ = overfit_model
    p, i = program
    out = cli(
        "trace",
        str(p),
        "--stdin",
        str(i),
        "--model",
        str(model),
        "--beam",
        "2",
        "--max-length",
        "64",
        "--json",
        "--compare",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rep = json.loads(out.stdout)
    assert {"steps", "output", "error", "logprob", "generated", "problems", "ground_truth"} <= set(rep)
    assert rep["code"].startswith("rec = '10 3 5'.split()")  # stdin was inlined
    assert rep["ground_truth"]["stdout"] == "3\n"
    for step in rep["steps"]:
        assert set(step) == {"line", "state", "output"}
    assert rep["logprob"] <= 0


def test_trace_text_html_and_batch(overfit_model, program, tmp_path):
    model, _ = overfit_model
    p, i = program
    page = tmp_path / "t.html"
    out = cli(
        "trace",
        str(p),
        "--stdin",
        str(i),
        "--model",
        str(model),
        "--beam",
        "2",
        "--max-length",
        "64",
        "--html",
        str(page),
        "--compare",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "predicted runtime error" in out.stdout and "real run: ok" in out.stdout
    text = page.read_text()
    assert 'id="trace-data"' in text and "real run" in text and "first divergence" in text.lower()
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        json.dumps({"id": "a", "code": "x = 1\ny = x + 1\n"})
        + "\n"
        + json.dumps({"id": "b", "code": PROGRAM, "stdin": "1 2 3\n"})
        + "\n"
    )
    out = cli("trace", "--batch", str(batch), "--model", str(model), "--beam", "1", "--max-length", "32")
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["a", "b"]


def test_a_trace_cut_at_the_cap_says_so(overfit_model):
    from codeexecutor.generation.api import trace_program

    model, _ = overfit_model
    whole = trace_program(PROGRAM, "10 3 5\n", str(model), decoding=Decoding(beam=1, max_length=128))
    cut = trace_program(PROGRAM, "10 3 5\n", str(model), decoding=Decoding(beam=1, max_length=3))
    assert cut["finished"] is False and cut["error"] is None
    assert "runtime error: unknown" in cut["text"] and "hit the length cap (3 tokens)" in cut["text"]
    assert "--max-length raises" in cut["text"]  # 3 is below the model's limit
    assert ("length cap" in whole["text"]) == (not whole["finished"])
    assert whole["constrained"] == {"names": True, "values": True}  # our own format: the state rules on by default
    free = trace_program(
        PROGRAM, "10 3 5\n", str(model), decoding=Decoding(beam=1, max_length=3, names=False, values=False)
    )
    assert free["constrained"] == {"names": False, "values": False}
    default = trace_program(PROGRAM, "10 3 5\n", str(model), decoding=Decoding(max_length=3))
    assert default["beam"] == 1  # our own format: greedy unless a beam is asked for


def test_the_released_checkpoint_keeps_its_beam_of_ten():
    from types import SimpleNamespace

    from codeexecutor.generation.decoding import default_beam

    assert default_beam(SimpleNamespace(profile=SimpleNamespace(official=True))) == 10
    assert default_beam(SimpleNamespace(profile=SimpleNamespace(official=False))) == 1


def test_missing_model_says_how_to_get_one(program, tmp_path):
    p, _ = program
    out = cli("trace", str(p), "--model", str(tmp_path / "nope" / "model"))
    assert out.returncode == 2 and "make demo" in out.stderr


def test_runtime_error_detected_from_an_exception_step():
    parsed = parse_trace(
        "<line> <0> <state> a : [1] </state> <line> <1> <state> a : [1] </state> <exception> <1> IndexError"
    )
    assert (parsed.exception, parsed.exception_line) == ("IndexError", 2)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium is not installed (make test installs it)")
def test_html_view_renders_in_headless_chromium(overfit_model, program, tmp_path):
    from codeexecutor.generation.api import trace_program

    model, _ = overfit_model
    p, i = program
    page = tmp_path / "view.html"
    report = trace_program(
        p.read_text(),
        i.read_text(),
        str(model),
        compare=True,
        html_out=str(page),
        decoding=Decoding(beam=2, max_length=64),
    )
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        ["chromium", *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    assert "Predicted execution trace" in dom
    assert dom.count('class="ln') == len(PROGRAM.splitlines())  # the program, a line each, drawn by the script
    assert f"step 1 of {max(len(report['steps']), len(report['ground_truth']['steps']), 1)}" in dom
    shot = tmp_path / "view.png"
    subprocess.run(
        ["chromium", *flags, f"--screenshot={shot}", "--window-size=1100,700", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert shot.exists() and shot.stat().st_size > 5000
