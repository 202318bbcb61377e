import glob
import json
import os
import subprocess
import sys

import datasets
import pytest
import torch

from codeexecutor.errors import ConfigError
from codeexecutor.generation.decoding import Decoding
from codeexecutor.training.config import Curriculum, TrainArgs, load_ds_config
from codeexecutor.training.mining import mining_pool
from codeexecutor.training.run import lr_at

from .conftest import ROOT, texts


@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "curricula" / "*.yaml"))), ids=os.path.basename)
def test_curriculum_files_validate(path):
    cur = Curriculum.load(path)
    if os.path.basename(path) == "crash_finetune.yaml":  # one stage from the released checkpoint
        assert cur.model.init == "microsoft/codeexecutor" and cur.model.exception_step and len(cur.stages) == 1
        assert {s.path.split("/")[-1] for s in cur.stages[0].sources} == {"errors", "codenetmut"}
        return
    assert len(cur.stages) == 3
    assert [s.name for s in cur.stages] == ["singleline", "tutorial", "codenet"]
    assert any(src.hardest for src in cur.stages[1].sources)


@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "ds_configs" / "*.json"))), ids=os.path.basename)
@pytest.mark.parametrize("world", [1, 2, 16])
def test_ds_configs_batch_identity(path, world):
    train = TrainArgs(micro_batch_size=4, grad_accum=2)
    cfg = load_ds_config(path, train, world)
    assert cfg["train_batch_size"] == cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * world
    assert cfg["zero_optimization"]["stage"] in ((0,) if os.path.basename(path) == "single.json" else (1, 2, 3))
    assert not (cfg.get("bf16", {}).get("enabled") and cfg.get("fp16", {}).get("enabled"))
    assert cfg["zero_optimization"].get("overlap_comm", False) is False  # one node: no wait added to each backward


@pytest.mark.parametrize("name", ["zero1_bf16.json", "zero2_fp16.json", "zero3_bf16.json"])
def test_gradient_traffic_overlaps_the_backward_pass_where_several_nodes_share_it(monkeypatch, name):
    from codeexecutor.training.config import node_count

    for var in ("CROSS_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_SIZE", "SLURM_NNODES"):
        monkeypatch.delenv(var, raising=False)
    assert node_count(16) == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")  # torchrun, 16 processes of 8 a node
    assert node_count(16) == 2
    monkeypatch.setenv("CROSS_SIZE", "4")  # DeepSpeed's launcher names the nodes itself
    assert node_count(16) == 4
    path = str(ROOT / "ds_configs" / name)
    assert load_ds_config(path, TrainArgs(), 16, nodes=2)["zero_optimization"]["overlap_comm"] is True
    assert load_ds_config(path, TrainArgs(), 8, nodes=1)["zero_optimization"]["overlap_comm"] is False
    assert (
        load_ds_config(str(ROOT / "ds_configs" / "cpu.json"), TrainArgs(), 16, nodes=2)["zero_optimization"][
            "overlap_comm"
        ]
        is False
    )  # a config that names false keeps it


def test_wrong_batch_size_and_optimizer_block_are_explained(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1})
    )
    with pytest.raises(ConfigError, match="train_batch_size 10 != micro 4"):
        load_ds_config(str(bad), TrainArgs(), 2)
    bad.write_text(json.dumps({"optimizer": {"type": "Adam"}}))
    with pytest.raises(ConfigError, match="fused_adam"):
        load_ds_config(str(bad), TrainArgs(), 1)


def test_autocast_and_a_half_precision_deepspeed_section_are_refused_together(tmp_path):
    cfg = tmp_path / "bf16.json"
    cfg.write_text(json.dumps({"bf16": {"enabled": True}}))
    with pytest.raises(ConfigError, match="enables bf16 and the curriculum asks for train.autocast bf16"):
        load_ds_config(str(cfg), TrainArgs(autocast="bf16"), 1)
    assert load_ds_config(str(cfg), TrainArgs(), 1)["bf16"]["enabled"]
    assert load_ds_config(str(ROOT / "ds_configs" / "cpu.json"), TrainArgs(autocast="bf16"), 1)["train_batch_size"] == 8


def test_autocast_runs_the_forward_in_bf16_and_keeps_float32_weights_and_gradients():
    import torch

    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.rows import RowSpec
    from codeexecutor.training.setup import autocast
    from codeexecutor.training.step import synthetic_row

    torch.manual_seed(0)
    model = CodeExecutorModel(CodeExecutorConfig.preset("tiny", vocab_size=64))
    row = synthetic_row(RowSpec(256, 256, fixed=True), model, 64)
    seen = []
    hook = model.roberta.encoder.layer[0].attention.self.query.register_forward_hook(
        lambda m, i, o: seen.append(o.dtype)
    )
    dtypes = {}
    for kind in ("bf16", None):
        with autocast(kind, torch.device("cpu")):
            out = model(row=row)
        out.loss.backward()
        dtypes[kind] = (seen.pop(), out.loss.dtype, {p.grad.dtype for p in model.parameters() if p.grad is not None})
        model.zero_grad()
    hook.remove()
    assert dtypes["bf16"] == (torch.bfloat16, torch.float32, {torch.float32})  # the loss is taken in float32
    assert dtypes[None] == (torch.float32, torch.float32, {torch.float32})
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_curriculum_errors_are_collected():
    with pytest.raises(ConfigError) as err:
        Curriculum.from_dict(
            {
                "model": {"preset": "huge", "colour": 1, "positions": "alibi"},
                "train": {"autocast": "fp16"},
                "stages": [
                    {"name": "a", "steps": 0, "sources": [{"path": "x", "task": "nope", "hardest": 5, "mine_from": 4}]}
                ],
            }
        )
    text = str(err.value)
    for fragment in (
        "colour",
        "preset",
        "mini-wide",
        "steps must be >= 1",
        "task must be one of",
        "hardest needs a previous stage",
        "mine_from needs hardest and must be >= it",
        "train.autocast must be bf16",
        "model.positions must be one of absolute, rotary",
    ):
        assert fragment in text


def test_hardest_takes_the_highest_losses_ties_to_the_lower_index():
    from codeexecutor.training.mining import hardest

    loss = torch.tensor([0.5, 2.0, 2.0, 0.1, 3.0, 2.0])
    index = torch.tensor([40, 7, 3, 9, 12, 1])
    top_loss, top_index = hardest(loss, index, 3)
    assert top_loss.tolist() == [3.0, 2.0, 2.0] and top_index.tolist() == [12, 1, 3]
    perm = torch.randperm(6)
    assert hardest(loss[perm], index[perm], 3)[1].tolist() == [12, 1, 3]  # whatever order they were scored in


def test_the_mining_pool_is_a_fixed_sample_of_the_asked_size():
    pool = mining_pool(1000, 64, seed=0)
    assert len(pool) == 64 and all(0 <= i < 1000 for i in pool)
    assert pool == mining_pool(1000, 64, seed=0) and pool != mining_pool(1000, 64, seed=1)
    assert mining_pool(1000, None, 0) is None and mining_pool(50, 64, 0) is None  # all of them are scored


def test_lr_schedule_warms_up_and_decays_per_stage():
    from codeexecutor.training.config import Source, Stage

    st = [
        Stage("a", [Source("p", "singleline")], steps=10, lr=1.0, warmup=2),
        Stage("b", [Source("p", "tutorial")], steps=10, lr=0.5, warmup=0),
    ]
    assert lr_at(st, 0) == 0.5 and lr_at(st, 1) == 1.0
    assert lr_at(st, 9) < lr_at(st, 5) < 1.0
    assert lr_at(st, 10) == 0.5 and lr_at(st, 20) == 0.0


def _curriculum(tmp_path, data, steps, autocast=None, **train):
    cur = {
        "model": {"preset": "tiny", "vocab_size": 600, "max_code_length": 128, "max_trace_length": 256},
        "train": {
            "output_dir": str(tmp_path / "run"),
            "micro_batch_size": 2,
            "grad_accum": 2,
            "save_every": 2,
            "log_every": 1,
            "max_tokens": 1024,
            "eval_every": 3,
            "eval_examples": 4,
            "eval_decode_examples": 2,
            **({"autocast": autocast} if autocast else {}),
            **train,
        },
        "stages": [
            {
                "name": "singleline",
                "steps": steps,
                "lr": 1e-3,
                "warmup": 1,
                "sources": [{"path": str(data / "singleline" / "singleline"), "task": "singleline"}],
            },
            {
                "name": "tutorial",
                "steps": steps,
                "lr": 1e-3,
                "warmup": 1,
                "sources": [
                    {
                        "path": str(data / "singleline" / "singleline"),
                        "task": "singleline",
                        "hardest": 8,
                        "mine_from": 16,
                    },
                    {"path": str(data / "tutorial" / "tutorial"), "task": "tutorial"},
                ],
            },
            {
                "name": "codenet",
                "steps": steps,
                "lr": 1e-3,
                "warmup": 1,
                "sources": [
                    {"path": str(data / "codenetmut" / "codenetmut"), "task": "codenet"},
                    {"path": str(data / "codenetmut" / "errors"), "task": "codenet"},
                ],
            },
        ],
    }
    import yaml

    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(cur))
    return path


@pytest.mark.integration
@pytest.mark.timeout(
    800
)  # two launches of two compiling processes; past 300 s on a 2-core AVX2 CPU beside another worker
def test_two_process_zero2_over_gloo_with_resume(tmp_path, demo_data):
    """A real DeepSpeed ZeRO-2 run with 2 processes (torchrun, gloo), killed by --max-steps and resumed;
    its forward passes (training and mining) under bf16 autocast, its row step compiled whole."""
    cur = _curriculum(tmp_path, demo_data, steps=2, autocast="bf16", compile=True)
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        "29517",
        "-m",
        "codeexecutor.training",
        "--curriculum",
        str(cur),
        "--ds-config",
        str(ROOT / "ds_configs" / "cpu.json"),
    ]
    first = subprocess.run(cmd + ["--max-steps", "3"], env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    run = tmp_path / "run"
    assert (run / "stage1-singleline" / "config.json").exists() and not (run / "final").exists()
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "resuming from" in second.stdout and "at step 3" in second.stdout
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3, 4, 5, 6]  # every step once, across the kill
    evals = [r for r in log if "eval" in r]
    assert [r["step"] for r in evals] == [2, 3, 4, 6]  # eval_every 3 and each stage end
    assert all(0 <= e["trace_accuracy"] <= 100 and e["loss"] > 0 for r in evals for e in r["eval"].values())
    assert (run / "stage1-singleline-best" / "best.json").exists() and (run / "data_stats.json").exists()
    assert all(0 <= r["padding_share"] < 1 and r["loss"] > 0 for r in log if "loss" in r)
    written = json.loads((run / "curriculum.json").read_text())
    assert written["train"]["autocast"] == "bf16"
    assert written["setup"]["engine"] == "deepspeed" and written["setup"]["compiled"] and written["setup"]["fullgraph"]
    mined = json.loads((run / "stage2-tutorial-hardest-0.json").read_text())
    train_rows = len(datasets.load_from_disk(str(demo_data / "singleline" / "singleline"))["train"])
    assert len(mined) == 8 and set(mined) <= mining_pool(train_rows, 16, 0)  # the hardest of the 16 scored
    assert (run / "loss.png").exists() and (run / "final" / "model.safetensors").exists()
    assert sorted(d.name for d in (run / "checkpoints").iterdir() if d.name.startswith("step")) == ["step4", "step6"]
    from codeexecutor.generation import TraceGenerator

    gen = TraceGenerator(str(run / "final"))
    assert (gen.profile.name, gen.profile.exception_step, gen.profile.state) == (
        "exact",
        True,
        "full",
    )  # the curriculum's
    assert len(gen.tok) == gen.model.config.vocab_size and "<exception>" in gen.tok.get_vocab()
    out = gen.generate(["<codenet> <0> x = 1"], Decoding(beam=2, max_length=8, names=False, values=False))[0]
    assert out.tokens <= 8 and (out.finished or out.tokens == 8)  # ended at </s>, or cut at the cap it was given
    assert gen.encoder.ids(out.text) == gen.encoder.ids(
        gen.encoder.decode(gen.encoder.ids(out.text))
    )  # text round-trips


@pytest.mark.integration
@pytest.mark.timeout(
    800
)  # two launches of two compiling processes; past 300 s on a 2-core AVX2 CPU beside another worker
def test_two_process_zero3_over_gloo_steps_the_compiled_rows_and_resumes(tmp_path, demo_data):
    """ZeRO-3 (parameters partitioned across the 2 processes) around the compiled row step,
    its graph broken between modules where DeepSpeed gathers their parameters (the run's
    log says so), stopped and resumed; the gathered export generates."""
    import yaml

    cur = {
        "model": {"preset": "tiny", "vocab_size": 600, "max_code_length": 128, "max_trace_length": 256, "dropout": 0.0},
        "train": {
            "output_dir": str(tmp_path / "run"),
            "micro_batch_size": 2,
            "save_every": 2,
            "log_every": 1,
            "max_tokens": 1024,
            "eval_examples": 0,
            "compile": True,
        },
        "stages": [
            {
                "name": "codenet",
                "steps": 4,
                "lr": 1e-3,
                "warmup": 1,
                "sources": [{"path": str(demo_data / "codenetmut" / "codenetmut"), "task": "codenet"}],
            }
        ],
    }
    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(cur))
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        "29519",
        "-m",
        "codeexecutor.training",
        "--curriculum",
        str(path),
        "--ds-config",
        str(ROOT / "ds_configs" / "cpu_zero3.json"),
    ]
    for extra in (["--max-steps", "2"], []):
        done = subprocess.run(cmd + extra, env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "run"
    assert "resuming from" in done.stdout and "at step 2" in done.stdout
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3, 4] and all(r["loss"] > 0 for r in log if "loss" in r)
    setup = json.loads((run / "curriculum.json").read_text())["setup"]
    assert setup["compiled"] and not setup["fullgraph"] and any("ZeRO-3" in f for f in setup["fallbacks"])
    from codeexecutor.generation import TraceGenerator

    out = TraceGenerator(str(run / "final")).generate(
        ["<codenet> <0> x = 1"], Decoding(beam=1, max_length=8, names=False, values=False)
    )[0]
    assert 0 < out.tokens <= 8


def test_crash_finetune_from_a_released_layout_checkpoint(tmp_path, demo_data):
    """The released checkpoint as `init`: <exception> joins its vocabulary with a new row,
    the profile stays official, training reads the structured steps in that profile; one
    process without ZeRO (ds_configs/single.json)."""
    import yaml
    from safetensors.torch import load_file

    from .release_layout import write_release_checkpoint

    released = write_release_checkpoint(tmp_path / "released")
    base = len(json.loads((released / "vocab.json").read_text()))
    cur = {
        "model": {"init": str(released), "exception_step": True, "max_code_length": 128, "max_trace_length": 256},
        "train": {
            "output_dir": str(tmp_path / "run"),
            "micro_batch_size": 2,
            "grad_accum": 1,
            "save_every": 10,
            "log_every": 1,
        },
        "stages": [
            {
                "name": "crashes",
                "steps": 2,
                "lr": 1e-4,
                "warmup": 1,
                "sources": [
                    {"path": str(demo_data / "codenetmut" / "errors"), "task": "codenet"},
                    {"path": str(demo_data / "codenetmut" / "codenetmut"), "task": "codenet"},
                ],
            }
        ],
    }
    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(cur))
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor.training",
            "--curriculum",
            str(path),
            "--ds-config",
            str(ROOT / "ds_configs" / "single.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    final = tmp_path / "run" / "final"
    config = json.loads((final / "config.json").read_text())
    assert (config["format_profile"], config["exception_step"], config["vocab_size"]) == ("official", True, base + 212)
    weights = load_file(str(final / "model.safetensors"))
    original = load_file(str(released / "model.safetensors"))
    assert weights["roberta.embeddings.word_embeddings.weight"].shape[0] == base + 212
    assert "dense.weight" not in weights and "roberta.encoder.layer.0.attention.self.query.weight" in weights
    assert (
        original["encoder.layer.0.attention.self.query.weight"].shape
        == weights["roberta.encoder.layer.0.attention.self.query.weight"].shape
    )
    from codeexecutor.generation import TraceGenerator

    gen = TraceGenerator(str(final), device="cpu")
    assert gen.tok.convert_tokens_to_ids("<exception>") == base + 211
    assert gen.profile.label == "official+exception"
    assert gen.code_input("x = [1, 'a']\n") == "<codenet> <0> x = [ 1 , 'a' ]"


def test_targets_keep_their_label_when_cut():
    from codeexecutor.modeling.profiles import Profile
    from codeexecutor.modeling.tokenizer import Encoder, train_tokenizer

    steps = " ".join(f"<line> <{i}> <state> x : {i} </state>" for i in range(40))
    tok = train_tokenizer([steps, "<exception> <3> KeyError", "<output> 12"] * 5, vocab_size=400, min_frequency=1)
    enc = Encoder(tok, 64, 64, Profile("exact"))
    ids, fit = enc.fit_trace("<line> <0> <state> x : 1 </state>")
    assert fit == "whole" and ids[0] == enc.mask0 and ids[-1] == enc.eos
    ids, fit = enc.fit_trace(steps)
    assert fit == "cut_at_step" and len(ids) <= 64
    text = enc.decode(ids[1:])
    assert text.endswith("</state>") and text.count("<line>") == text.count("</state>")  # whole steps only
    assert enc.fit_trace(steps + " <exception> <3> KeyError") == (None, "dropped_crash")
    assert enc.fit_trace(
        "<line> <0> <state> " + " <dictsep> ".join(f"v{i} : {i}" for i in range(60)) + " </state>"
    ) == (None, "dropped_long_step")


def test_token_budget_rows_hold_the_samplers_examples_in_one_shape(demo_data):
    """A micro-step is one row of exactly max_tokens tokens holding, back to back, the
    examples the sampler picks (the same picks as before rows: the sampler is unchanged,
    pinned below), the Arrow path placing each one's code and trace ids; under the GPU's
    fixed layout every row of a stage has the same shapes."""
    import datasets
    import numpy as np

    from codeexecutor.modeling.rows import RowSpec
    from codeexecutor.modeling.tokenizer import Encoder, train_tokenizer
    from codeexecutor.training.config import Source, Stage
    from codeexecutor.training.data import StageData, padding_share

    stage = Stage(
        "s",
        [
            Source(str(demo_data / "singleline" / "singleline"), "singleline"),
            Source(str(demo_data / "tutorial" / "tutorial"), "tutorial"),
        ],
        steps=10,
    )
    rows = list(datasets.load_from_disk(str(demo_data / "tutorial" / "tutorial"))["train"])
    tok = train_tokenizer([t for r in rows for t in texts(r)], vocab_size=600, min_frequency=1)
    enc = Encoder(tok, 256, 512)
    budget = StageData(stage, enc, ".", max_tokens=2048)
    fixed = StageData(stage, enc, ".")
    gpu = StageData(stage, enc, ".", max_tokens=2048, rows=RowSpec(2048, 768, "flex", 128, fixed=True))
    shares, fixed_shares, shapes = [], [], set()
    for step in range(30):
        a, b = budget.indices(0, step, 0, 0, 8), budget.indices(0, step, 0, 0, 8)
        assert a == b  # the batch of a step depends on nothing else
        batch = budget.batch(0, step, 0, 0, 8)
        row = batch["row"]
        j, idx = a
        picked = budget.tables[j][idx]
        want = [list(c) + list(t) for c, t in zip(picked["code_ids"], picked["trace_ids"])]
        doc = row["doc"].numpy()
        assert [row["ids"].numpy()[doc == d].tolist() for d in range(len(idx))] == want
        assert batch["tokens"] == sum(map(len, want)) and batch["examples"] == len(idx)
        shares.append(padding_share(batch))
        fixed_shares.append(padding_share(fixed.batch(0, step, 0, 0, 8)))
        shapes.add(
            tuple(
                (k, tuple(v.shape))
                for k, v in sorted(gpu.batch(0, step, 0, 0, 8)["row"].items())
                if hasattr(v, "shape")
            )
        )
    assert sum(shares) / len(shares) < 0.25 < sum(fixed_shares) / len(fixed_shares)  # demo-size data: sparse lengths
    assert len(shapes) == 1  # one shape for the whole stage: nothing to recompile
    assert set(budget.fits) == {s.path for s in stage.sources} and all(f["whole"] > 0 for f in budget.fits.values())
    # the sampler's picks for fixed lengths and seed, as the loop made them before rows (commit 67272cb)
    lengths = np.random.default_rng(7)
    code, trace = lengths.integers(5, 256, 500), lengths.integers(3, 768, 500)
    picks = StageData.from_lengths("s", code, trace, 4096, "example")
    assert [picks.indices(0, s, 0, 0, 8)[1] for s in range(3)] == [
        [494, 340, 332, 309, 396, 217, 330, 157, 29, 44, 22, 192, 295, 368, 499, 441],
        [86, 496, 393, 101, 449, 352],
        [348, 195, 172, 147, 283],
    ]
    picks = StageData.from_lengths("s", code, trace, 4096, "token")
    assert [picks.indices(0, s, 0, 0, 8)[1] for s in range(2)] == [
        [473, 120, 336, 168, 176, 448, 1, 421, 67],
        [261, 117, 422, 88, 198, 400, 305, 386, 103, 49, 73, 306, 419],
    ]


def test_a_token_budget_must_be_whole_tiles_that_hold_the_longest_example():
    ok = {
        "train": {"max_tokens": 1024},
        "stages": [{"name": "s", "steps": 1, "sources": [{"path": "x", "task": "singleline"}]}],
    }
    assert not Curriculum.from_dict(ok).validate()
    with pytest.raises(
        ConfigError,
        match=r"a multiple of 128 that holds the longest example .*1024\), got 1000: set it "
        r"to 1024",
    ):
        Curriculum.from_dict({**ok, "train": {"max_tokens": 1000}})
    with pytest.raises(ConfigError, match="got 512: set it to 1024"):
        Curriculum.from_dict({**ok, "train": {"max_tokens": 512}})
    with pytest.raises(ConfigError, match="train.engine must be one of auto, torch, deepspeed"):
        Curriculum.from_dict({**ok, "train": {"max_tokens": 1024, "engine": "jax"}})
    with pytest.raises(ConfigError, match="train.compile must be true, false or auto"):
        Curriculum.from_dict({**ok, "train": {"max_tokens": 1024, "compile": "always"}})
    with pytest.raises(ConfigError, match=r"model.dropout must be in \[0, 1\)"):
        Curriculum.from_dict({**ok, "model": {"dropout": 1.0}})
    with pytest.raises(ConfigError, match="flex takes no attention dropout: set model.dropout: 0"):
        Curriculum.from_dict({**ok, "model": {"attention": "flex"}})  # the default dropout, 0.1
    assert not Curriculum.from_dict({**ok, "model": {"attention": "flex", "dropout": 0.0}}).validate()


def test_split_digits_tokenizer_gives_one_token_per_digit_and_round_trips(tmp_path):
    from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer, train_tokenizer

    texts = ["<line> <1> <state> candidate : 4118780 <dictsep> mod : 2019 </state>", "x = 2019 * 2020 + 12.5"] * 50
    target = "<line> <1> <state> candidate : 4118780 <dictsep> mod : 2019 </state>"
    merged = train_tokenizer(texts, vocab_size=400, min_frequency=1)
    split = train_tokenizer(texts, vocab_size=400, min_frequency=1, split_digits=True)
    assert "Ġ2019" in merged.convert_ids_to_tokens(merged.encode(target, add_special_tokens=False))
    pieces = split.convert_ids_to_tokens(split.encode(target, add_special_tokens=False))
    assert all(len(p.strip("Ġ")) <= 1 for p in pieces if any(c.isdigit() for c in p) and not p.startswith("<"))
    assert pieces.count("7") == 1 and pieces.count("1") == 3  # 4118780 and 2019, digit by digit
    enc = Encoder(split)
    assert enc.decode(enc.ids(target)) == target
    split.save_pretrained(tmp_path)
    assert load_tokenizer(str(tmp_path)).encode(target, add_special_tokens=False) == split.encode(
        target, add_special_tokens=False
    )
    cur = Curriculum.from_dict(
        {
            "model": {"split_digits": True},
            "stages": [{"name": "s", "steps": 1, "sources": [{"path": "x", "task": "singleline"}]}],
        }
    )
    assert cur.model.split_digits is True


def test_token_anchors_train_long_and_short_examples_about_equally_often():
    """With anchors drawn per example, a budget holds many short examples and they are
    trained on several times as often as long ones; drawn per token, about as often."""
    import numpy as np

    from codeexecutor.training.data import StageData

    rng = np.random.default_rng(0)
    code = rng.integers(20, 120, 5000)
    trace = rng.lognormal(4.0, 0.9, 5000).astype(int).clip(8, 700)  # a long tail, as real traces
    total = code + trace
    short, long = total <= np.quantile(total, 0.25), total >= np.quantile(total, 0.75)
    ratios = {}
    for anchor in ("example", "token"):
        data = StageData.from_lengths("s", code, trace, max_tokens=2048, anchor=anchor)
        seen = np.zeros(len(total))
        for step in range(4000):
            _, idx = data.indices(0, step, 0, 0, 8)
            assert len(idx) * max(total[idx]) <= 2048 or len(idx) == 1
            np.add.at(seen, idx, 1)
        ratios[anchor] = seen[short].mean() / seen[long].mean()
    assert ratios["example"] > 2.0 and 0.6 < ratios["token"] < 1.6, ratios


def test_a_profiled_window_of_steps_is_refused_unless_it_reads_first_colon_last(tmp_path):
    from codeexecutor.training.profiling import StepProfiler

    for bad in ("30", "35:30", "a:b"):
        with pytest.raises(ConfigError, match="FIRST:LAST"):
            StepProfiler(bad, str(tmp_path), 0)
    quiet = StepProfiler("1:2", str(tmp_path), 1)  # another rank than 0 profiles nothing
    quiet.after(1), quiet.after(2)
    assert not (tmp_path / "profile.json").exists()


@pytest.mark.integration
def test_one_process_trains_and_resumes_without_deepspeed_installed(tmp_path, demo_data):
    """A GPU lease may carry no DeepSpeed wheel: one process on the torch engine starts its
    process group with torch alone, trains, checkpoints, resumes and exports; a config
    that needs DeepSpeed's engine (fp16) is refused in one line."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['deepspeed'] = None  # as if not installed\n")
    cur = _curriculum(tmp_path, demo_data, 2, eval_examples=0, eval_decode_examples=0)
    env = {**os.environ, "PYTHONPATH": f"{hide}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "2"}
    cmd = [
        sys.executable,
        "-m",
        "codeexecutor.training",
        "--curriculum",
        str(cur),
        "--ds-config",
        str(ROOT / "ds_configs" / "single.json"),
    ]
    first = subprocess.run(cmd + ["--max-steps", "3"], env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert first.returncode == 0, first.stderr[-3000:]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming" in done.stdout + done.stderr and (tmp_path / "run" / "final" / "config.json").exists()
    assert json.load(open(tmp_path / "run" / "curriculum.json"))["setup"]["engine"] == "torch"
    fp16 = tmp_path / "fp16.json"
    fp16.write_text(json.dumps({"fp16": {"enabled": True}}))
    refused = subprocess.run(cmd[:-1] + [str(fp16)], env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and "DeepSpeed is not installed" in lines[-1] and "Traceback" not in refused.stderr


def test_mining_in_a_budget_scores_what_its_time_reaches_and_keeps_the_hardest_of_those(tmp_path):
    """`mine_hardest(seconds=...)` stops scoring once its time has passed (read every
    CHECK_EVERY batches) and keeps the same share of the examples it scored (drawn at random
    from the pool, not its shortest: the pool is in length order) that k is of the pool,
    the hardest of them; without a limit it scores all.
    Here an example's loss and length are its id; and the budget gives mining a quarter of
    what is left of the stage's slot."""
    import time
    from types import SimpleNamespace

    import datasets
    import numpy as np
    import torch.distributed as dist

    from codeexecutor.training.budget import MINING_SHARE, Budget
    from codeexecutor.training.config import Source, Stage
    from codeexecutor.training.mining import CHECK_EVERY, Mining, mine_hardest

    class Engine:
        device = torch.device("cpu")

        def eval(self):
            pass

        def train(self):
            pass

        scored: list = []

        def __call__(self, code_ids, reduction):
            self.scored += code_ids[:, 0].tolist()
            return SimpleNamespace(loss=code_ids[:, 0].float())

    n, batch = 400, 10
    table = datasets.Dataset.from_dict({"code_ids": [[i] for i in range(n)], "trace_ids": [[1]] * n})
    encoder = SimpleNamespace(collate=lambda rows: {"code_ids": torch.tensor([r["code_ids"] for r in rows])})
    lengths = np.arange(n)
    data = SimpleNamespace(
        tables=[table],
        order=[np.arange(n)],
        stage=SimpleNamespace(name="s"),
        encoder=encoder,
        code_len=[lengths],
        trace_len=[np.zeros(n, dtype=int)],
    )
    started = not dist.is_initialized()
    if started:
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'group'}", rank=0, world_size=1)
    try:
        assert sorted(mine_hardest(Engine(), data, 0, Mining(5, batch), rank=0, world=1)) == [395, 396, 397, 398, 399]
        engine = Engine()
        engine.scored = []
        got = mine_hardest(engine, data, 0, Mining(5, batch, seconds=0.0), rank=0, world=1)
        assert len(engine.scored) == CHECK_EVERY * batch  # the clock is first read after CHECK_EVERY batches
        assert len(got) == round(5 * CHECK_EVERY * batch / n)  # the share of those scored that 5 of 400 is
        assert sorted(got) == sorted(engine.scored)[-len(got) :]  # the hardest of those scored
        assert max(engine.scored) > 2 * CHECK_EVERY * batch  # a random draw, not the shortest examples
    finally:
        if started:
            dist.destroy_process_group()
    stages = [Stage(name, [Source("x", "codenet")], 100, share=s) for name, s in (("a", 0.5), ("b", 0.2), ("c", 0.3))]
    budget = Budget(10, stages, str(tmp_path))  # 600 s: b's slot is [300, 420]
    budget.spent, budget.started = 330.0, time.perf_counter()
    assert budget.mining_seconds(1) == pytest.approx((420 - 330) * MINING_SHARE, abs=0.5)
