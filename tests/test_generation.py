import datasets
import pytest
import torch

from codeexecutor.format import parse_trace


@pytest.fixture(scope="module")
def overfit_model(demo_data, tmp_path_factory):
    """A tiny model trained on 20 fixed examples until it reproduces them."""
    from codeexecutor.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.tokenizer import Encoder, structural_ids, train_tokenizer

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
    for _ in range(300):
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    path = tmp_path_factory.mktemp("overfit")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path, rows


def test_tiny_model_overfits_twenty_examples_to_exact_traces(overfit_model):
    from codeexecutor.generation import TraceGenerator

    path, rows = overfit_model
    gen = TraceGenerator(str(path))
    outs = gen.generate([r["input"] for r in rows], beam=1, max_length=128)
    exact = sum(parse_trace(o.text).steps == parse_trace(r["target"]).steps for o, r in zip(outs, rows))
    assert exact == 20


def test_cached_batched_beam_equals_recomputation(overfit_model):
    from codeexecutor.generation import TraceGenerator

    path, rows = overfit_model
    gen = TraceGenerator(str(path))
    inputs = [r["input"] for r in rows[:4]]
    fast = gen.generate(inputs, beam=4, max_length=64, batch_size=4)
    slow = gen.generate(inputs, beam=4, max_length=64, cache=False)
    for a, b in zip(fast, slow):
        assert a.text == b.text
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)
