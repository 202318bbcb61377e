"""The crash verdict at step ends (generation/verdict.py): the margin, the bias, and the
replay property that lets a bias be chosen from free decodes."""

import math

import pytest
import torch

from codeexecutor.generation.decoding import Decoding
from codeexecutor.generation.verdict import StepEnds, finite_margin
from codeexecutor.modeling.trace_metrics import crash_score_auroc


class _Vocab:
    eos_token_id = 2

    def get_vocab(self):
        return {"<line>": 5, "<exception>": 7, "</s>": 2, "x": 9}


def test_margin_and_bias_act_only_where_a_step_may_end():
    logp = torch.full((4, 10), -20.0)
    logp[0, 9], logp[0, 7] = -0.1, -3.0  # inside a value: the best token is a name piece
    logp[1, 5], logp[1, 7] = -0.2, -2.0  # a step end, <line> first
    logp[2, 2], logp[2, 7] = -0.3, -1.5  # a step end, </s> first
    logp[3, 7], logp[3, 5] = -0.1, -4.0  # <exception> first
    biased, margin = StepEnds(_Vocab(), bias=2.5)(logp)
    assert margin[0] == -math.inf and biased[0, 7] == logp[0, 7]
    assert margin[1].item() == pytest.approx(-1.8) and biased[1, 7].item() == pytest.approx(0.5)
    assert margin[2].item() == pytest.approx(-1.2)
    assert margin[3].item() == pytest.approx(3.9)
    assert torch.equal(biased[:, :7], logp[:, :7]) and torch.equal(biased[:, 8:], logp[:, 8:])
    unbiased, _ = StepEnds(_Vocab())(logp)
    assert unbiased is logp
    with pytest.raises(ValueError, match="finite"):
        StepEnds(_Vocab(), bias=math.inf)
    end_only, margin = StepEnds(_Vocab(), bias=2.5, at="end")(logp)
    assert margin[1] == -math.inf and end_only[1, 7] == logp[1, 7]  # <line> first: not the trace's end
    assert margin[2].item() == pytest.approx(-1.2) and end_only[2, 7].item() == pytest.approx(1.0)
    assert finite_margin(-math.inf) is None and finite_margin(-1.5) == -1.5


def test_auroc_of_a_crash_score():
    assert crash_score_auroc([3, 2, 1, 0], [True, True, False, False]) == 100
    assert crash_score_auroc([0, 1, 2, 3], [True, True, False, False]) == 0
    assert crash_score_auroc([-math.inf, -math.inf, 1.0], [True, False, False]) == 25  # a tie counts half
    assert crash_score_auroc([1.0, 2.0], [True, True]) is None


def test_a_biased_greedy_verdict_is_the_free_decodes_peak_above_minus_the_bias(overfit_model):
    """The prefix of a biased greedy decode is the free decode's up to its first step end
    whose margin beats -bias: its verdict follows from the free decode's peak."""
    from codeexecutor.generation import TraceGenerator

    path, rows = overfit_model
    gen = TraceGenerator(str(path))
    inputs = [r["input"] for r in rows]
    free = gen.generate(inputs, Decoding(beam=1, max_length=128, names=False, values=False))
    peaks = [o.exception_peak for o in free]
    assert all(math.isfinite(p) and p < 0 for p in peaks)  # the model never saw a crash
    assert all(math.isfinite(o.exception_end) and o.exception_end <= o.exception_peak for o in free)
    assert any(o.exception_end < o.exception_peak for o in free)  # the end is one step end, the peak the best of all
    assert not any("<exception>" in o.text for o in free)
    ordered = sorted(set(peaks))
    assert len(ordered) >= 3
    for k in (len(ordered) // 3, 2 * len(ordered) // 3):
        bias = -(ordered[k - 1] + ordered[k]) / 2  # between two peaks: some programs flip, the others not
        biased = gen.generate(inputs, Decoding(beam=1, max_length=128, exception_bias=bias, names=False, values=False))
        expected = [p > -bias for p in peaks]
        assert 0 < sum(expected) < len(inputs)
        assert ["<exception>" in o.text for o in biased] == expected
        for o, f, flips in zip(biased, free, expected):
            if flips:  # the free decode's steps up to the crash, then the crash step
                head = o.text.split("<exception>")[0].strip()
                assert f.text.startswith(head)
            else:
                assert o.text == f.text
    ends = sorted({o.exception_end for o in free})
    bias = -(ends[len(ends) // 2 - 1] + ends[len(ends) // 2]) / 2
    at_end = gen.generate(
        inputs, Decoding(beam=1, max_length=128, exception_bias=bias, exception_at="end", names=False, values=False)
    )
    expected = [o.finished and o.exception_end > -bias for o in free]
    assert 0 < sum(expected) < len(inputs)
    assert ["<exception>" in o.text for o in at_end] == expected
    for o, f, flips in zip(at_end, free, expected):  # the whole free trace, then the crash where it ended
        assert o.text.split("<exception>")[0].strip() == f.text.strip() if flips else o.text == f.text
    slow = gen.generate(
        inputs[:4], Decoding(beam=1, max_length=128, exception_bias=2.0, names=False, values=False), cache=False
    )
    fast = gen.generate(inputs[:4], Decoding(beam=1, max_length=128, exception_bias=2.0, names=False, values=False))
    assert [a.text for a in slow] == [b.text for b in fast]
    assert [a.exception_peak for a in slow] == pytest.approx([b.exception_peak for b in fast], abs=1e-4)
    assert [a.exception_end for a in slow] == pytest.approx([b.exception_end for b in fast], abs=1e-4)
