"""Demo-size curriculum datasets built once per test session (from curricula/demo)."""

import pathlib

import datasets
import pytest
import torch

from .conftest import ROOT


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory) -> pathlib.Path:
    from curricula.codenet import CodeNetBuilder
    from curricula.singleline import build_singleline
    from curricula.tutorial import build_tutorial

    root = tmp_path_factory.mktemp("demo_data")
    demo = ROOT / "curricula" / "demo"
    CodeNetBuilder(str(demo), str(root / "codenetmut"), mutants=8, workers=2).run(progress=False)
    build_tutorial(str(root / "tutorial"), sources=str(demo / "tutorial"), mutants=8, workers=2, progress=False)
    build_singleline(str(root / "singleline"), source=str(root / "codenetmut"), workers=2)
    return root


@pytest.fixture(scope="session")
def overfit_model(demo_data, tmp_path_factory):
    """A tiny model trained on 20 fixed examples until it reproduces them: trained to a
    criterion with a cap, not for a fixed number of steps, so that a CPU whose float
    arithmetic differs still gets there (every next token the argmax under teacher
    forcing, which makes greedy decoding reproduce every example exactly)."""
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.tokenizer import Encoder, structural_ids, train_tokenizer

    torch.manual_seed(0)
    rows = []
    for name in ("singleline/singleline", "tutorial/tutorial"):
        rows += [r for r in datasets.load_from_disk(str(demo_data / name))["train"] if len(r["target"]) < 160]
    rows = rows[:20]
    tok = train_tokenizer([r["input"] for r in rows] + [r["target"] for r in rows], vocab_size=500, min_frequency=1)
    enc = Encoder(tok, 128, 128)
    cfg = CodeExecutorConfig.preset("tiny", vocab_size=len(tok), structural_token_ids=structural_ids(tok),
                                    pad_token_id=tok.pad_token_id, max_code_length=128, max_trace_length=128)
    model = CodeExecutorModel(cfg)
    batch = enc.collate([{"code_ids": enc.code(r["input"]), "trace_ids": enc.trace(r["target"])} for r in rows])
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
        raise AssertionError("the tiny model did not learn 20 examples in 2000 steps")
    path = tmp_path_factory.mktemp("overfit")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path, rows
