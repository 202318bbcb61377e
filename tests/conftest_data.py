"""Demo-size curriculum datasets and overfit models, built once per test session (from
curricula/demo) and shared by the session's workers when pytest-xdist runs it in several."""

import os
import pathlib
import shutil

import pytest

from .conftest import ROOT, texts


def built_once(tmp_path_factory, name: str, build) -> pathlib.Path:
    """`build(path)` run once for the whole session: alone, in a fresh temporary folder; under
    pytest-xdist, by the first worker to ask, in the folder all workers share, while the
    others wait on its lock and then read what it made (a `.done` marker says it finished)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        path = tmp_path_factory.mktemp(name)
        build(path)
        return path
    from filelock import FileLock

    path = tmp_path_factory.getbasetemp().parent / name
    with FileLock(f"{path}.lock"):
        if not (path / ".done").exists():
            shutil.rmtree(path, ignore_errors=True)  # a worker's unfinished build
            path.mkdir()
            build(path)
            (path / ".done").touch()
    return path


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory) -> pathlib.Path:
    return built_once(tmp_path_factory, "demo_data", _build_demo)


def _build_demo(root: pathlib.Path) -> None:
    from curricula.codenet import CodeNetBuilder
    from curricula.common import BuildSetup
    from curricula.functions import FunctionsBuilder
    from curricula.singleline import build_singleline
    from curricula.tutorial import build_tutorial

    demo = ROOT / "curricula" / "demo"
    CodeNetBuilder(str(demo), str(root / "codenetmut"), mutants=8, setup=BuildSetup(workers=2)).run(progress=False)
    FunctionsBuilder(
        [str(demo / "functions")],
        str(root / "functions"),
        mutants=2,
        input_mutants=1,
        humaneval=None,
        setup=BuildSetup(workers=2),
    ).run(progress=False)
    build_tutorial(str(root / "tutorial"), sources=str(demo / "tutorial"), mutants=8, workers=2, progress=False)
    build_singleline(str(root / "singleline"), source=str(root / "codenetmut"), workers=2)


def _overfit(
    pairs: list[tuple[str, str]], path: pathlib.Path, profile=None, length: int = 128, config: dict | None = None
) -> None:
    """A tiny model trained on fixed (input, target) pairs until it reproduces them: to a
    criterion with a cap, not for a fixed number of steps, so that a CPU whose float
    arithmetic differs still gets there (every next token the argmax under teacher
    forcing, which makes greedy decoding reproduce every example exactly)."""
    import torch

    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.profiles import Profile
    from codeexecutor.modeling.tokenizer import Encoder, structural_ids, train_tokenizer

    profile = profile or Profile()
    torch.manual_seed(0)
    tok = train_tokenizer(
        [c for c, _ in pairs] + [t for _, t in pairs], vocab_size=500, min_frequency=1, delta=profile.delta
    )
    enc = Encoder(tok, length, length, profile)
    cfg = CodeExecutorConfig.preset(
        "tiny",
        vocab_size=len(tok),
        structural_token_ids=structural_ids(tok),
        pad_token_id=tok.pad_token_id,
        max_code_length=length,
        max_trace_length=length,
        **profile.to_config(),
        **(config or {}),
    )
    model = CodeExecutorModel(cfg)
    batch = enc.collate([{"code_ids": enc.code(c), "trace_ids": enc.trace(t)} for c, t in pairs])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    labels, valid = batch["trace_ids"][:, 1:], batch["trace_mask"][:, 1:].bool()
    for step in range(1, 2001):
        out = model(**batch)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        if step % 25 == 0 and bool((out.logits.argmax(-1) == labels)[valid].all()):
            with torch.no_grad():  # confirm on the updated weights
                if bool((model(**batch).logits.argmax(-1) == labels)[valid].all()):
                    break
    else:
        raise AssertionError(f"the tiny model did not learn {len(pairs)} examples in 2000 steps")
    model.save_pretrained(path)
    tok.save_pretrained(path)


@pytest.fixture(scope="session")
def overfit_model(demo_data, tmp_path_factory):
    """A tiny model that reproduces 20 fixed SingleLine and Tutorial examples (`_overfit`)."""
    rows = []
    for name in ("singleline/singleline", "tutorial/tutorial"):
        rows += [
            {**r, "input": texts(r)[0], "target": texts(r)[1]}
            for r in __import__("datasets").load_from_disk(str(demo_data / name))["train"]
            if len(texts(r)[1]) < 160
        ]
    rows = rows[:20]
    path = built_once(tmp_path_factory, "overfit", lambda p: _overfit([(r["input"], r["target"]) for r in rows], p))
    return path, rows


@pytest.fixture(scope="session")
def overfit_delta_model(demo_data, tmp_path_factory):
    """A tiny compact-trace model (`trace_state: delta`) that reproduces fixed Tutorial and
    CodeNetMut examples of several steps, some of them deltas, and a few crashing ones."""
    from codeexecutor.modeling.profiles import Profile

    profile = Profile("exact", state="delta")
    rows = []
    for name, n in (("tutorial/tutorial", 6), ("codenetmut/codenetmut", 6), ("codenetmut/errors", 3)):
        short = [
            r
            for r in __import__("datasets").load_from_disk(str(demo_data / name))["train"]
            if len(profile.example(r)[1]) < 330 and len(r["code"]) < 300 and "<delta>" in profile.example(r)[1]
        ]
        rows += short[:n]
    pairs = [profile.example(r) for r in rows]
    path = built_once(tmp_path_factory, "overfit_delta", lambda p: _overfit(pairs, p, profile, length=192))
    return path, rows
