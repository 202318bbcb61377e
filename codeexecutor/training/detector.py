"""Training the crash detector (`codeexecutor train-detector`): from a bugs build to a model folder.

The trace model stays frozen: its encoder states of every train and valid program are
computed once (bfloat16, in memory), and only the detector's layers and heads learn
(modeling/detector.py), so the traces the folder's model writes do not change. Batches
hold crashing and clean programs 1:1 (Bieber et al.'s balanced sampling), whatever the
build's mix; the loss is the crash logit's binary cross-entropy, plus, on crashing rows,
the kind's and the line's cross-entropy (a line the code window does not show has no
line loss). The valid split is scored every `eval_every` steps: the threshold is the one
that maximises balanced accuracy there, and the best valid score (the mean of balanced
detection accuracy and localisation) is kept. Every save is written aside and moved into
place; `--resume` carries on from the last one.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass

from codeexecutor.atomic import replacing, write_json
from codeexecutor.errors import UsageError
from codeexecutor.modeling.line_facts import FACTS

log = logging.getLogger("codeexecutor.training.detector")
MIN_KIND = 20  # an exception type is a kind of its own once the train split crashes with it this often


@dataclass(frozen=True)
class DetectorRecipe:
    layers: int = 2
    heads: int = 4
    dropout: float = 0.1
    batch: int = 32
    lr: float = 5e-4
    warmup: int = 100
    minutes: float = 20.0
    max_steps: int = 20_000
    eval_every: int = 250
    crash_ratio: float = 2.5  # crashing train programs kept for each clean one
    facts: bool = True  # each line's static facts beside its states (modeling/line_facts.py)
    # train on the submissions that crashed on their own input too (off: they are the real test set)
    real_crashes: bool = False
    # a problems.jsonl (codenet-meta): each program gets its problem's input description and
    # constraints as a docstring (a resource description, Bieber et al.); None: the code alone
    descriptions: str | None = None
    # a `build bugs --from` folder (the functions' bugs): its train and valid programs join
    # the contest programs'; None: the contest programs alone
    functions: str | None = None
    seed: int = 0


def _examples(generator, rows: list[dict], describe=None) -> list[dict]:
    """Token ids and targets of bugs-build rows (`offset`: the lines a description adds)."""
    out = []
    for row in rows:
        code, offset = row["code"], 0
        if describe is not None:
            code, offset = describe(row["problem_id"], code)
        ids = generator.encoder.code(generator.code_input(code))
        out.append({**row, "seen": code, "ids": ids, "offset": offset})
    return out


def _features(generator, examples: list[dict], progress: bool, cache: str | None = None, facts: bool = True) -> None:
    """Each example's line features (`lines`, bfloat16) and line numbers (`numbers`, in the
    program's own lines), from the frozen encoder; kept in `cache` (a file) when given, so
    another training on the same rows and model reads them instead of encoding again."""
    import torch

    from codeexecutor.modeling.detector import encode_lines

    ids = [e["id"] for e in examples]
    if cache and os.path.isfile(cache):
        saved = torch.load(cache, weights_only=False)
        if saved.get("ids") == ids:  # the same rows in the same order, or encode again
            for e, (lines, numbers) in zip(examples, saved["features"]):
                e["lines"], e["numbers"] = lines, numbers
            _add_facts(examples, facts)
            return
    order = sorted(range(len(examples)), key=lambda i: len(examples[i]["ids"]))
    start = time.perf_counter()
    with torch.no_grad():
        for n, i in enumerate(range(0, len(order), 64)):
            chunk = [examples[j] for j in order[i : i + 64]]
            for e, (lines, numbers) in zip(
                chunk, encode_lines(generator.model, generator.encoder, [e["ids"] for e in chunk])
            ):
                keep = [
                    i for i, k in enumerate(numbers) if k > e["offset"]
                ]  # a description's lines are not the program's
                e["lines"] = lines[keep].to(torch.bfloat16).clone()
                e["numbers"] = [numbers[i] - e["offset"] for i in keep]
            if progress and n % 20 == 0:
                print(
                    f"encoder states: {i + len(chunk)}/{len(order)} ({time.perf_counter() - start:.0f} s)", flush=True
                )
    if cache:
        with replacing(cache) as tmp:
            torch.save({"ids": ids, "features": [(e["lines"], e["numbers"]) for e in examples]}, tmp)
    _add_facts(examples, facts)


def _add_facts(examples: list[dict], facts: bool) -> None:
    """Each line's static facts after its states (modeling/line_facts.py), where the recipe has them."""
    import torch

    from codeexecutor.modeling.detector import with_facts

    if facts:
        for e in examples:
            seen = [k + e["offset"] for k in e["numbers"]]  # the lines of the code the model reads
            e["lines"] = with_facts(e["lines"].float(), e["seen"], seen).to(torch.bfloat16)


def _target_line(e: dict) -> int:
    """Index of the crash line among the example's lines; -1 where there is none or it is not read."""
    if not e["crashed"] or not e["line"] or e["line"] not in e["numbers"]:
        return -1
    return e["numbers"].index(e["line"])


def _batch(examples: list[dict], kinds: dict[str, int]):
    import torch

    from codeexecutor.modeling.detector import pad_lines

    lines, mask = pad_lines([e["lines"] for e in examples])
    crashed = torch.tensor([float(e["crashed"]) for e in examples])
    kind = torch.tensor([kinds.get(e["type"], kinds["other"]) if e["crashed"] else -100 for e in examples])
    line = torch.tensor([t if (t := _target_line(e)) >= 0 else -100 for e in examples])
    return lines, mask, crashed, kind, line


def _loss(net, batch):
    import torch.nn.functional as F

    lines, mask, crashed, kind, line = batch
    crash_logit, kind_logits, line_logits = net(lines, mask)
    loss = F.binary_cross_entropy_with_logits(crash_logit, crashed)
    if (kind >= 0).any():
        loss = loss + F.cross_entropy(kind_logits, kind, ignore_index=-100)
    if (line >= 0).any():
        loss = loss + F.cross_entropy(line_logits.clamp(min=-1e4), line, ignore_index=-100)
    return loss


def score(probs: list[float], kinds: list[str], lines: list[int | None], rows: list[dict], threshold: float) -> dict:
    """Detection, localisation and kind figures of detector answers against the runs, and
    the balanced accuracy the threshold is chosen by."""
    from codeexecutor.modeling.trace_metrics import verdict_metrics

    said = [(k, ln) if p >= threshold else (None, None) for p, k, ln in zip(probs, kinds, lines)]
    out = verdict_metrics(said, [(r["type"], r["line"]) for r in rows])
    tpr, fpr = out["true_positive_rate"] or 0.0, out["false_positive_rate"] or 0.0
    return {
        "programs": len(rows),
        "crashes": out["tp"] + out["fn"],
        **out,
        "balanced_accuracy": (tpr + 100 - fpr) / 2,
        "threshold": threshold,
    }


def best_threshold(probs: list[float], crashed: list[bool]) -> float:
    """The threshold of highest balanced accuracy (ties: the middle of the best run)."""
    pos, neg = sum(crashed), len(crashed) - sum(crashed)
    if not pos or not neg:
        return 0.5
    pairs = sorted(zip(probs, crashed), reverse=True)
    best, at, tp, fp = -1.0, 0.5, 0, 0
    for i, (p, c) in enumerate(pairs):
        tp, fp = tp + c, fp + (not c)
        nxt = pairs[i + 1][0] if i + 1 < len(pairs) else 0.0
        if nxt == p:
            continue
        bal = tp / pos + (neg - fp) / neg
        if bal > best:
            best, at = bal, (p + nxt) / 2
    return at


def evaluate_net(net, examples: list[dict], kinds: list[str], threshold: float | None = None) -> dict:
    import torch

    net.eval()
    probs, kind_names, lines = [], [], []
    index = {k: i for i, k in enumerate(kinds)}
    with torch.no_grad():
        for i in range(0, len(examples), 256):
            chunk = examples[i : i + 256]
            feats, mask, *_ = _batch(chunk, index)
            crash, kind, line = net(feats, mask)
            probs += torch.sigmoid(crash).tolist()
            kind_names += [kinds[k] for k in kind.argmax(-1).tolist()]
            lines += [
                e["numbers"][k] if k < len(e["numbers"]) else None for e, k in zip(chunk, line.argmax(-1).tolist())
            ]
    net.train()
    if threshold is None:
        threshold = best_threshold(probs, [e["crashed"] for e in examples])
    return score(probs, kind_names, lines, examples, threshold)


def _capped(rows: list[dict], recipe: DetectorRecipe) -> list[dict]:
    """The train rows with at most `crash_ratio` crashing programs to a clean one (a fixed
    random choice): batches are balanced anyway, and each row costs an encoder pass."""
    crash = [r for r in rows if r["crashed"]]
    clean = [r for r in rows if not r["crashed"]]
    keep = int(recipe.crash_ratio * len(clean))
    if len(crash) > keep:
        crash = random.Random(recipe.seed).sample(crash, keep)
    return clean + crash


def _cache(model: str, data: str, recipe: DetectorRecipe) -> str:
    """The line features' file in the data folder, named by the model's weights and the descriptions."""
    import hashlib

    from codeexecutor.modeling.loading import resolve

    folder, h = resolve(model), hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        if name.startswith("model") and name.endswith(".safetensors"):
            with open(os.path.join(folder, name), "rb") as f:
                h.update(name.encode() + hashlib.sha256(f.read()).digest())
    h.update(f"{recipe.descriptions}:{recipe.seed}:{recipe.crash_ratio}".encode())
    if recipe.functions:  # the file of the contest programs alone keeps its name
        h.update(f":{os.path.abspath(recipe.functions)}".encode())
    return os.path.join(data, f"detector-lines-{h.hexdigest()[:12]}.pt")


def train_detector(
    model: str, data: str, out: str, recipe: DetectorRecipe, resume: bool = False, progress: bool = True
) -> dict:
    """Train a detector for `model` on the bugs build `data`; it is saved in `out` (a copy
    of the model's folder, or the folder itself). Returns the training report."""
    import torch

    from codeexecutor.generation.search import TraceGenerator
    from codeexecutor.modeling.detector import CrashDetector
    from codeexecutor.training.crash_data import read_rows

    if not os.path.isdir(os.path.join(data, "bugs")):
        raise UsageError(f"--data {data}: no bugs/ dataset in it (build one with `codeexecutor build bugs`)")
    if recipe.functions and not all(
        os.path.isdir(os.path.join(recipe.functions, n)) for n in ("functions", "functions_errors")
    ):
        raise UsageError(
            f"--functions {recipe.functions}: no functions/ and functions_errors/ in it "
            "(build one with `codeexecutor build bugs --from DIR`)"
        )
    torch.manual_seed(recipe.seed)
    generator = TraceGenerator(model, device="cpu")
    for p in generator.model.parameters():
        p.requires_grad_(False)
    rows = read_rows(data)
    if recipe.functions:  # no description: a function has no problem statement
        rows += [r for n in ("functions_errors", "functions") for r in read_rows(recipe.functions, None, n)]
    describe = _describer(recipe.descriptions) if recipe.descriptions else None
    train = _examples(generator, _capped([r for r in rows if r["split"] == "train"], recipe), describe)
    valid = _examples(generator, [r for r in rows if r["split"] == "valid"], describe)
    counts = Counter(e["type"] for e in train if e["crashed"])
    kinds = sorted(t for t, n in counts.items() if n >= MIN_KIND) + ["other"]
    log.info("detector: %d train, %d valid programs; kinds %s", len(train), len(valid), kinds)
    _features(generator, train + valid, progress, _cache(model, data, recipe), recipe.facts)
    if not recipe.real_crashes:  # kept out, with their variants: `evaluate --crashes` scores them as the real set
        real = {e["source_id"] for e in train if e["kind"] == "original" and e["crashed"]}
        train = [e for e in train if e["source_id"] not in real]
    hidden = generator.model.config.hidden_size
    net = CrashDetector(hidden, kinds, recipe.layers, recipe.heads, recipe.dropout, FACTS if recipe.facts else 0)
    opt = torch.optim.AdamW(net.parameters(), lr=recipe.lr, weight_decay=0.01)
    state_path = os.path.join(out, "detector-state.pt")
    step, best, history = 0, None, []
    if resume and os.path.isfile(state_path):
        saved = torch.load(state_path, weights_only=False)
        net.load_state_dict(saved["net"])
        opt.load_state_dict(saved["opt"])
        step, best, history = saved["step"], saved["best"], saved["history"]
        print(f"resuming at step {step}")
    _prepare_folder(model, out)
    crash = [e for e in train if e["crashed"]]
    clean = [e for e in train if not e["crashed"]]
    rng = random.Random(f"{recipe.seed}:{step}")
    index = {k: i for i, k in enumerate(kinds)}
    deadline = time.monotonic() + 60 * recipe.minutes
    net.train()
    while step < recipe.max_steps and time.monotonic() < deadline:
        half = recipe.batch // 2
        batch = _batch(rng.sample(crash, half) + rng.sample(clean, recipe.batch - half), index)
        for group in opt.param_groups:
            group["lr"] = recipe.lr * min(1.0, (step + 1) / recipe.warmup)
        loss = _loss(net, batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        step += 1
        if step % recipe.eval_every == 0:
            figures = evaluate_net(net, valid, kinds)
            figures["step"], figures["loss"] = step, round(loss.item(), 4)
            history.append(figures)
            value = (figures["balanced_accuracy"] + figures["localisation_accuracy"]) / 2
            if progress:
                print(f"step {step}: valid {json.dumps(figures)}", flush=True)
            if best is None or value > best["value"]:
                shipped = _as_shipped(net, kinds, recipe, generator.model.config.hidden_size)
                figures = {**evaluate_net(shipped, valid, kinds), "step": step}
                best = {"value": value, "step": step, "valid": figures}
                _save_detector(out, net, recipe, kinds, figures["threshold"], best, len(train))
            state = {"net": net.state_dict(), "opt": opt.state_dict(), "step": step, "best": best, "history": history}
            _atomic_torch(state, state_path)
    return {"steps": step, "best": best, "history": history, "kinds": kinds, "train_programs": len(train)}


def _describer(path: str):
    """(problem id, code) -> (code with its problem's description as a docstring, line offset)."""
    from codeexecutor.training.crash_data import described, read_descriptions

    docs = read_descriptions(path)
    return lambda problem, code: described(code, docs.get(problem))


def _prepare_folder(model: str, out: str) -> None:
    """`out` holds the model's files (a copy unless it is the model's folder)."""
    from codeexecutor.modeling.loading import resolve

    src = resolve(model)
    os.makedirs(out, exist_ok=True)
    if os.path.realpath(src) == os.path.realpath(out):
        return
    for name in os.listdir(src):
        if os.path.isfile(os.path.join(src, name)) and not name.startswith("detector"):
            shutil.copy(os.path.join(src, name), os.path.join(out, name))


def _as_shipped(net, kinds: list[str], recipe: DetectorRecipe, hidden: int):
    """The detector as it is saved (int8 rows, modeling/int8.py) and loaded: the threshold
    and the figures kept are this copy's."""
    from codeexecutor.modeling.detector import CrashDetector
    from codeexecutor.modeling.int8 import dequantize, quantize

    copy = CrashDetector(hidden, kinds, recipe.layers, recipe.heads, 0.0, net.facts)
    copy.load_state_dict(dequantize(quantize(dict(net.state_dict()))))
    return copy.eval()


def _save_detector(out: str, net, recipe: DetectorRecipe, kinds: list[str], threshold: float, best, n_train) -> None:
    from codeexecutor.modeling.detector import CONFIG, WEIGHTS
    from codeexecutor.modeling.int8 import save_int8

    with replacing(os.path.join(out, WEIGHTS)) as tmp:
        save_int8({k: v.detach().to("cpu") for k, v in net.state_dict().items()}, tmp)
    info = {
        "kinds": kinds,
        "layers": recipe.layers,
        "facts": FACTS if recipe.facts else 0,
        "heads": recipe.heads,
        "threshold": threshold,
        "descriptions": bool(recipe.descriptions),
        "recipe": asdict(recipe),
        "best_step": best["step"],
        "valid": best["valid"],
        "train_programs": n_train,
    }
    write_json(os.path.join(out, CONFIG), info, indent=1)


def _atomic_torch(obj, path: str) -> None:
    import torch

    with replacing(path) as tmp:
        torch.save(obj, tmp)
