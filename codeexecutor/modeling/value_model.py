"""The value model: which kind of value a missing name, attribute or call result holds.

Two architectures, chosen by measurement on the valid packages (experiments/NOTEBOOK.md):

* `features` (shipped): a hashed-feature classifier of our own, `FeatureClassifier`: the
  features of `value_features.py` (the name and its pieces, the kind of use, the tokens
  around it, how the context uses and binds the name), each hashed into one of `buckets`
  embeddings, averaged, then a small MLP over `values.KINDS`. It trains on the CPU in
  minutes and answers in well under a millisecond.
* `transformer`: a small RoBERTa classifier (transformers' `RobertaForSequenceClassification`)
  over the product's code tokenizer, reading a use as LExecutor frames it,
  `<s> name </s> use </s> code before <mask> code after </s>`; on 2 cores it sees too few
  examples in an hour to learn more than the frequency table.

A model folder holds `config.json` (`value_model: true`, `arch`, the kinds in order, the
`feature_set` its features were read with: a folder of another set is refused), the
weights (`model.safetensors`: the feature embeddings in int8 with a scale a row), and two
tables learned from the same events, gzipped: the kinds seen for each name
(`frequency.json.gz`, the `frequency` baseline's) and, for each name and kind, the
literal seen most often (`literals.json.gz`: `'utf-8'` for an `encoding`), which the
child injects in place of the kind's default value.
"""

from __future__ import annotations

import json
import os

from codeexecutor.errors import UsageError
from codeexecutor.execution.values import KINDS
from codeexecutor.modeling.value_features import FEATURE_SET, features, hashed

MAX_BEFORE = 96  # tokens of code before the use
MAX_AFTER = 40
MAX_NAME = 8
MARKER = "value_model"


def is_value_model(path: str) -> bool:
    try:
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and bool(config.get(MARKER))


def check_folder(path: str) -> None:
    """Refuse, in one line, a folder that is not a value model."""
    if not os.path.isdir(path):
        raise UsageError(f"{path}: no such model folder (give a value model folder, e.g. models/codeexecutor-values)")
    if not is_value_model(path):
        raise UsageError(
            f"{path} is not a value model (its config.json lacks value_model: true): give a folder made by "
            "`codeexecutor train-values`, or a predictor name (empty, dummy, frequency)"
        )


def encode(tokenizer, name: str, use: str, before: str, after: str) -> list[int]:
    """Token ids of one use in the model's input form."""
    n = tokenizer.encode(name, add_special_tokens=False)[:MAX_NAME]
    u = tokenizer.encode(use, add_special_tokens=False)
    b = tokenizer.encode(before, add_special_tokens=False)[-MAX_BEFORE:]
    a = tokenizer.encode(after, add_special_tokens=False)[:MAX_AFTER]
    bos, eos, mask = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.mask_token_id
    return [bos, *n, eos, *u, eos, *b, mask, *a, eos]


def batch(tokenizer, rows: list[list[int]]):
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


def new_model(tokenizer, layers: int = 4, hidden: int = 256, heads: int = 4):
    from transformers import RobertaConfig, RobertaForSequenceClassification

    width = MAX_NAME + MAX_BEFORE + MAX_AFTER + 16
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=width + 2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        num_labels=len(KINDS),
        id2label=dict(enumerate(KINDS)),
        label2id={k: i for i, k in enumerate(KINDS)},
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    setattr(config, MARKER, True)
    return RobertaForSequenceClassification(config)


def feature_classifier(buckets: int, dim: int, hidden: int, kinds: int):
    """An embedding bag over hashed features, then an MLP: the `features` architecture."""
    import torch

    class FeatureClassifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bag = torch.nn.EmbeddingBag(buckets, dim, mode="mean", sparse=True)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, kinds)
            )

        def forward(self, ids, offsets):
            return self.mlp(self.bag(ids, offsets))

    return FeatureClassifier()


def bag_batch(rows: list[list[int]]):
    import torch

    offsets = torch.tensor([0] + [len(r) for r in rows[:-1]]).cumsum(0)
    return torch.tensor([i for r in rows for i in r], dtype=torch.long), offsets


class ValueModel:
    """A loaded value model folder: the classifier and its tables."""

    def __init__(self, path: str) -> None:
        check_folder(path)
        try:
            self._load(path)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            raise UsageError(
                f"{path}: a broken value model ({type(exc).__name__}: {str(exc)[:160]}): train it again "
                "with `codeexecutor train-values --out DIR`, or give another folder"
            ) from None

    def _load(self, path: str) -> None:
        import torch

        self.torch = torch
        self.path = path
        with open(os.path.join(path, "config.json")) as f:
            self.config = json.load(f)
        self.arch = self.config.get("arch", "transformer")
        if self.arch == "features":
            from safetensors.torch import load_file

            c = self.config
            if c.get("feature_set", 1) != FEATURE_SET:
                raise UsageError(
                    f"{path}: a value model of feature set {c.get('feature_set', 1)}, and this version reads "
                    f"set {FEATURE_SET}: train it again with `codeexecutor train-values --out DIR`"
                )
            self.kinds = list(c["kinds"])
            self.model = feature_classifier(c["buckets"], c["dim"], c["hidden"], len(self.kinds))
            weights = load_file(os.path.join(path, "model.safetensors"))
            self.model.load_state_dict(dequantized(weights))
            self.model.eval()
        else:
            from transformers import PreTrainedTokenizerFast, RobertaForSequenceClassification

            self.tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
            self.model = RobertaForSequenceClassification.from_pretrained(path).eval()
            self.kinds = [self.model.config.id2label[i] for i in range(self.model.config.num_labels)]
        self.frequency = read_table(path, "frequency.json")
        self.literals = read_table(path, "literals.json")

    def probabilities(self, uses: list[tuple[str, str, str, str]]):
        """(n, kinds) probabilities for (name, use, before, after) tuples."""
        with self.torch.inference_mode():
            if self.arch == "features":
                buckets = self.config["buckets"]
                logits = self.model(*bag_batch([hashed(features(*u), buckets) for u in uses]))
            else:
                ids, mask = batch(self.tokenizer, [encode(self.tokenizer, *u) for u in uses])
                logits = self.model(input_ids=ids, attention_mask=mask).logits
        return logits.float().softmax(-1)


def save_features(model, out: str, buckets: int, dim: int, hidden: int) -> None:
    """A feature classifier's config and fp16 weights into the folder `out`."""
    from safetensors.torch import save_file

    config = {MARKER: True, "arch": "features", "buckets": buckets, "dim": dim, "hidden": hidden, "kinds": list(KINDS)}
    config["feature_set"] = FEATURE_SET
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file(quantized(model.state_dict()), os.path.join(out, "model.safetensors"))


def quantized(state: dict) -> dict:
    """The feature embeddings as int8 codes with a float16 scale a row (`bag.weight.int8`,
    `bag.weight.scale`: a quarter of their float32 size, so that the folder stays small
    beside what a GPU call carries); the MLP in float16."""
    import torch

    out = {}
    for k, v in state.items():
        v = v.detach().float()
        if k == "bag.weight":
            scale = v.abs().amax(1, keepdim=True).clamp_min(1e-8) / 127.0
            out[k + ".int8"] = (v / scale).round().clamp(-127, 127).to(torch.int8).contiguous()
            out[k + ".scale"] = scale.half().contiguous()
        else:
            out[k] = v.half().contiguous()
    return out


def dequantized(weights: dict) -> dict:
    state = {k: v.float() for k, v in weights.items() if not k.endswith((".int8", ".scale"))}
    for k in [k for k in weights if k.endswith(".int8")]:
        base = k[: -len(".int8")]
        state[base] = weights[k].float() * weights[base + ".scale"].float()
    return state


def read_table(path: str, name: str) -> dict:
    """A table of the folder: `name` (frequency.json, literals.json), stored gzipped as `name.gz`."""
    import gzip

    full = os.path.join(path, name + ".gz")
    if not os.path.exists(full):
        return {}
    try:
        with gzip.open(full, "rt", encoding="utf-8") as f:
            table = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{full}: unreadable ({exc.__class__.__name__}): train the value model again") from None
    if not isinstance(table, dict):
        raise UsageError(f"{full}: not a table (a JSON object): train the value model again")
    return table
