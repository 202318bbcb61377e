"""Counting what a step asks of the device, on any device: the CPU proxies of a GPU-bound step.

On a GPU the host waits whenever it needs a value the device computes: `.item()`,
`bool()` of a tensor, `.tolist()`, `.cpu()`, a `nonzero` or a boolean index (whose
result's size only the device knows), an explicit `synchronize`. On a CPU none of these
costs anything, so a step that waits a dozen times looks fine there and crawls on a GPU.
`DeviceCounter` counts them on whatever device runs the step, together with the
operators that do work on the device (each a kernel launch on a GPU; views and other
metadata-only operators are left out), so the CPU can say how a step will behave on a
GPU (benchmarks/bench_step.py, tests/test_rows.py).

It is a `TorchDispatchMode` on the calling thread (the data worker's thread is not
counted: its work is the host's by design), plus wrappers of the host reads that do not
pass through the dispatcher and of `torch.cuda.synchronize` and DeepSpeed's
accelerator `synchronize`.
"""

from __future__ import annotations

import collections

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten operators that make the host wait for the device: a value read back, or an
# output whose size depends on the data
WAITING_OPS = {
    "_local_scalar_dense",
    "nonzero",
    "masked_select",
    "unique",
    "_unique",
    "_unique2",
    "unique_dim",
    "unique_consecutive",
    "item",
    "is_nonzero",
}
HOST_READS = ("tolist", "cpu", "numpy")  # Tensor methods that copy to the host without an aten op the mode sees


def _metadata_only(func) -> bool:
    """An operator that only makes a view or changes metadata: every output aliases an
    input and none is written."""
    rets = func._schema.returns
    return bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write for r in rets)


class DeviceCounter(TorchDispatchMode):
    """`with DeviceCounter() as c: ...` -> c.ops (device-work operators), c.waits (host
    waits), c.by_op / c.wait_kinds (Counters by name)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_op: collections.Counter = collections.Counter()
        self.wait_kinds: collections.Counter = collections.Counter()
        self._patched: list = []

    @property
    def ops(self) -> int:
        return sum(self.by_op.values())

    @property
    def waits(self) -> int:
        return sum(self.wait_kinds.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name.split("::")[-1]
        if name in WAITING_OPS:
            self.wait_kinds[name] += 1
        elif name in ("index", "index_put", "index_put_", "_index_put_impl_") and _boolean_index(args):
            self.wait_kinds[f"{name} with a boolean index"] += 1
        elif (
            name == "repeat_interleave"
            and kwargs.get("output_size") is None
            and not isinstance(args[1] if len(args) > 1 else None, int)
        ):
            self.wait_kinds["repeat_interleave without output_size"] += 1
        if not _metadata_only(func):
            self.by_op[name] += 1
        return func(*args, **kwargs)

    def __enter__(self):
        self._patch()
        return super().__enter__()

    def __exit__(self, *exc):
        for owner, attr, original in self._patched:
            setattr(owner, attr, original)
        self._patched = []
        return super().__exit__(*exc)

    def _wrap(self, owner, attr: str, kind: str) -> None:
        original = getattr(owner, attr, None)
        if original is None:
            return
        counter = self

        def counted(*args, **kwargs):
            counter.wait_kinds[kind] += 1
            return original(*args, **kwargs)

        setattr(owner, attr, counted)
        self._patched.append((owner, attr, original))

    def _patch(self) -> None:
        for attr in HOST_READS:
            self._wrap(torch.Tensor, attr, f"Tensor.{attr}")
        self._wrap(torch.cuda, "synchronize", "synchronize")
        try:
            from deepspeed.accelerator import get_accelerator

            self._wrap(type(get_accelerator()), "synchronize", "synchronize")
        except Exception:  # noqa: BLE001 - DeepSpeed absent or unusable: nothing of it to count
            pass


def _boolean_index(args) -> bool:
    """Whether an index operator's indices hold a boolean tensor."""
    for a in args[1:]:
        items = a if isinstance(a, (list, tuple)) else [a]
        if any(isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in items):
            return True
    return False
