"""A run's format profile, tokenizer and model, from its curriculum (and its `init`)."""

from __future__ import annotations

import json
import os

from codeexecutor.atomic import replacing
from codeexecutor.training.config import Curriculum


def resolve_profile(cur: Curriculum):
    """The run's format profile (`Curriculum.profile`)."""
    return cur.profile()


def build_tokenizer(cur: Curriculum, base_dir: str, out: str, rank: int, profile):
    import torch.distributed as dist

    from codeexecutor.modeling.tokenizer import load_tokenizer

    path = os.path.join(out, "tokenizer")
    if not (cur.model.tokenizer or cur.model.init):
        from codeexecutor.training.tokenized import is_tokenized

        tokenized = [s.path for st in cur.stages for s in st.sources if is_tokenized(os.path.join(base_dir, s.path))]
        if tokenized:
            from codeexecutor.errors import ConfigError

            raise ConfigError(f"{tokenized[0]} is tokenized: set model.tokenizer to the tokenizer it was made with")
    if not os.path.isdir(path):
        if rank == 0:
            if cur.model.tokenizer or cur.model.init:
                from codeexecutor.modeling.loading import resolve

                tok = load_tokenizer(
                    resolve(cur.model.tokenizer or cur.model.init),
                    exception=profile.exception_step,
                    delta=profile.delta,
                )
            else:  # the one tokenizer trainer: a bounded sample of the sources (training/tokenized.py)
                from codeexecutor.training.tokenized import train_curriculum_tokenizer

                train_curriculum_tokenizer(cur, base_dir, path, cur.tokenizer.sample)
                tok = None
            if tok is not None:
                with replacing(path) as tmp:
                    tok.save_pretrained(tmp)
        dist.barrier()
    return load_tokenizer(path, exception=profile.exception_step, delta=profile.delta)


def traced_python(cur: Curriculum) -> str | None:
    """The interpreters whose traces a curriculum trains on ("3.11"; None where its builds
    predate the record), saved in the model's config as `trace_python`."""
    from codeexecutor.execution.interpreters import dataset_python

    found = {dataset_python(src.path) for stage in cur.stages for src in stage.sources}
    found.discard(None)
    return ", ".join(sorted(found)) or None


def action_build(path: str, base_dir: str = ".") -> dict | None:
    """The stats of the `codeexecutor build actions` that made the source `path` (its
    stats.json says kind `actions`; a tokenized folder is followed to the dataset it was made
    from), or None: a source of whole traces."""
    from codeexecutor.training.tokenized import MARKER, is_tokenized

    path = os.path.join(base_dir, path)
    if is_tokenized(path):
        with open(os.path.join(path, MARKER)) as f:
            path = json.load(f).get("source") or path
    for folder in (path, os.path.dirname(path)):
        stats = os.path.join(folder, "stats.json")
        if os.path.isfile(stats):
            try:
                with open(stats) as f:
                    found = json.load(f)
            except (OSError, ValueError):
                return None
            return found if isinstance(found, dict) and found.get("kind") == "actions" else None
    return None


def action_sources(cur: Curriculum, base_dir: str = ".") -> dict[str, dict]:
    """Source path -> its action build's stats, for the sources that hold debugger action rows."""
    out = {}
    for src in (src for stage in cur.stages for src in stage.sources):
        found = action_build(src.path, base_dir)
        if found is not None:
            out[src.path] = found
    return out


def check_action_sources(cur: Curriculum, profile, base_dir: str = ".") -> None:
    """One line (ConfigError) where a curriculum cannot train on its action rows: rows drawn in
    another step order than the run's profile writes, a run without packed rows (only they
    take the loss off the given steps: modeling/rows.py), or an action source mined for its
    hardest rows (their loss would be the given steps')."""
    from codeexecutor.errors import ConfigError

    for stage in cur.stages:
        for src in stage.sources:
            found = action_build(src.path, base_dir)
            if found is None:
                continue
            if found.get("order", "end") != profile.order:
                raise ConfigError(
                    f"{src.path} holds debugger actions in step order {found.get('order', 'end')} and the run writes "
                    f"{profile.order}: build them again with --order {profile.order}"
                )
            if not cur.train.max_tokens:
                raise ConfigError(
                    f"{src.path} holds debugger actions, which train only in packed rows: set train.max_tokens"
                )
            if src.hardest:
                raise ConfigError(f"stage {stage.name}: {src.path} holds debugger actions: leave out its `hardest`")


def trained_actions(cur: Curriculum, base_dir: str = ".") -> str | None:
    """ "taught" where a source holds the debugger's action rows, saved in the model's config
    as `debugger_actions`: the model can answer `debug --actions taught`."""
    return "taught" if action_sources(cur, base_dir) else None


def build_model(cur: Curriculum, tok, profile, base_dir: str = "."):
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel
    from codeexecutor.modeling.tokenizer import structural_ids

    settings = dict(
        trace_python=traced_python(cur),
        attention=cur.model.attention,
        max_code_length=cur.model.max_code_length,
        max_trace_length=cur.model.max_trace_length,
        structural_weight=cur.model.structural_weight,
        other_weight=cur.model.other_weight,
        structural_token_ids=structural_ids(tok),
        mask0_token_id=tok.convert_tokens_to_ids("<mask0>"),
        exception_weight=cur.model.exception_weight,
        exception_token_id=tok.convert_tokens_to_ids("<exception>") if profile.exception_step else None,
        **profile.to_config(),
    )
    settings["debugger_actions"] = trained_actions(cur, base_dir)  # None: a taught init continued on whole traces only
    if cur.model.init:  # any supported layout; embeddings resized to the tokenizer (<exception>, format tokens)
        from codeexecutor.modeling.loading import load_model

        model = load_model(cur.model.init, vocab_size=len(tok), overrides=settings)
        if cur.model.attention == "flex" and model.config.attention_probs_dropout_prob > 0:
            from codeexecutor.errors import ConfigError

            raise ConfigError(
                f"model.attention flex takes no attention dropout and {cur.model.init} has "
                f"{model.config.attention_probs_dropout_prob}: use model.attention: sdpa with it"
            )
        return model
    cfg = CodeExecutorConfig.preset(
        cur.model.preset,
        vocab_size=len(tok),
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        hidden_dropout_prob=cur.model.dropout,
        attention_probs_dropout_prob=cur.model.dropout,
        positions=cur.model.positions,
        **_position_limit(cur),
        **settings,
    )
    cfg._attn_implementation = "sdpa"
    return CodeExecutorModel(cfg)


def _position_limit(cur: Curriculum) -> dict:
    """Rotary positions have no table to outgrow: their limit is raised to the longest
    example (a 512-token code window beside 768 trace tokens), where the release's
    absolute table stops at 1,024 positions."""
    longest = cur.model.max_code_length + cur.model.max_trace_length + 2  # RoBERTa's positions start at 2
    return {"max_position_embeddings": longest} if cur.model.positions == "rotary" and longest > 1026 else {}


def autocast(kind: str | None, device):
    """The forward pass's precision context: bfloat16 autocast for `train.autocast: bf16`
    (the weights stay float32), else float32 as is."""
    import torch

    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=kind == "bf16")
