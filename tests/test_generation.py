import pytest

from codeexecutor.generation.decoding import Decoding
from codeexecutor.modeling.format import parse_trace


def test_tiny_model_overfits_twenty_examples_to_exact_traces(overfit_model):
    from codeexecutor.generation import TraceGenerator

    path, rows = overfit_model
    gen = TraceGenerator(str(path))
    outs = gen.generate([r["input"] for r in rows], Decoding(beam=1, max_length=128, names=False, values=False))
    exact = sum(parse_trace(o.text).steps == parse_trace(r["target"]).steps for o, r in zip(outs, rows))
    assert exact == 20


def test_cached_batched_beam_equals_recomputation(overfit_model):
    from codeexecutor.generation import TraceGenerator

    path, rows = overfit_model
    gen = TraceGenerator(str(path))
    inputs = [r["input"] for r in rows[:4]]
    fast = gen.generate(inputs, Decoding(beam=4, max_length=64, names=False, values=False), batch_size=4)
    slow = gen.generate(inputs, Decoding(beam=4, max_length=64, names=False, values=False), cache=False)
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


def test_one_select_over_a_batch_matches_each_programs_own_search():
    """The batched step (one top-k for every program, `record` per beam) against the
    release's rule written out for one program at a time: same survivors, same finished
    hypotheses, same answers, also when hypotheses end and get no children."""
    import torch

    from codeexecutor.generation.beam import NO_CHILDREN, Beam, select

    torch.manual_seed(0)
    A, size, V, eos = 5, 3, 11, 2
    beams = [Beam(size, eos) for _ in range(A)]
    ref_scores = [None] * A
    ref_tokens: list[list[int]] = [[] for _ in range(A)]
    scores = last = None
    for _step in range(12):
        logp = torch.randn(A, size, V).log_softmax(-1)
        logp[:, :, eos] += 1.0  # hypotheses end often
        scores, back, token = select(logp, scores, None if last is None else last.eq(eos))
        for a, beam in enumerate(beams):
            beam.record(scores[a].tolist(), back[a].tolist(), token[a].tolist())
            if ref_scores[a] is None:
                total = logp[a, 0]
            else:
                total = logp[a] + ref_scores[a][:, None]
                total[torch.tensor([t == eos for t in ref_tokens[a]])] = NO_CHILDREN
            best, idx = total.reshape(-1).topk(size)
            ref_scores[a], ref_tokens[a] = best, (idx % V).tolist()
            assert back[a].tolist() == (idx // V).tolist() and token[a].tolist() == ref_tokens[a]
        last = token
    assert any(beam.finished for beam in beams) and any(beam.done() for beam in beams)
    for a, beam in enumerate(beams):
        expected = max(f[0] for f in beam.finished) if beam.finished else float(ref_scores[a][0])
        assert beam.best()[0] == expected


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
    assert all(
        o.finished for o in gen.generate(inputs, Decoding(beam=1, max_length=128, names=False, values=False))
    )  # it reproduces whole traces
    for cache in (True, False):
        cut = gen.generate(inputs, Decoding(beam=2, max_length=4, names=False, values=False), cache=cache)
        assert not any(o.finished for o in cut) and all(o.tokens == 4 for o in cut)
