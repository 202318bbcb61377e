"""What a cluster user relies on, checked on whatever GPU runs the suite (`-m gpu`; every
test skips without CUDA). A lease's second call (gpu_run/measure.py) runs this file."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _model(device, positions="rotary"):
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel

    torch.manual_seed(0)
    cfg = CodeExecutorConfig.preset(
        "mini",
        vocab_size=300,
        positions=positions,
        max_trace_length=768,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,  # FlexAttention takes none
        structural_token_ids=[5, 6],
        mask0_token_id=4,
    )
    cfg._attn_implementation = "sdpa"
    return CodeExecutorModel(cfg).to(device)


def _row(model, attention, seed=0, tokens=4096):
    import numpy as np

    from codeexecutor.modeling.rows import BLOCK, CPU_TILE, RowSpec
    from codeexecutor.training.step import to_device

    rng = np.random.default_rng(seed)
    codes, traces, used = [], [], 0
    while True:
        c, t = int(rng.integers(10, 256)), int(rng.integers(10, 700))
        if used + c + t > tokens:
            break
        codes.append(rng.integers(7, 300, c))
        traces.append(rng.integers(7, 300, t))
        used += c + t
    spec = RowSpec(tokens, 1024, attention, BLOCK if attention == "flex" else CPU_TILE, fixed=True)
    row = spec.row(codes, traces, 1, model.loss_table(), 256)
    return to_device({k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in row.items()}, "cuda")


def test_flex_attention_rows_match_the_tile_path_forward_and_backward():
    """The compiled row step with FlexAttention's block mask against the tile path on the
    same examples in bf16 autocast: loss and gradients within bf16's tolerance."""
    out = {}
    for attention in ("tiles", "flex"):
        m = _model("cuda")
        m.compile_rows()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(row=_row(m, attention)).loss
        loss.backward()
        out[attention] = (loss.detach().float(), m.roberta.encoder.layer[0].attention.self.query.weight.grad.float())
    (a, ga), (b, gb) = out["tiles"], out["flex"]
    assert abs(a - b) / a < 2e-2, (a, b)
    assert (ga - gb).norm() / ga.norm() < 5e-2


def test_a_compiled_bf16_row_step_on_the_gpu_learns_and_never_waits():
    from codeexecutor.training.engine import TorchEngine, optimizer_for

    m = _model("cuda")
    m.compile_rows()
    opt = optimizer_for(m, 0.01, "cuda")
    engine = TorchEngine(m, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1e-3), 1, 1.0, "cuda", "bf16")
    row = _row(m, "flex", seed=1)
    losses = []
    for _step in range(6):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = engine(row=row).loss
        engine.backward(loss)
        engine.step()
        losses.append(loss.detach())
    torch.cuda.set_sync_debug_mode("error")  # any wait for the device inside a step now raises
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = engine(row=row).loss
        engine.backward(loss)
        engine.step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    losses = torch.stack(losses).float().tolist()
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]


def test_greedy_decoding_in_a_cuda_graph_gives_the_eager_tokens():
    from codeexecutor.generation.device_search import DeviceSearch, Launch

    m = _model("cuda").to(torch.bfloat16).eval()

    class Enc:
        pad, mask0, eos = 1, 4, 2

    g = torch.Generator().manual_seed(0)
    codes = [torch.randint(5, 300, (int(n),), generator=g).tolist() for n in torch.randint(8, 60, (12,), generator=g)]
    with torch.no_grad():
        graph = DeviceSearch(m, Enc, codes, 1, 40, launch=Launch(graphs=True)).run()
        eager = DeviceSearch(m, Enc, codes, 1, 40, launch=Launch(graphs=False)).run()
    assert [r[1] for r in graph] == [r[1] for r in eager] and [r[2] for r in graph] == [r[2] for r in eager]


def test_zero2_bf16_through_the_launcher_resumes_with_one_step_sequence(tmp_path, demo_data):
    """run_pretrain.sh as on a cluster (deepspeed launcher, ZeRO-2 bf16), stopped by
    --max-steps and started again: the log has every step once."""
    import yaml

    cur = {
        "model": {"preset": "tiny", "vocab_size": 800, "max_trace_length": 256},
        "train": {
            "output_dir": str(tmp_path / "run"),
            "micro_batch_size": 4,
            "log_every": 1,
            "save_every": 100,
            "eval_examples": 0,
            "max_tokens": 1024,
            "engine": "deepspeed",
        },
        "stages": [
            {
                "name": "singleline",
                "steps": 6,
                "lr": 2.0e-4,
                "warmup": 1,
                "sources": [{"path": str(demo_data / "singleline" / "singleline"), "task": "singleline"}],
            }
        ],
    }
    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(cur))
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "CURRICULUM": str(path),
        "DS_CONFIG": "ds_configs/zero2_bf16.json",
        "MASTER_PORT": "29611",
    }
    first = subprocess.run(
        ["bash", "run_pretrain.sh", "--max-steps", "3"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0, first.stderr[-3000:]
    second = subprocess.run(["bash", "run_pretrain.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0 and "at step 3" in second.stdout + second.stderr, second.stderr[-3000:]
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3, 4, 5, 6]
