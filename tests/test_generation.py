
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


def test_beam_says_whether_its_answer_ended():
    import torch

    from codeexecutor.generation.beam import Beam

    eos = 0
    looping = torch.log_softmax(torch.tensor([[-9.0, 3.0, 0.0, 0.0, 0.0]] * 2), -1)  # token 1 forever
    beam = Beam(2, eos)
    for _ in range(6):
        beam.advance(looping)
    assert not beam.ended() and not beam.done()
    assert beam.best()[1] == [1] * 6  # the top hypothesis at the cap is still the answer
    ending = torch.log_softmax(torch.tensor([[3.0, 0.0, 0.0, 0.0, 0.0]] * 2), -1)
    beam.advance(ending)
    assert beam.ended()


def test_length_penalty_lets_a_longer_finished_trace_win():
    import math

    import torch

    from codeexecutor.generation.beam import Beam

    eos, half = 0, math.log(0.5)
    first = torch.tensor([[half, half]] * 2)  # end now or write token 1, equally likely
    then = torch.tensor([[math.log(0.95), math.log(0.05)]] * 2)  # after token 1, end almost surely
    answers = {}
    for alpha in (0.0, 1.0):
        beam = Beam(2, eos, length_penalty=alpha)
        beam.advance(first)
        beam.advance(then)
        assert beam.ended() and len(beam.finished) == 2
        answers[alpha] = beam.best()[1]
    assert answers[0.0] == []  # the release's ranking: the summed log-probability favours stopping at once
    assert answers[1.0] == [1]  # per length, the longer trace is the likelier


def test_generation_is_marked_unfinished_at_the_length_cap(overfit_model):
    from codeexecutor.generation import TraceGenerator

    path, rows = overfit_model
    gen = TraceGenerator(str(path))
    inputs = [r["input"] for r in rows[:3]]
    assert all(o.finished for o in gen.generate(inputs, beam=1, max_length=128))  # it reproduces whole traces
    for cache in (True, False):
        cut = gen.generate(inputs, beam=2, max_length=4, cache=cache)
        assert not any(o.finished for o in cut) and all(o.tokens == 4 for o in cut)
