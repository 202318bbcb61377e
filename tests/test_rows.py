"""The packed-row training step (modeling/rows.py, attention.py, loss.py, row_forward.py;
training/step.py, engine.py): layout, attention rule, loss, compile, and the host waits."""

import numpy as np
import pytest
import torch

from codeexecutor.modeling.attention import tile_attention, tile_mask
from codeexecutor.modeling.loss import weighted_ce
from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
from codeexecutor.modeling.rows import BLOCK, RowSpec, allowed, block_lists, kv_tiles, loss_weights, pack_row


def tiny(positions="absolute", vocab=300):
    torch.manual_seed(0)
    cfg = CodeExecutorConfig.preset(
        "tiny",
        vocab_size=vocab,
        positions=positions,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        structural_token_ids=[5, 6],
        mask0_token_id=4,
    )
    cfg._attn_implementation = "sdpa"
    return CodeExecutorModel(cfg)


def random_examples(rng, room: int, longest: int = 300):
    codes, traces, used = [], [], 0
    while True:
        lc, lt = int(rng.integers(1, longest // 3)), int(rng.integers(2, 2 * longest // 3))
        if used + lc + lt > room or rng.random() < 0.03:
            return codes, traces
        codes.append(rng.integers(7, 300, lc))
        traces.append(np.concatenate([[4], rng.integers(7, 300, lt - 2), [2]]))
        used += lc + lt


def torch_row(row: dict) -> dict:
    return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in row.items()}


def test_a_row_lays_examples_back_to_back_with_their_targets_and_weights():
    weights = loss_weights(20, other=10.0, structural=1.0, structural_ids=[5])
    row = pack_row([[0, 9], [0]], [[4, 5, 8, 2], [4, 2]], 9, pad_id=1, weight_of=weights)
    assert row["ids"].tolist() == [0, 9, 4, 5, 8, 2, 0, 4, 2]
    assert row["positions"].tolist() == [0, 1, 2, 3, 4, 5, 0, 1, 2]
    assert row["doc"].tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    assert row["code"].tolist() == [1, 1, 0, 0, 0, 0, 1, 0, 0]
    # <mask0> predicts 5 (structural: 1), 5 predicts 8, 8 predicts </s>; code, </s> (whose
    # next token is the next example's) and the last position bear nothing
    assert row["labels"][2:5].tolist() == [5, 8, 2]
    assert row["weights"].tolist() == [0, 0, 1, 10, 10, 0, 0, 10, 0]
    padded = pack_row([[0, 9]], [[4, 2]], 8, pad_id=1, weight_of=weights)
    assert padded["ids"].tolist() == [0, 9, 4, 2, 1, 1, 1, 1]
    assert padded["doc"].tolist() == [0, 0, 0, 0, 1, 2, 3, 4]  # each padding token alone: it sees only itself
    with pytest.raises(ValueError, match="do not fit"):
        pack_row([[0] * 5], [[4] * 5], 8, 1, weights)


def test_tiles_hold_exactly_the_pairs_the_rule_allows():
    rng = np.random.default_rng(0)
    for trial in range(60):
        T = 128 * int(rng.integers(1, 5))
        row = pack_row(*random_examples(rng, T), T, 1, np.ones(300, dtype=np.float32))
        dense = allowed(row["doc"], row["code"])
        for block in (32, 64, 128):
            tiles = kv_tiles(row["doc"], row["code"], block)
            for i in range(T // block):
                for j in range(T // block):
                    pairs = dense[i * block : (i + 1) * block, j * block : (j + 1) * block]
                    inside = tiles.lo[i] <= j <= tiles.hi[i]
                    assert inside == pairs.any(), (trial, block, i, j)
                    if inside:
                        assert tiles.full[i, j - tiles.lo[i]] == pairs.all(), (trial, block, i, j)
            lists = block_lists(tiles, T // block)
            assert (lists["kv_num"] + lists["full_num"] == tiles.hi - tiles.lo + 1).all()


@pytest.mark.parametrize("tile", [32, 64, 128])
def test_tile_attention_is_the_rules_dense_attention(tile):
    rng = np.random.default_rng(tile)
    for _ in range(10):
        T = 512
        row = pack_row(*random_examples(rng, T), T, 1, np.ones(300, dtype=np.float32))
        tiles = kv_tiles(row["doc"], row["code"], tile)
        q, k, v = (torch.randn(T, 2, 8, dtype=torch.float64) for _ in range(3))
        mask = tile_mask(
            torch.from_numpy(row["doc"]),
            torch.from_numpy(row["code"]),
            torch.from_numpy(tiles.lo),
            torch.empty(tiles.span),
            tile,
            torch.float64,
        )
        out = tile_attention(q, k, v, mask, 8**-0.5)
        dense = torch.from_numpy(allowed(row["doc"], row["code"]))
        ref = (
            torch.nn.functional.scaled_dot_product_attention(
                q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=dense
            )
            .transpose(0, 1)
            .reshape(T, 16)
        )
        assert torch.allclose(out, ref, atol=1e-10)


def test_the_chunked_weighted_loss_is_cross_entropy_with_its_gradients():
    torch.manual_seed(0)
    h = torch.randn(300, 16, dtype=torch.float64, requires_grad=True)
    W = torch.randn(50, 16, dtype=torch.float64, requires_grad=True)
    y, w = torch.randint(0, 50, (300,)), torch.rand(300) * (torch.rand(300) > 0.3)
    (weighted_ce(h, W, y, w, chunk=64) / w.sum()).backward()
    ours = h.grad.clone(), W.grad.clone()
    h.grad = W.grad = None
    ref = (torch.nn.functional.cross_entropy((h @ W.T).float(), y, reduction="none") * w).sum() / w.sum()
    ref.backward()
    assert torch.allclose(ours[0], h.grad, atol=1e-6) and torch.allclose(ours[1], W.grad, atol=1e-6)
    with torch.no_grad():
        assert weighted_ce(h, W, y, w, chunk=7).item() == pytest.approx((ref * w.sum()).item(), rel=1e-6)


def _padded_and_row(rng, n=5, spec=None):
    from codeexecutor.modeling.tokenizer import pad

    codes = [[0, 7] + rng.integers(10, 300, int(rng.integers(3, 40))).tolist() + [2] for _ in range(n)]
    traces = [[4] + rng.integers(5, 300, int(rng.integers(3, 90))).tolist() + [2] for _ in range(n)]
    padded = {**pad(codes, 1, "code"), **pad(traces, 1, "trace")}
    spec = spec or RowSpec(1024, 384)
    model = tiny()
    row = spec.row(codes, traces, 1, model.loss_table(), 128)
    return padded, torch_row(row)


@pytest.mark.parametrize("positions", ["absolute", "rotary"])
@pytest.mark.parametrize("fixed", [False, True])
def test_the_packed_row_step_gives_todays_padded_loss_and_gradients(positions, fixed):
    """One batch through the packed step and through the padded step the loop ran before:
    the same loss and gradients (float64: to rounding; bf16 autocast: within its noise)."""
    padded, row = _padded_and_row(np.random.default_rng(1), spec=RowSpec(1024, 384, fixed=fixed))
    model = tiny(positions).double()
    ref = model(**padded).loss
    ref.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    loss = model(row=row).loss
    loss.backward()
    assert loss.item() == pytest.approx(ref.item(), rel=1e-7)  # its softmax runs in float32
    for n, p in model.named_parameters():
        if n in want:
            assert (p.grad - want[n]).norm() <= 1e-5 * want[n].norm() + 1e-12, n  # key biases: 0 either way
    model = tiny(positions)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        half = model(row=row).loss
        full = model(**padded).loss
    assert abs(half.item() - full.item()) / full.item() < 2e-2


def test_the_row_step_compiles_whole_and_once_for_every_row_of_its_shape():
    """`torch.compile(fullgraph=True, dynamic=False)`: a graph break raises; rows of the
    same spec (fixed shapes) run the compiled graph without recompiling, with the eager
    step's loss."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    rng = np.random.default_rng(2)
    spec = RowSpec(1024, 384, fixed=True)
    model = tiny("rotary")
    rows = [torch_row(spec.row(*random_examples(rng, 1024, 384), 1, model.loss_table(), 128)) for _ in range(3)]
    eager = [model(row=r).loss.item() for r in rows]
    model.compile_rows()
    for r, want in zip(rows, eager):
        loss = model(row=r).loss
        loss.backward()
        assert loss.item() == pytest.approx(want, rel=1e-4)
    assert sum(counters["graph_break"].values()) == 0
    assert counters["stats"]["unique_graphs"] == 1  # one graph for all three rows: no recompile


def test_flex_attentions_block_mask_from_the_data_workers_lists_is_the_rule():
    """The block lists the data worker makes (`block_lists`) give FlexAttention the same
    block mask as `create_block_mask` over the rule, and the compiled FlexAttention forward
    the rule's dense attention (its backward needs CUDA: tests/test_gpu.py)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from codeexecutor.modeling.attention import flex_block_mask

    rng = np.random.default_rng(3)
    T = 512
    row = pack_row(*random_examples(rng, T), T, 1, np.ones(300, dtype=np.float32))
    doc, code = torch.from_numpy(row["doc"]), torch.from_numpy(row["code"])
    lists = {
        k: torch.from_numpy(v) for k, v in block_lists(kv_tiles(row["doc"], row["code"], BLOCK), T // BLOCK).items()
    }
    ours = flex_block_mask(doc, code, lists["kv_num"], lists["kv_index"], lists["full_num"], lists["full_index"], BLOCK)
    ref = create_block_mask(
        lambda b, h, q, k: (doc[q] == doc[k]) & (code[k] | (k <= q)), None, None, T, T, device="cpu"
    )
    assert torch.equal(ours.kv_num_blocks, ref.kv_num_blocks) and torch.equal(
        ours.full_kv_num_blocks, ref.full_kv_num_blocks
    )
    q, k, v = (torch.randn(1, 2, T, 16) for _ in range(3))
    out = torch.compile(flex_attention, fullgraph=True, dynamic=False)(q, k, v, block_mask=ours)
    dense = torch.from_numpy(allowed(row["doc"], row["code"]))
    assert torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense), atol=1e-5)


def test_the_flex_row_forward_compiles_whole_with_the_tile_paths_loss():
    """The GPU's row step, compiled as the draw compiles it (`fullgraph`, fixed shapes),
    checked here as far as a CPU goes: its forward (FlexAttention's backward needs CUDA:
    tests/test_gpu.py) makes one graph with no break, reused by the next row of its spec,
    and gives the tile path's loss on the same examples."""
    from torch._dynamo.utils import counters

    from codeexecutor.modeling.rows import CPU_TILE

    rng = np.random.default_rng(2)
    model = tiny("rotary").eval()
    flex, tiles = RowSpec(1024, 384, "flex", BLOCK, fixed=True), RowSpec(1024, 384, "tiles", CPU_TILE, fixed=True)
    batches = [random_examples(rng, 1024, 384) for _ in range(2)]
    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        want = [model(row=torch_row(tiles.row(*ex, 1, model.loss_table(), 128))).loss.item() for ex in batches]
        model.compile_rows()
        got = [model(row=torch_row(flex.row(*ex, 1, model.loss_table(), 128))).loss.item() for ex in batches]
    assert got == pytest.approx(want, rel=1e-4)
    assert sum(counters["graph_break"].values()) == 0 and counters["stats"]["unique_graphs"] == 1


def test_a_training_step_makes_the_host_wait_for_nothing():
    """Forward, backward, clipping and the optimizer step of the torch engine read nothing
    back from the device: no `.item()`, `bool()`, `nonzero`, boolean index or
    `synchronize` (counted on the CPU as they would cost on a GPU; training/waits.py)."""
    from codeexecutor.training.engine import TorchEngine, optimizer_for
    from codeexecutor.training.step import synthetic_row
    from codeexecutor.training.waits import DeviceCounter

    model = tiny("rotary")
    optimizer = optimizer_for(model, 0.01, "cpu")
    engine = TorchEngine(
        model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1e-3), 2, 1.0, "cpu", None
    )
    for fixed in (True, False):
        row = synthetic_row(RowSpec(1024, 384, fixed=fixed), model, 128)
        for _ in range(2):  # the first step makes the optimizer's state
            with DeviceCounter() as counted:
                for _micro in range(2):
                    loss = engine(row=row).loss
                    engine.backward(loss)
                    engine.step()
        assert counted.waits == 0, dict(counted.wait_kinds)
        assert counted.ops > 50  # it did count the step's work
    with DeviceCounter() as counted:
        loss.item()
        torch.tensor([1.0, 2.0])[torch.tensor([True, False])]
    assert counted.wait_kinds["_local_scalar_dense"] == 1 and counted.waits == 2  # and it sees waits where there are


def test_a_row_spec_refuses_a_length_off_the_block_or_shorter_than_an_example():
    with pytest.raises(ValueError, match="not a multiple of 128"):
        RowSpec(1000, 384)
    with pytest.raises(ValueError, match="cannot hold an example of 1024"):
        RowSpec(896, 1024)


def test_a_compile_that_fails_leaves_the_run_stepping_eagerly_and_says_why(monkeypatch):
    """An old torch (or a machine without a compiler) whose compile raises: the probe on a
    synthetic row catches it before training, names it, and the model steps eagerly."""
    from types import SimpleNamespace

    from codeexecutor.training.step import compile_and_probe

    def broken(fn, **kwargs):
        def run(*args, **kw):
            raise RuntimeError("inductor needs a newer torch\nsecond line")

        return run

    monkeypatch.setattr(torch, "compile", broken)
    model = tiny()
    cur = SimpleNamespace(model=SimpleNamespace(max_code_length=128))
    report = compile_and_probe(model, RowSpec(1024, 384, fixed=True), cur, "cpu", None)
    assert report["compiled"] is False
    assert report["fallback"] == "compile failed (RuntimeError: inductor needs a newer torch); this run steps eagerly"
    assert not hasattr(model, "_row_loss") and all(p.grad is None for p in model.parameters())
    row = torch_row(
        RowSpec(1024, 384, fixed=True).row(
            *random_examples(np.random.default_rng(5), 1024, 384), 1, model.loss_table(), 128
        )
    )
    assert torch.isfinite(model(row=row).loss)


@pytest.mark.parametrize("tiles_compile", [True, False])
def test_a_flex_step_that_fails_to_compile_falls_back_to_tiles_never_to_eager_flex(monkeypatch, tiles_compile):
    """FlexAttention's compile failing (a kernel the device cannot build): the tile path is
    compiled instead, and where that fails too the tile path steps eagerly; eager flex,
    which would materialise a row's whole score matrix, is never what the run steps with."""
    from types import SimpleNamespace

    from codeexecutor.training.step import compile_with_fallbacks

    tried = []

    def compile_(fn, **kwargs):
        def run(model, row):
            flex = "kv_num" in row
            tried.append("flex" if flex else "tiles")
            if flex or not tiles_compile:
                raise RuntimeError(f"no kernel for {'flex' if flex else 'tiles'}\ndetail")
            return fn(model, row)

        return run

    monkeypatch.setattr(torch, "compile", compile_)
    model = tiny()
    cur = SimpleNamespace(
        model=SimpleNamespace(max_code_length=128, max_trace_length=256), train=SimpleNamespace(max_tokens=1024)
    )
    attention, probe = compile_with_fallbacks(model, cur, "flex", "cpu", None)
    assert attention == "tiles" and tried == ["flex", "tiles"] and probe["compiled"] is tiles_compile
    assert (
        "the flex row step: compile failed (RuntimeError: no kernel for flex); trying the tile path"
        == probe["fallbacks"][0]
    )
    assert len(probe["fallbacks"]) == (1 if tiles_compile else 2)
    if not tiles_compile:
        assert probe["fallbacks"][1].endswith("this run steps eagerly through the tile path")
    assert hasattr(model, "_row_loss") is tiles_compile and all(p.grad is None for p in model.parameters())


def test_the_loss_head_in_fp16_at_its_worst_case_gives_fp32s_gradients():
    """4,096 positions in one chunk, every weight 10 (the largest a recipe gives), logits in
    the hundreds, every label the same token and one hidden feature large and positive:
    the output layer's weight gradient sums to about 1.2 million, past fp16's 65,504,
    inside the forward, before the row's normalisation (by its total weight, 40,960) and
    any loss scale. In fp16, at the loss scaler's smallest scale (1) and at 1,024, the
    gradients are finite and equal fp32's within fp16 noise."""
    torch.manual_seed(0)
    N, H, V = 4096, 64, 512
    h = torch.randn(N, H) * 8
    h[:, 0] = 30.0
    W = torch.randn(V, H)
    y, w = torch.zeros(N, dtype=torch.long), torch.full((N,), 10.0)
    for scale in (1.0, 1024.0):
        got = []
        for dtype in (torch.float16, torch.float64):
            hh = h.to(torch.float16).to(dtype).requires_grad_()  # the same values in both: fp16's
            WW = W.to(torch.float16).to(dtype).requires_grad_()
            (weighted_ce(hh, WW, y, w, chunk=N) / w.sum() * scale).backward()  # as row_loss normalises
            got.append((hh.grad.double(), WW.grad.double()))
        (h16, w16), (h64, w64) = got
        assert float(w64.abs().max()) * float(w.sum()) / scale > 65504  # the sum the forward makes passes fp16's range
        assert bool(torch.isfinite(h16).all()) and bool(torch.isfinite(w16).all())
        assert float((w16 - w64).abs().max() / w64.abs().max()) < 2e-3
        # The hidden states' gradients carry the fp16 rounding of logits in the hundreds (a step of 0.125 there:
        # about 10% on a probability), and at scale 1 they fall to fp16's subnormals, what a loss scale is for.
        if scale > 1:
            assert float((h16 - h64).abs().max() / h64.abs().max()) < 5e-2


def test_deepspeeds_row_step_is_probed_in_the_dtype_it_steps_in_and_falls_back_by_name(monkeypatch):
    """On the DeepSpeed path (ZeRO-1/2) the row step gets the torch engine's probe, run in
    the half dtype DeepSpeed casts the weights to, and its named fallbacks; ZeRO-3, whose
    parameters exist only once partitioned, is compiled with breaks and says so."""
    from types import SimpleNamespace

    from codeexecutor.training.step import prepare_rows

    seen = []

    def compile_(fn, **kwargs):
        def run(model, row):
            seen.append(model.lm_head.weight.dtype)
            raise RuntimeError("no kernel for this device\ndetail")

        return run

    monkeypatch.setattr(torch, "compile", compile_)
    model = tiny()
    cur = SimpleNamespace(
        model=SimpleNamespace(max_code_length=128, max_trace_length=256),
        train=SimpleNamespace(max_tokens=1024, compile=True),
    )
    attention, probe = prepare_rows(model, cur, "tiles", "cpu", None, "deepspeed", 2, torch.bfloat16)
    assert seen == [torch.bfloat16] and attention == "tiles" and probe["compiled"] is False
    assert probe["fallbacks"] == [
        "the tiles row step: compile failed (RuntimeError: no kernel for this device); this "
        "run steps eagerly through the tile path"
    ]
    seen.clear()
    attention, probe = prepare_rows(tiny(), cur, "tiles", "cpu", None, "deepspeed", 3, None)
    assert seen == [] and probe["compiled"] and not probe["fullgraph"] and "ZeRO-3" in probe["fallbacks"][0]
