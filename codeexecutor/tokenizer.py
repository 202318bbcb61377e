"""Tokenizer (RoBERTa byte-level BPE) and the encoding of examples for the model.

With `init` (a local copy of microsoft/unixcoder-base, or a hub id) its tokenizer is
loaded; otherwise a byte-level BPE is trained with `tokenizers` on the datasets' model
inputs and targets. Either way the special tokens of SPEC §3 are added in the official
order, then ours (`<exception>`); every one is a single token.
"""

from __future__ import annotations

from typing import Iterable

import torch

from codeexecutor.format import SPECIAL_TOKENS

ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
UNIXCODER_SPECIALS = ["<mask0>", "<encoder-decoder>"]
STRUCTURAL = ("<state>", "</state>", "<dictsep>", ":")


def _added(tokens: list[str]):
    from tokenizers import AddedToken

    return [AddedToken(t, lstrip=True, rstrip=True, normalized=False, special=True) for t in tokens]


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=min_frequency,
                            special_tokens=ROBERTA_SPECIALS + UNIXCODER_SPECIALS)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                  pad_token="<pad>", mask_token="<mask>", model_max_length=1024)
    return add_special_tokens(tok)


def add_special_tokens(tok):
    """Add the UniXcoder mode tokens and SPEC §3 tokens that are missing, in order."""
    have = set(tok.get_vocab())
    missing = [t for t in UNIXCODER_SPECIALS + list(SPECIAL_TOKENS) if t not in have]
    if missing:
        tok.add_special_tokens({"additional_special_tokens": _added(missing)}, replace_extra_special_tokens=False)
    return tok


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    import codeexecutor.model  # noqa: F401  (registers the "codeexecutor" config type)

    return add_special_tokens(AutoTokenizer.from_pretrained(path))


def structural_ids(tok) -> list[int]:
    ids = [tok.convert_tokens_to_ids(t) for t in STRUCTURAL[:3]]
    colon = tok.encode(" :", add_special_tokens=False) + tok.encode(":", add_special_tokens=False)
    return sorted(set(ids + colon))


class Encoder:
    """Turns (model input, model target) strings into truncated id lists and batches."""

    def __init__(self, tok, max_code_length: int = 256, max_trace_length: int = 768) -> None:
        self.tok = tok
        tok.model_max_length = 1 << 30  # we truncate code and trace ourselves; no length warning
        self.max_code = max_code_length
        self.max_trace = max_trace_length
        self.bos, self.eos, self.pad = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
        self.mode = tok.convert_tokens_to_ids("<encoder-decoder>")
        self.mask0 = tok.convert_tokens_to_ids("<mask0>")

    def code(self, text: str) -> list[int]:
        body = self.tok.encode(text, add_special_tokens=False)[: self.max_code - 4]
        return [self.bos, self.mode, self.eos] + body + [self.eos]

    def trace(self, text: str) -> list[int]:
        body = self.tok.encode(text, add_special_tokens=False)[: self.max_trace - 1]
        return [self.mask0] + body + [self.eos]

    def encode_batch(self, inputs: list[str], targets: list[str]) -> dict:
        return {"code_ids": [self.code(t) for t in inputs], "trace_ids": [self.trace(t) for t in targets]}

    def collate(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        return {**pad([r["code_ids"] for r in rows], self.pad, "code"), **pad([r["trace_ids"] for r in rows], self.pad, "trace")}

    def decode(self, ids: list[int]) -> str:
        """Generated trace ids (without <mask0>, up to </s>) back to format text."""
        if self.eos in ids:
            ids = ids[: ids.index(self.eos)]
        return self.tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def pad(seqs: list[list[int]], pad_id: int, name: str) -> dict[str, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return {f"{name}_ids": ids, f"{name}_mask": mask}
