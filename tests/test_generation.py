
import pytest


from codeexecutor.modeling.format import parse_trace


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
