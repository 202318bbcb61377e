"""Training the value model (`codeexecutor train-values`): from value-use events to a folder.

The recipe (curricula/recipes/values.yaml) names the events (`codeexecutor build values`),
the classifier's size, its optimiser and a time budget in minutes. Training runs on the
CPU: AdamW with linear warm-up and decay, batches of uses drawn evenly at random from the
train split, the valid split scored every `eval_every` steps; the best valid top-1 is
kept. Every save (the model, the optimiser, the step and the sampler's state) is written
aside and moved into place, so a killed run resumes with `--resume` where it stopped.
The frequency and literal tables come from the train split too (`tables`).
"""

from __future__ import annotations

import functools
import gzip
import json
import logging
import os
import shutil
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, fields

from codeexecutor.atomic import replacing
from codeexecutor.errors import UsageError
from codeexecutor.execution.values import KINDS

log = logging.getLogger("codeexecutor.training.values")
INITS = ("scratch", "embeddings", "encoder")
MIN_LITERAL = 3  # a literal is kept for a name's kind once seen this often
MIN_NAME = 3  # a name's kind counts are kept once it is seen this often


@dataclass(frozen=True)
class ValueRecipe:
    arch: str = "features"  # features | transformer (modeling/value_model.py)
    buckets: int = 1 << 14  # features: hashed feature embeddings
    dim: int = 32  # features: width of a feature's embedding
    ffn: int = 64  # features: the MLP's hidden width
    epochs: float = 8.0  # features: passes over the train split, within `minutes`
    feature_dropout: float = 0.0  # features: share of an example's features dropped in training (names generalise less)
    balance: bool = False  # features: draw contest, collection and library events equally often
    data: str = "runs/values"
    tokenizer: str = "models/codeexecutor-mini-cpu"
    # where the weights start: scratch; embeddings (the word embeddings of the tokenizer's model,
    # its trained code tokens); encoder (every weight of that model's encoder whose shape fits)
    init: str = "embeddings"
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    batch: int = 32
    lr: float = 5e-4
    warmup: int = 200
    minutes: float = 30.0
    max_steps: int = 100_000
    eval_every: int = 500
    valid_limit: int = 3000  # valid uses scored at each evaluation
    seed: int = 0

    @classmethod
    def load(cls, path: str, overrides: dict | None = None) -> ValueRecipe:
        import yaml

        try:
            with open(path) as f:
                given = yaml.safe_load(f) or {}
        except OSError as exc:
            raise UsageError(
                f"--recipe {path}: {exc.strerror} (give a recipe such as curricula/recipes/values.yaml)"
            ) from None
        given.update({k: v for k, v in (overrides or {}).items() if v is not None})
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise UsageError(f"{path}: no field {', '.join(unknown)} in a value recipe (it has {', '.join(known)})")
        recipe = cls(**given)
        if recipe.arch not in ("features", "transformer"):
            raise UsageError(f"{path}: arch {recipe.arch!r}: features or transformer")
        if recipe.init not in INITS:
            raise UsageError(f"{path}: init {recipe.init!r}: one of {', '.join(INITS)}")
        if recipe.minutes <= 0 or recipe.batch < 1 or recipe.layers < 1 or recipe.hidden % recipe.heads:
            raise UsageError(f"{path}: minutes > 0, batch >= 1, layers >= 1 and hidden divisible by heads, please")
        return recipe


def read_events(folder: str, split: str) -> list[dict]:
    path = os.path.join(folder, f"{split}.jsonl.gz")
    if not os.path.isfile(path):
        raise UsageError(
            f"no {split} split at {path}: build the events with `codeexecutor build values --out {folder}`"
        )
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def tables(rows: list[dict]) -> tuple[dict, dict]:
    """(frequency, literals) of training events: kind counts per `use:name` and per use;
    per name and kind, its most frequent literal seen at least MIN_LITERAL times."""
    names: dict[str, Counter] = defaultdict(Counter)
    uses: dict[str, Counter] = defaultdict(Counter)
    seen: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in rows:
        names[f"{r['use']}:{r['name']}"][r["kind"]] += 1
        uses[r["use"]][r["kind"]] += 1
        if r.get("literal") is not None:
            seen[(r["name"], r["kind"])][r["literal"]] += 1
    literals: dict[str, dict] = defaultdict(dict)
    for (name, kind), counter in seen.items():
        literal, n = counter.most_common(1)[0]
        if n >= MIN_LITERAL:
            literals[name][kind] = literal
    # names seen once say little and would make most of the shipped folder
    kept = {k: dict(v) for k, v in names.items() if sum(v.values()) >= MIN_NAME}
    frequency = {"names": kept, "uses": {k: dict(v) for k, v in uses.items()}}
    return frequency, dict(literals)


def encoded(tokenizer, rows: list[dict]) -> tuple[list[list[int]], list[int]]:
    from codeexecutor.modeling.value_model import encode

    index = {k: i for i, k in enumerate(KINDS)}
    ids = [encode(tokenizer, r["name"], r["use"], r["before"], r["after"]) for r in rows]
    return ids, [index[r["kind"]] for r in rows]


def encoded_split(tokenizer, tokenizer_path: str, data: str, split: str) -> tuple[list[dict], list, list]:
    """(rows, ids, labels) of a split, the ids cached beside the events (`encoded-SPLIT.pt`)
    for as long as the events file, the tokenizer and the input form are the same."""
    import hashlib

    import torch

    from codeexecutor.modeling import value_model

    rows = read_events(data, split)
    events = os.path.join(data, f"{split}.jsonl.gz")
    with open(os.path.join(tokenizer_path, "tokenizer.json"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    sizes = (value_model.MAX_NAME, value_model.MAX_BEFORE, value_model.MAX_AFTER)
    key = f"{digest}:{os.path.getsize(events)}:{os.path.getmtime(events)}:{sizes}"
    cache = os.path.join(data, f"encoded-{split}.pt")
    if os.path.exists(cache):
        blob = torch.load(cache, weights_only=False)
        if blob.get("key") == key:
            return rows, blob["ids"], blob["labels"]
    ids, labels = encoded(tokenizer, rows)
    with replacing(cache) as tmp:
        torch.save({"key": key, "ids": ids, "labels": labels}, tmp)
    return rows, ids, labels


def topk(model, tokenizer, ids: list[list[int]], labels: list[int], batch: int = 128) -> dict:
    """Top-1/3/5 accuracy (%) of `model` on encoded uses."""
    import torch

    from codeexecutor.modeling.value_model import batch as make_batch

    hits = Counter()
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(ids), batch):
            x, m = make_batch(tokenizer, ids[start : start + batch])
            ranked = model(input_ids=x, attention_mask=m).logits.argsort(-1, descending=True)[:, :5]
            y = torch.tensor(labels[start : start + batch]).unsqueeze(1)
            for k in (1, 3, 5):
                hits[k] += int((ranked[:, :k] == y).any(1).sum())
    n = max(1, len(ids))
    return {f"top{k}": round(100.0 * hits[k] / n, 2) for k in (1, 3, 5)}


def _save(out: str, write_weights, frequency: dict, literals: dict, meta: dict) -> None:
    """The model folder, written aside and moved into place: its weights (`write_weights(folder)`),
    its tables gzipped, its training record, and the hand-written card of the folder it replaces."""
    with replacing(out) as tmp:
        os.makedirs(tmp)
        write_weights(tmp)
        for name, obj in (("frequency.json.gz", frequency), ("literals.json.gz", literals)):
            with gzip.open(os.path.join(tmp, name), "wt", encoding="utf-8") as f:
                json.dump(obj, f, ensure_ascii=False, sort_keys=True)
        with open(os.path.join(tmp, "training.json"), "w") as f:
            json.dump(meta, f, ensure_ascii=False, sort_keys=True)
        if os.path.exists(os.path.join(out, "README.md")):
            shutil.copy(os.path.join(out, "README.md"), os.path.join(tmp, "README.md"))


def train(recipe: ValueRecipe, out: str, resume: bool = False, progress: bool = True) -> dict:
    """Train to the recipe's budget; the best-on-valid model ends in `out`; its report."""
    if recipe.arch == "features":
        return train_features(recipe, out, resume, progress)
    return train_transformer(recipe, out, resume, progress)


def train_transformer(recipe: ValueRecipe, out: str, resume: bool = False, progress: bool = True) -> dict:
    import random

    import torch
    from transformers import PreTrainedTokenizerFast

    from codeexecutor.modeling.value_model import batch as make_batch
    from codeexecutor.modeling.value_model import new_model

    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(recipe.tokenizer)
    started = time.monotonic()
    train_rows, x_train, y_train = encoded_split(tokenizer, recipe.tokenizer, recipe.data, "train")
    frequency, literals = tables(train_rows)
    _, x_valid, y_valid = encoded_split(tokenizer, recipe.tokenizer, recipe.data, "valid")
    pick = random.Random(recipe.seed).sample(range(len(x_valid)), min(len(x_valid), recipe.valid_limit))
    x_valid, y_valid = [x_valid[i] for i in pick], [y_valid[i] for i in pick]
    log.info(
        "value model: %d train uses, %d valid (encoded in %.0f s)",
        len(x_train),
        len(x_valid),
        time.monotonic() - started,
    )
    model = new_model(tokenizer, recipe.layers, recipe.hidden, recipe.heads)
    if recipe.init != "scratch":
        _init_from(model, recipe.tokenizer, recipe.init)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01)
    state_path = os.path.join(out + ".state", "state.pt")
    step, best, history = 0, {"top1": -1.0}, []
    if resume and os.path.exists(state_path):
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, best, history = state["step"], state["best"], state["history"]
        rng.setstate(state["rng"])
        log.info("value model: resumed at step %d (best valid top-1 %.2f)", step, best["top1"])
    budget = recipe.minutes * 60.0
    clock = time.monotonic()
    spent = sum(h.get("seconds", 0) for h in history[-1:])
    order = list(range(len(x_train)))
    loss_sum, loss_n = 0.0, 0
    while step < recipe.max_steps and spent + time.monotonic() - clock < budget:
        model.train()
        pick = [order[rng.randrange(len(order))] for _ in range(recipe.batch)]
        x, m = make_batch(tokenizer, [x_train[i] for i in pick])
        y = torch.tensor([y_train[i] for i in pick])
        lr = recipe.lr * min(1.0, (step + 1) / recipe.warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        loss = torch.nn.functional.cross_entropy(model(input_ids=x, attention_mask=m).logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        loss_sum, loss_n = loss_sum + loss.item(), loss_n + 1
        last = not (step < recipe.max_steps and spent + time.monotonic() - clock < budget)
        if step % recipe.eval_every == 0 or last:
            scores = topk(model, tokenizer, x_valid, y_valid)
            seconds = spent + time.monotonic() - clock
            history.append({"step": step, "loss": round(loss_sum / loss_n, 4), "seconds": round(seconds, 1), **scores})
            loss_sum, loss_n = 0.0, 0
            if progress:
                log.info(
                    "value model: step %d, %.0f s, loss %.3f, valid %s", step, seconds, history[-1]["loss"], scores
                )
            if scores["top1"] > best["top1"]:
                best = {"step": step, **scores}
                meta = {"recipe": asdict(recipe), "best": best, "history": history}
                _save(
                    out,
                    lambda folder: (model.save_pretrained(folder), tokenizer.save_pretrained(folder)),
                    frequency,
                    literals,
                    meta,
                )
            os.makedirs(os.path.dirname(state_path), exist_ok=True)
            blob = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "best": best}
            blob.update(history=history, rng=rng.getstate())
            with replacing(state_path) as tmp:
                torch.save(blob, tmp)
    return {"steps": step, "best": best, "history": history, "train_uses": len(x_train)}


def _init_from(model, source: str, what: str) -> None:
    """Copy weights of the model the tokenizer came from: its word embeddings, or every
    encoder weight whose name and shape match (its positions are rotary: ours are learned)."""
    path = os.path.join(source, "model.safetensors")
    if not os.path.exists(path):
        raise UsageError(f"init {what}: no model.safetensors in {source} to start from (or init: scratch)")
    import torch
    from safetensors.torch import load_file

    weights = load_file(path)
    own = model.state_dict()
    wanted = [k for k in own if k.endswith("word_embeddings.weight")] if what == "embeddings" else list(own)
    copied = [k for k in wanted if k in weights and weights[k].shape == own[k].shape]
    with torch.no_grad():
        for k in copied:
            own[k].copy_(weights[k].to(own[k].dtype))
    log.info("value model: %d weights from %s (%s)", len(copied), source, what)


def _feature_split(recipe: ValueRecipe, split: str) -> tuple[list[dict], list[list[int]], list[int]]:
    from codeexecutor.modeling.value_features import features, hashed

    index = {k: i for i, k in enumerate(KINDS)}
    rows = read_events(recipe.data, split)
    ids = [hashed(features(r["name"], r["use"], r["before"], r["after"]), recipe.buckets) for r in rows]
    return rows, ids, [index[r["kind"]] for r in rows]


def feature_topk(model, ids: list[list[int]], labels: list[int], batch: int = 1024) -> dict:
    import torch

    from codeexecutor.modeling.value_model import bag_batch

    hits, model = Counter(), model.eval()
    with torch.inference_mode():
        for start in range(0, len(ids), batch):
            ranked = model(*bag_batch(ids[start : start + batch])).argsort(-1, descending=True)[:, :5]
            y = torch.tensor(labels[start : start + batch]).unsqueeze(1)
            for k in (1, 3, 5):
                hits[k] += int((ranked[:, :k] == y).any(1).sum())
    return {f"top{k}": round(100.0 * hits[k] / max(1, len(ids)), 2) for k in (1, 3, 5)}


def _group(row: dict) -> str:
    """contest, library (a PyPI package, the documentation) or collection (TheAlgorithms, keon)."""
    if row["corpus"] == "contest":
        return "contest"
    head = row["corpus"].split("/")[0]
    return "library" if head[-1:].isdigit() or head.startswith("python-") else "collection"


def _group_weights(rows: list[dict]) -> list[float]:
    counts = Counter(_group(r) for r in rows)
    return [1.0 / counts[_group(r)] for r in rows]


def _dropped(ids: list[int], p: float, rng) -> list[int]:
    if p <= 0:
        return ids
    kept = [i for i in ids if rng.random() >= p]
    return kept or ids[:1]


def train_features(recipe: ValueRecipe, out: str, resume: bool = False, progress: bool = True) -> dict:
    """The hashed-feature classifier: Adam on the MLP, sparse Adam on the feature
    embeddings, shuffled epochs within the budget; the best epoch on valid is kept."""
    import random

    import torch

    from codeexecutor.modeling.value_features import FEATURE_SET
    from codeexecutor.modeling.value_model import bag_batch, feature_classifier, save_features

    torch.manual_seed(recipe.seed)
    started = time.monotonic()
    train_rows, x_train, y_train = _feature_split(recipe, "train")
    _, x_valid, y_valid = _feature_split(recipe, "valid")
    frequency, literals = tables(train_rows)
    log.info(
        "value model: %d train uses, %d valid (features in %.0f s)",
        len(x_train),
        len(x_valid),
        time.monotonic() - started,
    )
    model = feature_classifier(recipe.buckets, recipe.dim, recipe.ffn, len(KINDS))
    sparse = torch.optim.SparseAdam(list(model.bag.parameters()), lr=recipe.lr * 20)
    dense = torch.optim.AdamW(model.mlp.parameters(), lr=recipe.lr * 4, weight_decay=0.01)
    state_path = os.path.join(out + ".state", "state.pt")
    epoch, step, best, history = 0, 0, {"top1": -1.0}, []
    if resume and os.path.exists(state_path):
        state = torch.load(state_path, weights_only=False)
        if state.get("feature_set", 1) != FEATURE_SET:
            raise UsageError(
                f"--resume: {state_path} was trained on feature set {state.get('feature_set', 1)} and this version "
                f"reads set {FEATURE_SET}: train again without --resume"
            )
        model.load_state_dict(state["model"])
        sparse.load_state_dict(state["sparse"])
        dense.load_state_dict(state["dense"])
        epoch, step, best, history = state["epoch"], state["step"], state["best"], state["history"]
        log.info("value model: resumed after epoch %d (best valid top-1 %.2f)", epoch, best["top1"])
    spent = history[-1]["seconds"] if history else 0.0
    clock = time.monotonic()
    rng = random.Random(recipe.seed)
    weights = _group_weights(train_rows) if recipe.balance else None
    while epoch < recipe.epochs and spent + time.monotonic() - clock < recipe.minutes * 60:
        if weights is None:
            order = list(range(len(x_train)))
            random.Random(recipe.seed + epoch).shuffle(order)
        else:
            order = random.Random(recipe.seed + epoch).choices(range(len(x_train)), weights, k=len(x_train))
        model.train()
        loss_sum = 0.0
        for start in range(0, len(order), recipe.batch):
            pick = order[start : start + recipe.batch]
            logits = model(*bag_batch([_dropped(x_train[i], recipe.feature_dropout, rng) for i in pick]))
            loss = torch.nn.functional.cross_entropy(logits, torch.tensor([y_train[i] for i in pick]))
            sparse.zero_grad(set_to_none=True)
            dense.zero_grad(set_to_none=True)
            loss.backward()
            sparse.step()
            dense.step()
            step += 1
            loss_sum += loss.item() * len(pick)
        epoch += 1
        scores = feature_topk(model, x_valid, y_valid)
        seconds = spent + time.monotonic() - clock
        history.append(
            {
                "epoch": epoch,
                "step": step,
                "loss": round(loss_sum / len(order), 4),
                "seconds": round(seconds, 1),
                **scores,
            }
        )
        if progress:
            log.info("value model: epoch %d, %.0f s, loss %.3f, valid %s", epoch, seconds, history[-1]["loss"], scores)
        if scores["top1"] > best["top1"]:
            best = {"epoch": epoch, **scores}
            meta = {"recipe": asdict(recipe), "best": best, "history": history}
            write = functools.partial(save_features, model, buckets=recipe.buckets, dim=recipe.dim, hidden=recipe.ffn)
            _save(out, write, frequency, literals, meta)
        os.makedirs(os.path.dirname(state_path), exist_ok=True)
        blob = {"model": model.state_dict(), "sparse": sparse.state_dict(), "dense": dense.state_dict()}
        blob.update(epoch=epoch, step=step, best=best, history=history, feature_set=FEATURE_SET)
        with replacing(state_path) as tmp:
            torch.save(blob, tmp)
    return {"steps": step, "epochs": epoch, "best": best, "history": history, "train_uses": len(x_train)}
