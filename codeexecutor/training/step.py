"""How a run steps: the packed-row layout, the attention path and the compiled forward,
each chosen once at setup and written to the run's log with any fallback taken.

* Attention: `model.attention: flex` runs FlexAttention on a CUDA device; on a machine
  without one the run attends through the tile path and says so (FlexAttention has no
  backward pass on the CPU). `sdpa` is the tile path everywhere.
* Compile: `train.compile: auto` compiles on CUDA and steps eagerly on the CPU, where
  a compiled step needs fixed shapes that cost the tile path its narrowing (every key
  tile a row might need, every position projected) and the CPU's eager step is the
  faster (benchmarks/bench_step.py). `true` compiles anywhere. A compile that fails
  (an old torch, no compiler, a kernel the device cannot build) falls back with the
  error's first line in the log: a FlexAttention step to the tile path compiled, then
  to the tile path eagerly (`compile_with_fallbacks`). Eager FlexAttention is never the
  fallback: without its compiled kernel it materialises a row's whole score matrix
  (tens of GB at 48 k tokens a row).
* The compiled forward is probed once on a synthetic row before training, so that
  its compile time is measured apart from the steps and a failure is found before the
  data starts.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("codeexecutor.train")


def attention_path(requested: str, device) -> tuple[str, str | None]:
    """(row attention "flex" or "tiles", the fallback taken or None) on `device`
    (training/precision.py decides)."""
    from codeexecutor.training.precision import attention_for, capability

    return attention_for(requested, capability(device))


def wants_compile(setting, device) -> bool:
    import torch

    return torch.device(device).type == "cuda" if setting == "auto" else bool(setting)


def row_spec(cur, attention: str, compiled: bool):
    """The run's RowSpec (modeling/rows.py) from its curriculum and choices."""
    from codeexecutor.modeling.rows import BLOCK, CPU_TILE, RowSpec

    longest = cur.model.max_code_length + cur.model.max_trace_length
    return RowSpec(cur.train.max_tokens, longest, attention, BLOCK if attention == "flex" else CPU_TILE, fixed=compiled)


def synthetic_row(spec, model, max_code: int) -> dict:
    """A row of the spec's shape (random ids, one example per max-length slot), for the
    compile probe and the benchmarks; its loss is real but means nothing."""
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    V = model.config.vocab_size
    codes, traces, left = [], [], spec.length
    while left >= 8:
        code = min(max_code, max(2, left // 4))
        trace = min(spec.max_example - code, left - code)
        codes.append(rng.integers(5, V, code))
        traces.append(rng.integers(5, V, trace))
        left -= code + trace
    row = spec.row(codes, traces, model.config.pad_token_id, model.loss_table(), max_code)
    return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in row.items()}


def to_device(row: dict, device, non_blocking: bool = False) -> dict:
    return {k: v.to(device, non_blocking=non_blocking) if hasattr(v, "to") else v for k, v in row.items()}


def compile_and_probe(model, spec, cur, device, precision: str | None, fullgraph: bool = True) -> dict:
    """Compile the model's row forward and run it forward and backward once on a
    synthetic row (gradients cleared after). Returns what the log records: whether it
    compiled, the seconds the first step took, and the fallback taken if compiling
    failed (the model then steps eagerly)."""
    import torch

    from codeexecutor.training.setup import autocast

    model.compile_rows(fullgraph)
    row = to_device(synthetic_row(spec, model, cur.model.max_code_length), device)
    was_training = model.training
    model.train()
    t0 = time.perf_counter()
    try:
        with autocast(precision, device):
            loss = model(row=row).loss
        loss.backward()
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - any compiler failure: named in the log, the run goes on eagerly
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        del model._row_loss
        model.zero_grad(set_to_none=True)
        model.train(was_training)
        torch._dynamo.reset()  # nothing of the failed graph is reused by a next try
        if torch.device(device).type == "cuda":
            torch.cuda.empty_cache()  # a probe that ran out of memory leaves the next try its room
        return {
            "compiled": False,
            "fallback": f"compile failed ({type(exc).__name__}: {first}); this run steps eagerly",
        }
    seconds = time.perf_counter() - t0
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return {"compiled": True, "compile_seconds": round(seconds, 2), "fullgraph": fullgraph}


def compile_with_fallbacks(model, cur, attention: str, device, precision: str | None) -> tuple[str, dict]:
    """The row step compiled and probed with `attention`; where that fails with "flex",
    with the tile path; where every compile fails, the tile path eagerly. Returns (the
    attention the run steps with, what the log records: `compiled`, its seconds, and
    the `fallbacks` taken, each naming the error)."""
    fallbacks = []
    for tried in dict.fromkeys((attention, "tiles")):
        probe = compile_and_probe(model, row_spec(cur, tried, True), cur, device, precision)
        if probe["compiled"]:
            return tried, {**probe, "fallbacks": fallbacks}
        why = probe["fallback"].split("; this run")[0]
        fallbacks.append(
            f"the {tried} row step: {why}"
            + ("; trying the tile path" if tried != "tiles" else "; this run steps eagerly through the tile path")
        )
    return "tiles", {"compiled": False, "fallbacks": fallbacks}


ZERO3_NOTE = (
    "ZeRO-3 gathers each module's parameters in hooks: the row step is compiled with graph breaks between "
    "modules, unprobed (its parameters exist only once DeepSpeed has partitioned them)"
)
_LEVELS = ("eager tiles", "compiled tiles", "compiled flex")  # a row step's paths, safest first


def prepare_rows(
    model, cur, attention: str, device, precision: str | None, engine: str, zero_stage: int, half=None
) -> tuple[str, dict]:
    """The row step as the run takes it: compiled and probed on its device where it
    compiles (the torch engine, and DeepSpeed's ZeRO-1/2 in the dtype `half` DeepSpeed
    casts the weights to), with the named fallbacks of `compile_with_fallbacks`, every rank
    on the safest path any rank needed; ZeRO-3 compiled with graph breaks. Returns (the
    attention the run steps with, what the log records)."""
    if not wants_compile(cur.train.compile, device):
        return attention, {"compiled": False, "fallbacks": []}
    if engine == "deepspeed" and zero_stage == 3:
        model.compile_rows(fullgraph=False)
        return attention, {"compiled": True, "fullgraph": False, "fallbacks": [ZERO3_NOTE]}
    model.to(device)  # before the optimizer holds its parameters; DeepSpeed takes the model where it is
    if half is not None:
        model.to(half)
    attention, probe = compile_with_fallbacks(model, cur, attention, device, precision)
    return _agree(model, cur, attention, probe, device, precision)


def _agree(model, cur, attention: str, probe: dict, device, precision: str | None) -> tuple[str, dict]:
    """Every rank on the safest path any rank's probe left it on (a rank alone on another
    path would step another graph, or wait forever at a collective). Each round every
    rank joins one all-reduce of (lowest level, highest level); the ranks above the lowest
    step down to it (its compile may fail there too, and the next round goes lower), until
    the lowest and the highest meet."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return attention, probe
    on = torch.device(device) if torch.device(device).type == "cuda" else torch.device("cpu")
    for _ in range(len(_LEVELS) + 1):  # levels only go down: this many rounds reach agreement
        mine = _LEVELS.index(("compiled " if probe["compiled"] else "eager ") + attention)
        levels = torch.tensor([mine, -mine], device=on)
        dist.all_reduce(levels, op=dist.ReduceOp.MIN)
        lowest, highest = int(levels[0]), -int(levels[1])
        if lowest == highest:
            return attention, probe
        if mine > lowest:
            attention, probe = _step_down(model, cur, lowest, probe, device, precision)
    raise RuntimeError("the ranks' row paths did not agree")  # unreachable: each round lowers the highest


def _step_down(model, cur, level: int, probe: dict, device, precision: str | None) -> tuple[str, dict]:
    """This rank on `level` of `_LEVELS` (below its own), as another rank needs."""
    probe["fallbacks"].append(f"another rank steps {_LEVELS[level]}: this one does too")
    if level == 0:
        model.__dict__.pop("_row_loss", None)
        probe.update(compiled=False)
        return "tiles", probe
    again = compile_and_probe(model, row_spec(cur, "tiles", True), cur, device, precision)
    if not again["compiled"]:
        probe["fallbacks"].append(f"the tiles row step: {again['fallback'].split('; this run')[0]}")
    probe.update({k: v for k, v in again.items() if k != "fallback"})
    return "tiles", probe
