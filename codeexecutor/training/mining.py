"""Hard-example mining: the examples of a source with the highest loss under the model
as the previous stage left it, scored in parallel across ranks."""

from __future__ import annotations

from dataclasses import dataclass

from codeexecutor.training.data import StageData

CHECK_EVERY = 8  # batches between two reads of the clock (each waits for the device)


def _caught_up(engine) -> float:
    """The clock, once the device has run what was queued (a GPU runs behind the host)."""
    import time

    import torch

    if torch.device(engine.device).type == "cuda":
        torch.cuda.synchronize(engine.device)
    return time.perf_counter()


def _random_chunks(mine: list[int], lengths, chunk: int, seed: int) -> list[int]:
    """`mine` in a random order (the seed's), each run of `chunk` examples sorted by length
    so its batches pad little: a pass stopped at a chunk's end has scored a random sample."""
    import numpy as np

    shuffled = [mine[i] for i in np.random.default_rng(seed).permutation(len(mine))]
    chunks = (sorted(shuffled[at : at + chunk], key=lambda j: lengths[j]) for at in range(0, len(shuffled), chunk))
    return [i for part in chunks for i in part]


def mining_pool(n: int, pool: int | None, seed: int) -> set[int] | None:
    """The examples scored when at most `pool` of the source's `n` may be: a fixed random
    sample (the seed's), so a resumed or re-run stage mines the same; None: all of them."""
    import numpy as np

    if pool is None or pool >= n:
        return None
    return {int(i) for i in np.random.default_rng(seed).choice(n, size=pool, replace=False)}


@dataclass(frozen=True)
class Mining:
    """What a source's mining asks: its `k` hardest examples, scored `batch_size` at a
    time, of a fixed random sample of `pool` of them (None: all; seeded by `seed`), in at
    most `seconds` (None: as long as it takes)."""

    k: int
    batch_size: int
    pool: int | None = None
    seed: int = 0
    seconds: float | None = None


def mine_hardest(
    engine, data: StageData, source: int, plan: Mining, *, rank: int, world: int, precision: str | None = None
) -> list[int]:
    """Indices of the k highest-loss examples of one source (of a fixed random sample of
    `pool` of them when given: scoring costs a forward pass per example, and a source grown
    by augmentation would spend a short run's budget on it); each rank scores a slice, under
    the run's `train.autocast` precision (`precision`). With `seconds`, scoring stops once
    that long has passed (read every `CHECK_EVERY` batches, after the device caught up):
    the hardest of the examples scored by then."""
    k, batch_size, pool, seed, seconds = plan.k, plan.batch_size, plan.pool, plan.seed, plan.seconds
    table = data.tables[source]
    sample = mining_pool(len(table), pool, seed)
    # This rank's slice, in length order: batches of similar lengths pad little (the
    # losses do not depend on the batch an example is scored in).
    mine = [int(i) for i in data.order[source] if i % world == rank and (sample is None or int(i) in sample)]
    if seconds is not None:  # a deadline may end the pass: what it reaches must be a fair sample, not the shortest
        lengths = data.code_len[source] + data.trace_len[source]
        mine = _random_chunks(mine, lengths, CHECK_EVERY * batch_size, seed)
    losses, indices, scored = _score(engine, data, table, mine, batch_size, rank, precision, seconds)
    if seconds is not None:  # the share of the scored examples k is of the pool: the hardest k of n stays a quantile
        k = _share_of_scored(engine, data, k, scored, len(mine), seconds, rank)
    return _gather_hardest(engine.device, losses, indices, k, world)


def _score(engine, data: StageData, table, mine: list[int], batch_size: int, rank: int, precision, seconds):
    """Each example of `mine` scored (its loss, kept on the device: no sync a batch) until
    `seconds` have passed; (losses, indices, how many were scored)."""
    import time

    import torch

    from codeexecutor.training.setup import autocast

    losses, indices = [], []
    engine.eval()
    bar = None
    if rank == 0:
        from codeexecutor.progress import bar as progress_bar

        bar = progress_bar(total=len(mine), desc=f"mining {data.stage.name}", unit="ex")
    deadline = None if seconds is None else time.perf_counter() + seconds
    scored = len(mine)
    with torch.no_grad(), autocast(precision, engine.device):
        for b, i in enumerate(range(0, len(mine), batch_size)):
            if deadline is not None and b % CHECK_EVERY == 0 and b and _caught_up(engine) > deadline:
                scored = i
                break
            if bar is not None:
                bar.update(min(batch_size, len(mine) - i))
            idx = mine[i : i + batch_size]
            rows = table[idx]
            batch = data.encoder.collate(
                [{"code_ids": c, "trace_ids": t} for c, t in zip(rows["code_ids"], rows["trace_ids"])]
            )
            batch = {n: v.to(engine.device) for n, v in batch.items()}
            losses.append(engine(**batch, reduction="none").loss.float())
            indices.append(torch.tensor(idx, device=engine.device))
    if bar is not None:
        bar.close()
    engine.train()
    return losses, indices, scored


def _share_of_scored(engine, data: StageData, k: int, scored: int, mine: int, seconds: float, rank: int) -> int:
    """The k of a pass the deadline stopped: the share of the scored examples that k is of
    the whole pool, the same on every rank (the gather after it needs one k)."""
    import torch
    import torch.distributed as dist

    counts = torch.tensor([scored, mine], dtype=torch.long, device=engine.device)  # NCCL: on the GPU
    dist.all_reduce(counts)
    done, pool_size = int(counts[0]), int(counts[1])
    if done >= pool_size:
        return k
    asked, k = k, max(1, round(k * done / max(pool_size, 1)))
    if rank == 0:
        print(
            f"mining {data.stage.name}: its {seconds:.0f} s spent after {done} of {pool_size} examples "
            f"(drawn at random); the hardest {k} of them, the share the {asked} of {pool_size} asked for",
            flush=True,
        )
    return k


def _gather_hardest(device, losses: list, indices: list, k: int, world: int) -> list[int]:
    """This rank's k hardest, then the k hardest of all ranks' (padded to k each), sorted."""
    import torch
    import torch.distributed as dist

    loss = torch.cat(losses) if losses else torch.empty(0, device=device)
    index = torch.cat(indices) if indices else torch.empty(0, dtype=torch.long, device=device)
    best_loss, best_index = hardest(loss, index, k)
    pad = k - best_loss.numel()
    best_loss = torch.cat([best_loss, torch.full((pad,), -float("inf"), device=device)])
    best_index = torch.cat([best_index, torch.full((pad,), -1, dtype=torch.long, device=device)])
    all_loss = [torch.empty_like(best_loss) for _ in range(world)]
    all_index = [torch.empty_like(best_index) for _ in range(world)]
    dist.all_gather(all_loss, best_loss)
    dist.all_gather(all_index, best_index)
    loss, index = torch.cat(all_loss), torch.cat(all_index)
    keep = index >= 0
    _, chosen = hardest(loss[keep], index[keep], k)
    return sorted(chosen.tolist())


def hardest(loss, index, k: int):
    """The k highest losses and their example indices, ties to the lower index (the same
    choice whatever the order the ranks scored them in)."""
    import torch

    by_index = torch.argsort(index)
    loss, index = loss[by_index], index[by_index]
    order = torch.argsort(-loss, stable=True)[:k]
    return loss[order], index[order]
