"""What a cluster user relies on, checked on whatever GPU runs the suite (`-m gpu`; every
test skips without CUDA). The GPU draw (benchmarks/campaign.py) runs this file."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _packed_batch(device, n_rows=6, seed=0):
    from codeexecutor.modeling.tokenizer import pad

    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(40, 500, (n_rows,), generator=g).tolist()
    seqs = [torch.randint(3, 300, (n,), generator=g).tolist() for n in lengths]
    return {"ids": pad(seqs, 1, "p")["p_ids"].to(device),
            "code_len": torch.tensor([max(4, n // 3) for n in lengths], device=device),
            "total_len": torch.tensor(lengths, device=device)}


def _model(device, attention="sdpa"):
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel

    torch.manual_seed(0)
    cfg = CodeExecutorConfig.preset("mini", vocab_size=300, attention=attention, max_trace_length=768,
                                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # FlexAttention takes none
    cfg._attn_implementation = "sdpa"
    return CodeExecutorModel(cfg).to(device)


def test_flex_attention_matches_the_dense_mask_forward_and_backward():
    """FlexAttention's block mask against the dense additive mask in bf16 autocast: losses
    and gradients within bf16's tolerance (the CPU test checks the forward in float32)."""
    batch = _packed_batch("cuda")
    out = {}
    for attention in ("sdpa", "flex"):
        m = _model("cuda", attention)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(**batch, reduction="none").loss
        loss.sum().backward()
        out[attention] = (loss.detach().float(), m.roberta.encoder.layer[0].attention.self.query.weight.grad.float())
    (a, ga), (b, gb) = out["sdpa"], out["flex"]
    assert ((a - b).abs() / a.abs()).max() < 2e-2, (a, b)
    assert (ga - gb).norm() / ga.norm() < 5e-2


def test_which_sdpa_kernel_takes_the_dense_mask():
    """Records which SDPA backends accept our (B, 1, L, L) additive mask: the fused flash
    kernel takes no arbitrary mask, which is what FlexAttention is for."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(2, 8, 256, 64, device="cuda", dtype=torch.bfloat16)
    mask = torch.zeros(2, 1, 256, 256, device="cuda", dtype=torch.bfloat16)
    ran = {}
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH):
        try:
            with sdpa_kernel(backend):
                torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
            ran[backend.name] = True
        except RuntimeError:
            ran[backend.name] = False
    print(json.dumps({"sdpa_backends_taking_a_dense_mask": ran}))
    assert ran["MATH"]  # what the others took is the record this test prints


def test_a_bf16_training_step_on_the_gpu_is_finite():
    m = _model("cuda")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    batch = _packed_batch("cuda", seed=1)
    losses = []
    for _ in range(3):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]


def test_zero2_bf16_through_the_launcher_resumes_with_one_step_sequence(tmp_path, demo_data):
    """run_pretrain.sh as on a cluster (deepspeed launcher, ZeRO-2 bf16), stopped by
    --max-steps and started again: the log has every step once."""
    import yaml

    cur = {"model": {"preset": "tiny", "vocab_size": 800, "max_trace_length": 256},
           "train": {"output_dir": str(tmp_path / "run"), "micro_batch_size": 4, "log_every": 1, "save_every": 100,
                     "eval_examples": 0},
           "stages": [{"name": "singleline", "steps": 6, "lr": 2.0e-4, "warmup": 1,
                       "sources": [{"path": str(demo_data / "singleline" / "singleline"), "task": "singleline"}]}]}
    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(cur))
    env = {**os.environ, "PYTHON": sys.executable, "CURRICULUM": str(path), "DS_CONFIG": "ds_configs/zero2_bf16.json",
           "MASTER_PORT": "29611"}
    first = subprocess.run(["bash", "run_pretrain.sh", "--max-steps", "3"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    second = subprocess.run(["bash", "run_pretrain.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0 and "at step 3" in second.stdout + second.stderr, second.stderr[-3000:]
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3, 4, 5, 6]
