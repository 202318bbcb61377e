"""Fixed-shape packed rows: the layout of a training micro-step (docs/training-step.md).

A micro-step is one row of exactly T tokens (T the token budget, a multiple of `BLOCK`)
that holds the micro-batch's examples back to back, each its code then its trace, and
padding after the last. Every micro-step of a run has the same shape, so a compiled
step never recompiles and nothing about the batch has to be read back to the host.
Per token the row carries (all built here, on the host, by the data worker):

    ids        the token
    positions  its position in its example: code from 0, the trace straight after the code
    doc        the example it belongs to (0, 1, ...; each padding token one of its own after them)
    code       whether it is code: a key that every query of its example sees
    labels     the token it predicts: the next one of its example
    weights    that prediction's loss weight: the token's weight (structural, other,
               `<exception>`) from the trace's `<mask0>` to the token before `</s>`;
               0 on code, on padding and on each example's last token, whose next
               token belongs to another example; in a debugger action's trace
               (`<mask> next ...`, docs/debugger.md) also 0 up to the step it lands
               on: the real steps before it are given, not predicted

One rule says who attends to whom: a query sees a key of the same example that is code
or not after it. That is the prefix-LM mask of one example (code bidirectional, trace
causal, trace sees all code), repeated down the row's diagonal; a padding token sees
only itself. `kv_tiles` gives the rule's tile structure: for each tile of `block` queries,
the contiguous range of key tiles that holds any key it may see, and which of those
tiles it sees whole. FlexAttention's block mask is made from it on a GPU
(modeling/attention.py), and the CPU path gathers exactly those key tiles; no (T, T)
mask is built anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCK = 128  # FlexAttention's tile on a GPU: a row's length is a multiple of it
CPU_TILE = 64  # the CPU path's query tile: short examples waste less of a tile


@dataclass(frozen=True)
class Tiles:
    """The rule's tile structure for tiles of `block` tokens: query tile i may see key
    tiles lo[i] .. hi[i] (inclusive) and no other; `full[i, j - lo[i]]` says it sees
    every key of tile j (the rule need not be checked there)."""

    block: int
    lo: np.ndarray  # (nq,) int64
    hi: np.ndarray  # (nq,) int64
    full: np.ndarray  # (nq, span) bool

    @property
    def span(self) -> int:
        """The most key tiles any query tile sees."""
        return int((self.hi - self.lo).max()) + 1


@dataclass(frozen=True)
class RowSpec:
    """How a run lays out its micro-steps: rows of `length` tokens (a multiple of BLOCK)
    for examples of at most `max_example` tokens; `attention` "flex" (FlexAttention's
    block lists, tiles of BLOCK) or "tiles" (`tile_attention`, tiles of `tile`); `fixed`:
    every tensor of a row has the same shape in every micro-step (what a compiled step
    needs: the tile path gathers the most key tiles any row may need, and every
    position is projected), else the CPU's eager step narrows both to the row."""

    length: int
    max_example: int
    attention: str = "tiles"
    tile: int = CPU_TILE
    fixed: bool = False

    def __post_init__(self) -> None:
        if self.length % BLOCK:
            raise ValueError(f"a row of {self.length} tokens is not a multiple of {BLOCK}")
        if self.length < self.max_example:
            raise ValueError(f"a row of {self.length} tokens cannot hold an example of {self.max_example}")
        if self.attention not in ("flex", "tiles"):
            raise ValueError(f"unknown row attention {self.attention!r}")

    @property
    def block(self) -> int:
        return BLOCK if self.attention == "flex" else self.tile

    def max_span(self, max_code: int) -> int:
        """The most key tiles a query tile can see: back to the start of an example that
        began up to `max_example` tokens before it, on to the end of the code of one that
        begins inside it."""
        b = self.block
        return min(self.length // b, -(-(self.max_example - 1) // b) + -(-max_code // b) + 1)

    def row(
        self, codes: list, traces: list, pad_id: int, weight_of: np.ndarray, max_code: int, action: tuple | None = None
    ) -> dict:
        """One micro-step's row: numpy arrays, and the ints a step reads as constants
        (`action`: `pack_row`'s)."""
        row = pack_row(codes, traces, self.length, pad_id, weight_of, action)
        if not self.fixed:
            row = head_positions(row)
        tiles = kv_tiles(row["doc"], row["code"], self.block)
        del row["code_len"], row["total_len"]
        if self.attention == "flex":
            row.update(block_lists(tiles, self.length // BLOCK), block=BLOCK)
            return row
        span = self.max_span(max_code) if self.fixed else tiles.span
        if tiles.span > span:
            raise AssertionError(f"a row needs {tiles.span} key tiles, more than the {span} its shape holds")
        row.update(kv_lo=tiles.lo, kv_span=np.zeros(span, dtype=np.int8), tile=self.tile)
        return row


def loss_weights(
    vocab_size: int,
    other: float,
    structural: float,
    structural_ids,
    exception: float | None = None,
    exception_id: int | None = None,
) -> np.ndarray:
    """(vocab_size,) the loss weight of predicting each token (the release's weighting:
    structural tokens `structural`, all others `other`; `<exception>` its own if set)."""
    table = np.full(vocab_size, float(other), dtype=np.float32)
    table[list(structural_ids)] = float(structural)
    if exception is not None and exception_id is not None:
        table[exception_id] = float(exception)
    return table


def pack_row(
    codes: list, traces: list, length: int, pad_id: int, weight_of: np.ndarray, action: tuple | None = None
) -> dict[str, np.ndarray]:
    """One row of `length` tokens from examples' code ids and trace ids (each a sequence
    of ints or a numpy array; a trace starts with `<mask0>` and ends with `</s>`).
    `action`: (the action marker's id, the ids that start a step): a trace holding the
    marker bears no loss before the first step after it."""
    lc = np.fromiter((len(c) for c in codes), dtype=np.int64, count=len(codes))
    lt = np.fromiter((len(t) for t in traces), dtype=np.int64, count=len(traces))
    total = lc + lt
    used = int(total.sum())
    if used > length:
        raise ValueError(f"{len(codes)} examples of {used} tokens do not fit a row of {length}")
    n = len(codes)
    starts = np.concatenate([[0], np.cumsum(total)[:-1]]).astype(np.int64)
    ids = np.full(length, pad_id, dtype=np.int64)
    if n:
        ids[:used] = np.concatenate(
            [
                np.concatenate([np.asarray(c, dtype=np.int64), np.asarray(t, dtype=np.int64)])
                for c, t in zip(codes, traces)
            ]
        )
    doc = np.arange(length, dtype=np.int64) - used + n  # padding: a document of one token each
    doc[:used] = np.repeat(np.arange(n), total)
    within = np.arange(length) - np.concatenate([starts, np.arange(used, length)])[doc]  # position inside its example
    positions = within  # padding: 0
    code = np.zeros(length, dtype=bool)
    code[:used] = within[:used] < np.repeat(lc, total)
    labels = np.zeros(length, dtype=np.int64)
    labels[:-1] = ids[1:]
    # A position predicts a loss-bearing token from the trace's <mask0> (within == code
    # length) to the token before </s> (within == total - 2).
    trained = np.zeros(length, dtype=bool)
    trained[:used] = (within[:used] >= np.repeat(lc, total)) & (within[:used] <= np.repeat(total, total) - 2)
    if action is not None and (ids == action[0]).any():  # one pass over the row; a trace at a time where needed
        given_until(trained, traces, starts + lc, *action)
    weights = np.where(trained, weight_of[labels], 0.0).astype(np.float32)
    return {
        "ids": ids,
        "positions": positions,
        "doc": doc,
        "code": code,
        "labels": labels,
        "weights": weights,
        "code_len": lc,
        "total_len": total,
    }


def given_until(trained: np.ndarray, traces: list, trace_starts: np.ndarray, marker: int, step_starts) -> None:
    """Clears `trained` (in place) before the landing step of each trace that asks for a
    debugger action: the position predicting the landing's first token (the marker's last
    token) is the first that bears loss; a trace cut before its landing bears none."""
    for trace, at in zip(traces, trace_starts):
        trace = np.asarray(trace)
        hits = np.flatnonzero(trace == marker)
        if not len(hits):
            continue
        after = np.flatnonzero(np.isin(trace[hits[0] :], list(step_starts)))
        land = hits[0] + after[0] if len(after) else len(trace)
        trained[at : at + max(land - 1, 0)] = False


def head_positions(row: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The row with its loss narrowed to the positions that bear one: `head` (N,) their
    indices, `labels` and `weights` (N,) theirs. N changes from row to row, so this is
    for an eager step (the CPU's), where it spares the output projection the code and
    padding positions; a compiled step projects every position of its fixed shape."""
    head = np.flatnonzero(row["weights"])
    return {**row, "head": head, "labels": row["labels"][head], "weights": row["weights"][head]}


def kv_tiles(doc: np.ndarray, code: np.ndarray, block: int) -> Tiles:
    """The tile structure of one row's rule (see the module docstring), from its `doc`
    and `code` columns; the row's length is a multiple of `block`."""
    length = len(doc)
    if length % block:
        raise ValueError(f"a row of {length} tokens is not a whole number of {block}-token tiles")
    nt = length // block
    first = np.searchsorted(doc, np.arange(doc[-1] + 1), side="left")  # each example's (and the padding's) start
    ends = np.append(first[1:], length)
    code_end = first + np.bincount(doc, weights=code, minlength=len(first)).astype(np.int64)
    tile_start = np.arange(nt) * block
    head, tail = doc[tile_start], doc[tile_start + block - 1]  # the first and last example in each query tile
    lo = first[head] // block
    reach = np.maximum(code_end[tail], np.minimum(ends[tail], tile_start + block))  # one past the last key seen
    hi = (reach - 1) // block
    span = int((hi - lo).max()) + 1
    j = lo[:, None] + np.arange(span)[None]  # (nq, span) key tile of each slot
    one_doc = head == tail  # the tile holds one example only
    jj = np.minimum(j, nt - 1)
    all_code = np.add.reduceat(code.astype(np.int64), tile_start) == block  # (nt,) every key of the tile is code
    full = (
        (j <= hi[:, None])
        & one_doc[:, None]
        & one_doc[jj]
        & (head[jj] == head[:, None])
        & ((j < np.arange(nt)[:, None]) | all_code[jj])
    )
    return Tiles(block, lo.astype(np.int64), hi.astype(np.int64), full)


def allowed(doc: np.ndarray, code: np.ndarray) -> np.ndarray:
    """(T, T) the rule as a dense boolean matrix, True = may attend: for tests and small
    checks only (training never builds it)."""
    q, k = np.arange(len(doc))[:, None], np.arange(len(doc))[None]
    return (doc[:, None] == doc[None]) & (code[None] | (k <= q))


def block_lists(tiles: Tiles, n_tiles: int) -> dict[str, np.ndarray]:
    """FlexAttention's tile lists of one row (`BlockMask.from_kv_blocks`): per query tile
    the count and indices of its partial key tiles (`kv_num`, `kv_index`) and of its full
    ones (`full_num`, `full_index`), indices padded to `n_tiles` columns (int32)."""
    nq, span = tiles.full.shape
    j = tiles.lo[:, None] + np.arange(span)[None]
    seen = j <= tiles.hi[:, None]
    out = {}
    for name, pick in (("kv", seen & ~tiles.full), ("full", seen & tiles.full)):
        num = pick.sum(1)
        index = np.zeros((nq, n_tiles), dtype=np.int32)
        # each row's picked tiles first, in increasing order (a stable sort of "not picked")
        order = np.argsort(~pick, axis=1, kind="stable")
        index[:, :span] = np.take_along_axis(j, order, axis=1) * np.take_along_axis(pick, order, axis=1)
        out[f"{name}_num"], out[f"{name}_index"] = num.astype(np.int32), index
    return out
