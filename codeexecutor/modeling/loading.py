"""Loading a model for generation or as a training `init`, whatever its layout.

Two layouts load as `CodeExecutorModel`:

* ours: `save_pretrained` of `CodeExecutorModel` (`model_type: codeexecutor`, keys under
  `roberta.`, the format profile in the config);
* a plain RoBERTa folder (`model_type: roberta`, unprefixed keys): the released
  `microsoft/codeexecutor` (legacy tokenizer files, the release's `official` format)
  or `microsoft/unixcoder-base` (no format tokens yet).

`--model` takes a folder or a hub id. A hub id is resolved through the local Hugging
Face cache first and the hub second; when neither has it the error says how to fetch
the folder on a connected machine. Every weight that generation uses must be in the
checkpoint: a missing one is an error, never a silently random layer.
"""

from __future__ import annotations

import json
import os
import re

from codeexecutor.errors import UsageError

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_NOT_CARRIED = {
    "model_type",
    "architectures",
    "transformers_version",
    "is_decoder",
    "add_cross_attention",
    "_name_or_path",
    "auto_map",
    "dtype",
    "torch_dtype",
}
_WEIGHTS = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "model.int8.safetensors",
)  # the last: int8 codes a row (modeling/int8.py), what the repository ships


def resolve(name: str) -> str:
    """A local model folder for a folder path or a hub id; UsageError naming the fix otherwise."""
    if os.path.isdir(name):
        return name
    if os.path.exists(name):
        raise UsageError(
            f"{name} is a file; --model takes a model folder (config.json, weights, tokenizer) or a hub id"
        )
    head = name.split("/", 1)[0]
    if not _HUB_ID.match(name) or os.path.isdir(head) or name.startswith("."):
        raise UsageError(
            f"no model at {name}: run `make demo` (it trains a demo model into demo_out/pretrain/final), "
            "pass --model DIR (a folder saved by codeexecutor training or a released checkpoint) or a hub id"
        )
    try:
        from huggingface_hub import snapshot_download

        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")  # read now, not at import
        return snapshot_download(
            name,
            cache_dir=os.environ.get("HF_HUB_CACHE") or None,
            local_files_only=offline,
            allow_patterns=["*.json", "*.txt", "*.safetensors", "*.bin", "*.model"],
        )
    except Exception as exc:  # offline, unreachable, unknown repo: all end the same way for the user
        raise UsageError(
            f"cannot get {name} from the Hugging Face hub ({type(exc).__name__}): on a connected machine run "
            f"`hf download {name} --local-dir {name.split('/')[-1]}`, copy that folder here and pass "
            f"--model {name.split('/')[-1]}"
        ) from None


def read_config(path: str) -> dict:
    cfg_path = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_path):
        raise UsageError(f"{path} has no config.json: not a model folder (expected one written by save_pretrained)")
    try:
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{cfg_path} is not valid JSON ({exc}); restore it from the model's source") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"{cfg_path} is not a JSON object; restore it from the model's source")
    if not any(os.path.exists(os.path.join(path, w)) for w in _WEIGHTS):
        raise UsageError(f"{path} has no weights ({' or '.join(_WEIGHTS[:2])}); copy the whole model folder")
    return cfg


def folder_profile(path: str, cfg: dict) -> str | None:
    """The format profile a checkpoint folder was trained for: its config's field; else
    `official` when its vocabulary has the release's tokens (the released checkpoint);
    else None (a bare encoder such as UniXcoder: the curriculum decides)."""
    if cfg.get("format_profile"):
        return cfg["format_profile"]
    for name in ("added_tokens.json", "tokenizer.json", "vocab.json"):
        file = os.path.join(path, name)
        if os.path.isfile(file):
            with open(file, encoding="utf-8") as f:
                if '"<line>"' in f.read():
                    return "official"
    return None


def _int8_only(path: str) -> bool:
    from codeexecutor.modeling.int8 import INT8_FILE

    return os.path.isfile(os.path.join(path, INT8_FILE)) and not any(
        os.path.exists(os.path.join(path, w)) for w in _WEIGHTS if w != INT8_FILE
    )


def _load_int8(path: str, dtype):
    """A folder whose weights are int8 codes: the model built from its config, the weights
    multiplied back into float32 and loaded; (model, {"missing_keys": ...}) as
    from_pretrained's loading info."""
    from codeexecutor.modeling.int8 import INT8_FILE, load_int8
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel

    config = CodeExecutorConfig.from_pretrained(path)
    model = CodeExecutorModel(config)
    result = model.load_state_dict(load_int8(os.path.join(path, INT8_FILE)), strict=False)
    model.tie_lm_head()
    model.eval()
    return (model.to(dtype) if dtype is not None else model), {"missing_keys": list(result.missing_keys)}


def load_model(name: str, dtype=None, vocab_size: int | None = None, overrides: dict | None = None):
    """`CodeExecutorModel` from a folder or hub id in either layout. `vocab_size` resizes
    the embeddings (a training init whose tokenizer gained tokens); `overrides` set
    config fields (lengths, loss weights, profile) on a RoBERTa-layout checkpoint."""
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel

    path = resolve(name)
    cfg = read_config(path)
    kind = cfg.get("model_type")
    if kind == "codeexecutor":
        try:
            if _int8_only(path):
                model, info = _load_int8(path, dtype)
            else:
                model, info = CodeExecutorModel.from_pretrained(path, dtype=dtype, output_loading_info=True)
        except (OSError, ValueError, RuntimeError) as exc:
            raise UsageError(f"cannot load the model in {path}: {str(exc).splitlines()[0]}") from None
        missing = [
            k for k in info.get("missing_keys", ()) if not k.startswith("lm_head.") and not k.endswith("position_ids")
        ]
        if missing:
            raise UsageError(
                f"{path}: weights that generation uses are missing ({', '.join(sorted(missing)[:4])}); "
                "the checkpoint is incomplete: copy it again"
            )
        if vocab_size and vocab_size != model.config.vocab_size:
            model.resize_token_embeddings(vocab_size)
            model.tie_lm_head()
        for k, v in (overrides or {}).items():
            setattr(model.config, k, v)
        return model
    if kind not in ("roberta",):
        raise UsageError(
            f"{path}: model_type {kind!r} is not supported; expected codeexecutor or roberta "
            "(microsoft/codeexecutor, microsoft/unixcoder-base)"
        )
    from transformers import RobertaModel
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the pooler is unused and not loaded: no load report for it
    try:
        encoder, info = RobertaModel.from_pretrained(
            path, add_pooling_layer=False, output_loading_info=True, dtype=dtype
        )
    except (OSError, ValueError, RuntimeError) as exc:
        raise UsageError(f"cannot load the RoBERTa checkpoint in {path}: {str(exc).splitlines()[0]}") from None
    finally:
        hf_logging.set_verbosity(level)
    missing = [k for k in info.get("missing_keys", ()) if not k.endswith("position_ids")]
    if missing:
        raise UsageError(
            f"{path}: weights that generation uses are missing ({', '.join(sorted(missing)[:4])}); "
            "the checkpoint is incomplete: copy it again"
        )
    profile = folder_profile(path, cfg)
    settings = {"format_profile": profile or "exact", **(overrides or {})}
    base = {k: v for k, v in encoder.config.to_dict().items() if k not in _NOT_CARRIED}
    config = CodeExecutorConfig(**{**base, "vocab_size": vocab_size or encoder.config.vocab_size, **settings})
    config._attn_implementation = "sdpa"
    model = CodeExecutorModel.from_encoder(encoder, config)
    return model.to(dtype) if dtype is not None else model
