"""The search kept on the device (generation/device_search.py) decodes, on the CPU, exactly
what the batched search before it decoded (tests/reference_search.py): every token, the
score bit for bit, whether it finished, and the crash margins, for greedy and beam search,
with and without the state rules and the exception bias, on the shipped model."""

import math

import pytest
import torch

from codeexecutor.generation.decoding import Decoding

from .conftest import ROOT
from .reference_search import reference_beam

MODEL = ROOT / "models" / "codeexecutor-mini-cpu"


@pytest.fixture(scope="module")
def generator_and_programs(demo_data):
    import datasets

    from codeexecutor.generation.search import TraceGenerator

    gen = TraceGenerator(str(MODEL), device="cpu")
    rows = []
    for name, n in (
        ("codenetmut/codenetmut", 4),
        ("codenetmut/errors", 3),
        ("tutorial/tutorial", 3),
        ("functions/functions", 2),
    ):
        ds = datasets.load_from_disk(str(demo_data / name))["test"]
        rows += [ds[i] for i in range(min(n, len(ds)))]
    return gen, [gen.profile.example(r)[0] for r in rows]


@pytest.mark.parametrize(
    "size, rules, bias, max_length, penalty",
    [
        (1, False, None, 768, 0.0),  # evaluate's decoding: greedy, free, to the cap
        (1, True, 0.5, 300, 0.0),  # trace's: the state rules, the exception bias
        (3, False, 0.0, 120, 0.0),  # beams, margins tracked
        (2, True, None, 120, 1.0),  # beams with the rules, ranked per length
    ],
)
def test_the_device_search_decodes_the_old_searchs_tokens(
    generator_and_programs, size, rules, bias, max_length, penalty
):
    from codeexecutor.generation.verdict import StepEnds

    gen, inputs = generator_and_programs
    ends = StepEnds(gen.tok, bias) if bias is not None else None
    rule = gen._rules(True, True) if rules else None
    codes = [gen.encoder.code(t) for t in inputs]
    with torch.no_grad():
        for start in range(0, len(codes), 6):
            chunk = codes[start : start + 6]
            rule_list = [rule(t) for t in inputs[start : start + 6]] if rule else None
            old = reference_beam(gen, chunk, size, max_length, rule_list, ends, penalty)
            rule_list = [rule(t) for t in inputs[start : start + 6]] if rule else None
            new = gen._beam(chunk, size, max_length, rule_list, ends, penalty)
            for a, b in zip(old, new):
                assert (a.text, a.tokens, a.finished) == (b.text, b.tokens, b.finished)
                assert a.logprob == b.logprob
                assert (a.exception_peak, a.exception_end) == (b.exception_peak, b.exception_end)


def test_generate_answers_in_input_order_whatever_the_batching(generator_and_programs):
    """Batches are made of programs of similar length; the answers come back in input order."""
    gen, inputs = generator_and_programs
    sorted_ = gen.generate(inputs, Decoding(beam=1, max_length=96, names=False, values=False), batch_size=5)
    as_given = gen.generate(
        inputs, Decoding(beam=1, max_length=96, names=False, values=False), batch_size=5, sort=False
    )
    one = [gen.generate([text], Decoding(beam=1, max_length=96, names=False, values=False))[0] for text in inputs[:4]]
    assert [g.text for g in sorted_] == [g.text for g in as_given]
    assert [g.text for g in sorted_[:4]] == [g.text for g in one]


def test_a_step_the_device_will_not_capture_decodes_eagerly_the_same_tokens(generator_and_programs):
    """A CUDA graph capture that fails (here: no CUDA at all) leaves the search where it
    was and stepping eagerly, with the reason kept: the same answers as an eager search."""
    from codeexecutor.generation.device_search import DeviceSearch, Launch

    gen, inputs = generator_and_programs
    codes = [gen.encoder.code(t) for t in inputs[:4]]
    with torch.no_grad():
        tried = DeviceSearch(gen.model, gen.encoder, codes, 1, 96, launch=Launch(graphs=True))
        answers = tried.run()
        eager = DeviceSearch(gen.model, gen.encoder, codes, 1, 96, launch=Launch(graphs=False)).run()
    assert (
        tried.graph_fallback.startswith("CUDA graph capture failed (")
        and "decoding steps eagerly" in tried.graph_fallback
    )
    assert [a[1] for a in answers] == [b[1] for b in eager] and [a[0] for a in answers] == [b[0] for b in eager]


@pytest.mark.parametrize("memory", ["as found", "NaN"])
def test_steps_over_the_whole_cache_decode_what_steps_over_its_written_part_decode(
    generator_and_programs, monkeypatch, memory
):
    """A GPU's greedy step attends over the whole preallocated cache (fixed shapes, for its
    CUDA graph), its unwritten columns masked; the CPU's over the columns written so far.
    Checked here on the CPU, both ways, in lockstep: fed the same tokens, the two give the
    same log-probabilities at every step, to float rounding. (Comparing two free greedy
    runs instead would fail wherever rounding flips a near tie between two tokens.)
    Whatever memory the cache is given: a mask's zero weight times a NaN left in an
    unwritten column is NaN (on an H200, a row of a CUDA-graph search decoded token 0 at
    every step so), so "NaN" hands every fresh allocation over NaN."""
    from codeexecutor.generation.device_search import DeviceSearch, Launch

    if memory == "NaN":
        empty, empty_like = torch.empty, torch.empty_like
        monkeypatch.setattr(torch, "empty", lambda *a, **k: empty(*a, **k).fill_(math.nan))
        monkeypatch.setattr(torch, "empty_like", lambda *a, **k: empty_like(*a, **k).fill_(math.nan))

    gen, inputs = generator_and_programs
    codes = [gen.encoder.code(t) for t in inputs]
    steps, seen = 120, {}

    def forced(name):
        def hook(logp):  # keep this step's log-probabilities; let only the whole-cache run's choice through
            seen[name] = logp.clone()
            choice = seen["whole"].argmax(-1, keepdim=True)
            return torch.full_like(logp, -math.inf).scatter(-1, choice, logp.gather(-1, choice))

        return hook

    with torch.no_grad():
        whole = DeviceSearch(gen.model, gen.encoder, codes, 1, steps, launch=Launch(graphs=False))
        whole.full_cache = True
        monkeypatch.undo()
        written = DeviceSearch(gen.model, gen.encoder, codes, 1, steps, launch=Launch(graphs=False))
        worst = 0.0
        for t in range(steps):
            whole._step(None, forced("whole"))
            written._step(written.cache.code + t + 1, forced("written"))
            assert torch.equal(whole.tokens, written.tokens)
            a, b = seen["whole"], seen["written"]
            assert not bool(torch.isnan(a).any() or torch.isnan(b).any())
            assert torch.equal(torch.isneginf(a), torch.isneginf(b))  # the same tokens ruled out, if any
            finite = torch.isfinite(a)
            worst = max(worst, float((a[finite] - b[finite]).abs().max()))
    assert worst < 1e-3, f"log-probabilities part by {worst} between the two caches"
    assert int(whole.fed.min()) > steps // 2  # the rows were still feeding real tokens, not padding


def test_a_cache_that_keeps_some_rows_copies_their_written_columns_and_zeros_the_rest():
    """keep_rows (programs whose search is done leave): the kept rows' written columns
    move with them, and every unwritten column is zeros with its mask closed, whatever
    the old buffers held there (NaN here: a whole-cache step multiplies them by weight 0)."""
    from types import SimpleNamespace

    from codeexecutor.modeling.decode import StaticCache

    N, H, S, D, capacity, written = 4, 2, 3, 5, 9, 6
    layer = SimpleNamespace(keys=torch.randn(N, H, S, D), values=torch.randn(N, H, S, D))
    cache = StaticCache(SimpleNamespace(layers=[layer]), torch.ones(N, S), capacity, torch.float32)
    cache.keys[0][:, :, S:written] = torch.randn(N, H, written - S, D)
    cache.bias[..., S:written] = 0.0
    before_k, before_b = cache.keys[0].clone(), cache.bias.clone()
    cache.keys[0][:, :, written:] = float("nan")
    cache.values[0][:, :, written:] = float("nan")
    rows = torch.tensor([3, 1])
    cache.keep_rows(rows, written)
    assert cache.keys[0].shape[0] == 2 and torch.equal(cache.keys[0][:, :, :written], before_k[rows][:, :, :written])
    assert torch.equal(cache.bias[..., :written], before_b[rows][..., :written])
    assert not cache.keys[0][:, :, written:].any() and not cache.values[0][:, :, written:].any()
    assert (cache.bias[..., written:] == cache.minimum).all()
