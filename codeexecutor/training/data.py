"""The data of a stage: its sources tokenized in the run's format profile, and
deterministic, resumable batch sampling (the batch of a step depends on nothing else)."""

from __future__ import annotations

import os
import random

from codeexecutor.errors import ConfigError
from codeexecutor.training.config import Stage
from codeexecutor.training.tokenized import is_tokenized, load_tokenized, tokenize

LENGTH_BUCKET = 8  # tokens: examples this close in length share a bucket, in shuffled order


def column(table, name: str):
    """One integer column of a dataset as a numpy array, read through Arrow (a subset's
    row selection kept): a plain `table[name]` went through the rows one by one, 2.4 s
    instead of 0.06 for 118 k rows, on every training start."""
    return table.select_columns([name]).with_format("numpy")[:][name]


class StageData:
    """Tokenized sources of one stage and deterministic, resumable batch sampling: the
    batch of (stage, step, micro, rank) depends on nothing else.

    With `max_tokens`, a micro-batch is a run of examples of similar length under that
    token budget, laid back to back in one row of exactly `max_tokens` tokens
    (modeling/rows.py, `rows`: how the run attends and whether its shapes are fixed):
    each source's examples are ordered by total length (in 8-token buckets, shuffled
    within each), and a batch grows from a random anchor in that order while
    `n x longest` fits (so its tokens always fit the row). `anchor` says how the anchor is drawn:
    "example", uniformly over examples, so a batch of short examples holds many and a
    short example is trained on about as many times more often as it is shorter;
    "token", with probability proportional to its length (a token drawn uniformly, its
    example the anchor), which makes every example about equally likely to be trained on
    whatever its length. Without `max_tokens`, `size` examples are drawn uniformly and
    code and trace are padded apart (the eager forward's batches). Either way one source per batch, drawn
    by the stage's weights.
    """

    def __init__(
        self,
        stage: Stage,
        encoder,
        base_dir: str,
        subsets: dict[int, list[int]] | None = None,
        max_tokens: int | None = None,
        anchor: str = "example",
        rows=None,
        weight_of=None,
    ) -> None:
        import datasets

        from codeexecutor.modeling.rows import CPU_TILE, RowSpec, loss_weights
        from codeexecutor.modeling.tokenizer import structural_ids

        self.stage = stage
        self.encoder = encoder
        self.max_tokens, self.anchor = max_tokens, anchor
        if max_tokens and rows is None:  # the CPU's eager rows
            rows = RowSpec(max_tokens, encoder.max_code + encoder.max_trace, "tiles", CPU_TILE, fixed=False)
        self.rows = rows
        if (
            weight_of is None and max_tokens
        ):  # the model's default weighting (`CodeExecutorModel.loss_table` gives a run's)
            weight_of = loss_weights(len(encoder.tok), 10.0, 1.0, structural_ids(encoder.tok))
        self.weight_of = weight_of
        self.tables, self.code_len, self.trace_len, self.order, self.sorted_total = [], [], [], [], []
        self.token_ends = []  # per source: cumulative lengths in that order, to draw an anchor by its tokens
        self.fits: dict[str, dict[str, int]] = {}
        for j, src in enumerate(stage.sources):
            path = os.path.join(base_dir, src.path)
            if is_tokenized(path):  # ids made once for this run's tokenizer and format (training/tokenized.py)
                table, fits = load_tokenized(path, encoder)
                if subsets and j in subsets:
                    table = table.select(subsets[j])
            else:
                ds = datasets.load_from_disk(path)
                ds = ds["train"] if isinstance(ds, datasets.DatasetDict) else ds
                if subsets and j in subsets:
                    ds = ds.select(subsets[j])
                if len(ds) == 0:
                    raise ConfigError(f"stage {stage.name}: source {src.path} has no training examples")
                if encoder.profile.order == "end":
                    from codeexecutor.modeling.profiles import lacks_depth

                    if lacks_depth(ds):
                        raise ConfigError(
                            f"stage {stage.name}: {src.path} was built before steps carried their call depth; "
                            "rebuild it to train with step_order: end"
                        )
                table, fits = tokenize(ds, encoder)
            if len(table) == 0:
                raise ConfigError(f"stage {stage.name}: no example of {src.path} fits max_trace_length ({fits})")
            self.fits[src.path] = fits
            self.tables.append(table)
            self._index(column(table, "code_len"), column(table, "trace_len"))
        total = sum(s.weight for s in stage.sources)
        self.weights = [s.weight / total for s in stage.sources]
        self.max_code = encoder.max_code
        if self.rows is not None and self.rows.fixed:
            # Fixed shapes per stage: the tile path gathers the key tiles this stage's longest
            # example can need, not the format's longest (SingleLine's are a tenth of it).
            import dataclasses

            self.max_code = int(max(c.max() for c in self.code_len))
            longest = int(max((c + t).max() for c, t in zip(self.code_len, self.trace_len)))
            self.rows = dataclasses.replace(self.rows, max_example=min(self.rows.max_example, longest))

    def _index(self, code, trace) -> None:
        import numpy as np

        self.code_len.append(code)
        self.trace_len.append(trace)
        # Total length in buckets of LENGTH_BUCKET tokens, shuffled within a bucket (fixed
        # seed): a run of the order then mixes programs instead of holding the many
        # same-length mutants of one program side by side.
        shuffle = np.random.default_rng(len(code)).permutation(len(code))
        self.order.append(np.lexsort((shuffle, (code + trace) // LENGTH_BUCKET)))
        self.sorted_total.append((code + trace)[self.order[-1]].tolist())  # lengths in that order, read per batch
        self.token_ends.append(np.cumsum((code + trace)[self.order[-1]], dtype=np.int64))

    @classmethod
    def from_lengths(cls, name: str, code_len, trace_len, max_tokens: int, anchor: str = "example") -> StageData:
        """A sampler over one source given only its examples' code and trace lengths (no
        ids, no `batch`): what `indices` draws, for measuring it."""
        import numpy as np

        from codeexecutor.training.config import Source, Stage

        self = cls.__new__(cls)
        self.stage, self.encoder, self.max_tokens, self.anchor = (
            Stage(name, [Source(name, name)], 1),
            None,
            max_tokens,
            anchor,
        )
        self.code_len, self.trace_len, self.order, self.sorted_total, self.token_ends, self.fits = (
            [],
            [],
            [],
            [],
            [],
            {},
        )
        self._index(np.asarray(code_len), np.asarray(trace_len))
        self.tables, self.weights, self.rows, self.weight_of = [], [1.0], None, None
        return self

    def indices(self, seed: int, step: int, micro: int, rank: int, size: int) -> tuple[int, list[int]]:
        """(source, example indices) of one micro-batch."""
        rng = random.Random(f"{seed}:{self.stage.name}:{step}:{micro}:{rank}")
        j = rng.choices(range(len(self.order)), weights=self.weights)[0]  # one source per batch
        n = len(self.order[j])
        if not self.max_tokens:
            return j, [rng.randrange(n) for _ in range(size)]
        order, total = self.order[j], self.sorted_total[j]  # no pass over the source: O(batch) per micro-batch
        if self.anchor == "token":  # the example holding a uniformly drawn token: O(log n)
            lo = hi = int(self.token_ends[j].searchsorted(rng.randrange(int(self.token_ends[j][-1])), side="right"))
        else:
            lo = hi = rng.randrange(n)
        hi += 1
        longest = total[lo]
        while True:  # forward while the budget holds, then backward
            if hi < n and (hi - lo + 1) * max(longest, total[hi]) <= self.max_tokens:
                longest = max(longest, total[hi])
                hi += 1
            elif lo > 0 and (hi - lo + 1) * max(longest, total[lo - 1]) <= self.max_tokens:
                longest = max(longest, total[lo - 1])
                lo -= 1
            else:
                break
        return j, order[lo:hi].tolist()

    def batch(self, seed: int, step: int, micro: int, rank: int, size: int) -> dict:
        j, idx = self.indices(seed, step, micro, rank, size)
        if self.max_tokens:
            return row_batch(
                self.tables[j], idx, self.rows, self.encoder.pad, self.weight_of, self.max_code, self.encoder.action_ids
            )
        rows = self.tables[j][idx]
        pairs = [{"code_ids": c, "trace_ids": t} for c, t in zip(rows["code_ids"], rows["trace_ids"])]
        return self.encoder.collate(pairs)


def row_batch(table, idx: list[int], spec, pad_id: int, weight_of, max_code: int, action=None) -> dict:
    """The micro-step row (modeling/rows.py) of rows `idx` of a tokenized table, its ids
    read as Arrow list columns and cut with numpy (no row becomes a Python list); tensors,
    and the ints a step reads as constants, under `row`; beside it the row's `tokens`
    that belong to an example and its `examples` (for the log, never for the step).
    `action`: the encoder's `action_ids` (a debugger action's loss starts at its landing)."""
    import numpy as np
    import torch

    rows = table.with_format("arrow")[idx]
    parts = []
    for name in ("code_ids", "trace_ids"):
        col = rows.column(name).combine_chunks()
        values = col.flatten().to_numpy(zero_copy_only=False)
        offsets = col.offsets.to_numpy(zero_copy_only=False) - col.offsets[0].as_py()
        parts.append(np.split(values, offsets[1:-1]))
    row = spec.row(parts[0], parts[1], pad_id, weight_of, max_code, action)
    tokens = sum(len(c) + len(t) for c, t in zip(*parts))
    return {
        "row": {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in row.items()},
        "tokens": tokens,
        "examples": len(idx),
    }


def batch_tokens(batch: dict) -> tuple[int, int]:
    """(real, computed) tokens of a collated batch: a micro-step row, or padded batches."""
    if "row" in batch:
        return batch["tokens"], batch["row"]["ids"].numel()
    return int(batch["code_mask"].sum() + batch["trace_mask"].sum()), batch["code_ids"].numel() + batch[
        "trace_ids"
    ].numel()


def padding_share(batch: dict) -> float:
    """Share of the computed (padded) tokens of a collated batch that are padding."""
    real, computed = batch_tokens(batch)
    return 1.0 - real / computed


def _nested(batch: dict, move) -> dict:
    """`move` applied to every tensor of a batch (a row's dict one level down; its ints kept)."""
    return {
        k: _nested(v, move) if isinstance(v, dict) else move(v) if hasattr(v, "to") else v for k, v in batch.items()
    }


class Prefetcher:
    """The micro-batches of steps [step, end) of a stage, each built on a worker thread
    while the one before it trains (collation is CPU work the accelerator would wait
    for), and moved to the device from pinned memory without blocking the host.
    `next()` gives (batch on the device, real tokens, computed tokens, rows). `steps`:
    the global steps to give, `start_of` the stage's first; `part`: this process's (rank,
    world size), whose share of each step's rows it takes."""

    def __init__(
        self, data: StageData, seed: int, start_of: int, steps: range, accum: int, part: tuple[int, int], device
    ) -> None:
        import concurrent.futures as cf

        import torch

        self.keys = iter([(s - start_of, m) for s in steps for m in range(accum)])
        self.data, self.seed, self.device = data, seed, device
        self.rank, self.size = part
        self.pin = torch.cuda.is_available() and torch.device(device).type == "cuda"
        self.pool = cf.ThreadPoolExecutor(1, thread_name_prefix="batches")
        self.pending = self._submit()

    def _build(self, key):
        batch = self.data.batch(self.seed, key[0], key[1], self.rank, self.size)
        real, padded = batch_tokens(batch)
        if "row" in batch:
            rows, batch = batch["examples"], {"row": batch["row"]}
        else:
            rows = len(batch["code_ids"])
        if self.pin:
            batch = _nested(batch, lambda v: v.pin_memory())
        return batch, real, padded, rows

    def _submit(self):
        key = next(self.keys, None)
        return None if key is None else self.pool.submit(self._build, key)

    def next(self):
        if self.pending is None:
            raise StopIteration("no micro-batch left in this stage")
        batch, real, padded, rows = self.pending.result()
        self.pending = self._submit()
        return _nested(batch, lambda v: v.to(self.device, non_blocking=self.pin)), real, padded, rows

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
