"""Every subcommand against a table of bad inputs: exit code 2, one line on stderr that
names the problem (and the fix), no traceback, and nothing half-written left behind."""

import os
import pathlib
import subprocess
import sys

import pytest

from .conftest import ROOT

PROGRAM_KINDS = {
    "missing": None,
    "directory": "dir",
    "empty": b"",
    "blank": b"\n   \n",
    "binary": b"\x7fELF\x02\x01\x01\x00\x00\x00",
    "python2": b'print "hello"\nx = raw_input()\n',
    "non_utf8": b"x = '\xff\xfe caf\xe9'\n",
    "huge": b"x = 1\n" * 300_000,
}
PROGRAM_COMMANDS = {
    "exec": ["exec", "{p}"],
    "inline": ["inline", "{p}", "--stdin", "{stdin}"],
    "mutate": ["mutate", "{p}"],
    "trace": ["trace", "{p}", "--model", "{missing}"],
    "debug": ["debug", "{p}", "--model", "{missing}", "--do", "s"],
}
MODEL_KINDS = ("missing", "file", "empty_dir", "malformed_config", "no_weights", "wrong_model_type")
MODEL_COMMANDS = {
    "trace": ["trace", "{ok_program}", "--model", "{m}"],
    "debug": ["debug", "{ok_program}", "--model", "{m}", "--do", "s"],
    "evaluate": ["evaluate", "--model", "{m}", "--data", "{release_file}"],
    "search": ["search", "--model", "{m}", "--codenet", "{codenet}", "--problems", "2", "--per-problem", "2"],
}
DATA_KINDS = ("missing", "empty_dir", "binary_file", "malformed_dataset")
DATA_COMMANDS = {
    "evaluate": ["evaluate", "--model", "{missing}", "--data", "{d}"],
    "stats": ["stats", "{d}"],
    "tokenizer": ["tokenizer", "--curriculum", "{d}", "--out", "{out}"],
    "tokenize": ["tokenize", "--curriculum", "{d}", "--tokenizer", "{d}", "--out", "{out}"],
    "build-singleline": ["build", "singleline", "--from", "{d}", "--out", "{out}"],
    "build-actions": ["build", "actions", "--from", "{d}", "--out", "{out}"],
    "build-values": ["build", "values", "--from", "{d}", "--out", "{out}"],
    "train-values": ["train-values", "--data", "{d}", "--out", "{out}"],
    "build-bugs": ["build", "bugs", "--codenet", "{d}", "--out", "{out}"],
    "build-bugs-functions": ["build", "bugs", "--from", "{d}", "--out", "{out}"],
    "train-detector": ["train-detector", "--data", "{d}", "--out", "{out}"],
    "evaluate-crashes": ["evaluate", "--crashes", "--model", "{missing}", "--data", "{d}"],
    "build-codenetmut": ["build", "codenetmut", "--codenet", "{d}", "--out", "{out}"],
    "build-tutorial": ["build", "tutorial", "--sources", "{d}", "--out", "{out}"],
    "pretrain": ["pretrain", "--curriculum", "{d}"],
    "packed-add": ["packed", "add", "--prep", "{d}", "--part", "s0of1"],
    "ship": ["ship", "--run", "{d}", "--data", "{d}", "--name", "never-shipped"],
}


def _make(tmp: pathlib.Path, name: str, content) -> str:
    path = tmp / name
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    return str(path)


MODEL_FILES = {
    "malformed_config": {"config.json": b'{"model_type": "roberta", '},
    "no_weights": {"config.json": b'{"model_type": "roberta", "vocab_size": 10}'},
    "wrong_model_type": {"config.json": b'{"model_type": "gpt2"}', "model.safetensors": b"\x00" * 16},
}
DATA_FILES = {"malformed_dataset": {"set/dataset_dict.json": b"{not json"}}


def _folder(path: pathlib.Path, kind: str, files: dict) -> str:
    """A bad model or dataset folder: missing, a (binary) file, or a folder holding `files[kind]`."""
    if kind == "missing":
        return str(path)
    if kind in ("file", "binary_file"):
        path.write_bytes(b"\x00\x01\x02 garbage, not a folder")
        return str(path)
    path.mkdir()
    for rel, data in files.get(kind, {}).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(data)
    return str(path)


def _model(tmp: pathlib.Path, kind: str) -> str:
    return _folder(tmp / "model", kind, MODEL_FILES)


def _data(tmp: pathlib.Path, kind: str) -> str:
    return _folder(tmp / "data", kind, DATA_FILES)


def _values(tmp: pathlib.Path) -> dict:
    return {
        "missing": str(tmp / "nowhere"),
        "stdin": _make(tmp, "in.txt", b"1\n"),
        "out": str(tmp / "out"),
        "ok_program": _make(tmp, "ok.py", b"x = 1\n"),
        "codenet": str(tmp / "nowhere-codenet"),
        "release_file": _make(tmp, "test.json", b'{"code_tokens": ["<0>", "x"], "trace_tokens": ["<line>"]}\n'),
    }


def _run(tmp: pathlib.Path, argv: list[str]) -> subprocess.CompletedProcess:
    """The command in a fresh interpreter: what a user's shell runs."""
    values = _values(tmp)
    before = sorted(os.listdir(tmp))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp / "no-hub-cache")}
    out = subprocess.run(
        [sys.executable, "-m", "codeexecutor", *[a.format(**values) for a in argv]],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env,
        timeout=300,
    )
    out.new_files = sorted(set(os.listdir(tmp)) - set(before))
    return out


def _run_here(tmp: pathlib.Path, argv: list[str], capsys, monkeypatch) -> subprocess.CompletedProcess:
    """The command called in this process (`cli.main`), offline, from `tmp`: the same
    refusal as in a fresh interpreter without paying for one (torch and transformers are
    imported once for the whole test session)."""
    import huggingface_hub.constants

    from codeexecutor import cli

    values = _values(tmp)
    before = sorted(os.listdir(tmp))
    monkeypatch.chdir(tmp)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp / "no-hub-cache"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    capsys.readouterr()
    try:
        code = cli.main([a.format(**values) for a in argv])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    err = capsys.readouterr().err
    out = subprocess.CompletedProcess(argv, code, "", err)
    out.new_files = sorted(set(os.listdir(tmp)) - set(before))
    return out


def _check(out: subprocess.CompletedProcess, *words: str) -> None:
    lines = [line for line in out.stderr.splitlines() if line.strip() and "[WARNING]" not in line]
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert len(lines) == 1, out.stderr[-2000:]
    for word in words:
        assert word.lower() in lines[0].lower(), lines[0]
    assert not [
        f
        for f in out.new_files
        if f not in ("model", "data", "prog.py", "in.txt", "ok.py", "test.json", "problems.jsonl.gz")
    ], out.new_files


WORDS = {
    "missing": "not found",
    "directory": "directory",
    "empty": "empty",
    "blank": "empty",
    "binary": "binary",
    "python2": "python 2",
    "non_utf8": "utf-8",
    "huge": "limit",
}


@pytest.mark.parametrize("kind", sorted(PROGRAM_KINDS))
@pytest.mark.parametrize("command", sorted(PROGRAM_COMMANDS))
def test_program_inputs(tmp_path, command, kind):
    program = _make(tmp_path, "prog.py", PROGRAM_KINDS[kind])
    argv = [a.replace("{p}", program) for a in PROGRAM_COMMANDS[command]]
    _check(_run(tmp_path, argv), WORDS[kind])


@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("command", sorted(MODEL_COMMANDS))
def test_model_folders(tmp_path, command, kind, capsys, monkeypatch):
    pytest.importorskip(
        "torch", reason="a model command: the light environments check it in test_model_commands_need_torch"
    )
    if command == "search" and not (ROOT.parent / "shared" / "data" / "atcoder-python").is_dir():
        pytest.skip("search needs the shared corpus")
    model = _model(tmp_path, kind)
    argv = [a.replace("{m}", model) for a in MODEL_COMMANDS[command]]
    if command == "search":
        argv = [a.replace("{codenet}", str(ROOT.parent / "shared" / "data" / "atcoder-python")) for a in argv]
    _check(
        _run_here(tmp_path, argv, capsys, monkeypatch),
        "model"
        if kind not in ("malformed_config", "no_weights")
        else "config.json"
        if kind == "malformed_config"
        else "weights",
    )


@pytest.mark.parametrize("kind", DATA_KINDS)
@pytest.mark.parametrize("command", sorted(DATA_COMMANDS))
def test_dataset_folders(tmp_path, command, kind):
    if command in ("evaluate", "pretrain", "tokenizer", "tokenize", "packed-add", "ship"):
        pytest.importorskip("torch", reason="a model command")
    data = _data(tmp_path, kind)
    argv = [a.replace("{d}", data) for a in DATA_COMMANDS[command]]
    _check(_run(tmp_path, argv))


def test_the_table_covers_every_subcommand():
    from codeexecutor.cli import commands

    covered = {argv[0] for table in (PROGRAM_COMMANDS, MODEL_COMMANDS, DATA_COMMANDS) for argv in table.values()}
    assert set(commands()) - covered <= {"rerank"}  # rerank: its own inputs, tested in test_rerank_bad_inputs


def test_rerank_bad_inputs(tmp_path):
    _check(_run(tmp_path, ["rerank", "--problems", "{missing}"]), "not found")
    bad = _make(tmp_path, "problems.jsonl.gz", b"\x00\x01 not gzip")
    _check(_run(tmp_path, ["rerank", "--problems", bad, "--samples", bad, "--codet-prompts", bad]))


@pytest.mark.parametrize(
    "command",
    (
        ["trace", "{ok_program}", "--model", "{missing}"],
        ["evaluate", "--model", "{missing}", "--data", "{release_file}"],
    ),
)
def test_a_negative_length_penalty_is_refused(tmp_path, command):
    if command[0] == "evaluate":
        pytest.importorskip("torch", reason="a model command")
    _check(_run(tmp_path, [*command, "--length-penalty", "-1"]), "length-penalty must be >= 0")


def test_model_commands_need_torch_in_one_line(tmp_path):
    """In a light environment (no torch: .venv-3.12, .venv-3.13) a command that runs a
    model says so in one line and names the environment that has it."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here: the model commands run")
    ok = _make(tmp_path, "ok.py", b"print(1)\n")
    _check(_run(tmp_path, ["trace", ok, "--model", "{missing}"]), "needs torch", "make venv")
