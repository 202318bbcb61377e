"""Tokenizer (RoBERTa byte-level BPE) and the encoding of examples for the model.

With `init` (a local copy of microsoft/unixcoder-base or microsoft/codeexecutor, or a
hub id) its tokenizer is loaded; otherwise a byte-level BPE is trained with `tokenizers`
on the datasets' model inputs and targets. Either way the format's special tokens (docs/trace-format.md) are
added in the official order, then ours (`<exception>`); every one is a single token.

The released checkpoint ships legacy slow-tokenizer files, and its slow
`RobertaTokenizer` stripped the spaces around added tokens when encoding
(`"<line> <0> <state> s : 1"` -> `<line> <0> <state> s Ġ: Ġ1`) and put spaces around
them when decoding. A fast tokenizer built from those files by current transformers
does neither, so `load_tokenizer` marks every special token of the format as stripping
(lstrip/rstrip) and `Encoder.decode` joins decoded text the release's way. Our own
trained tokenizers get the same treatment, so every model encodes alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from codeexecutor.modeling.compact import DELTA
from codeexecutor.modeling.format import ACTION_MARKER, LINE_TOKENS, OFFICIAL_SPECIAL_TOKENS, SPECIAL_TOKENS
from codeexecutor.modeling.profiles import Profile

ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
UNIXCODER_SPECIALS = ["<mask0>", "<encoder-decoder>"]
STRUCTURAL = ("<state>", "</state>", "<dictsep>", ":")


def _added(tokens: list[str]):
    from tokenizers import AddedToken

    return [AddedToken(t, lstrip=True, rstrip=True, normalized=False, special=True) for t in tokens]


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 8000,
    min_frequency: int = 2,
    split_digits: bool = False,
    delta: bool = False,
):
    """A byte-level BPE trained on `texts`. `split_digits`: every digit is a token of its
    own (numbers never merge into pieces like `2019`), which makes arithmetic on values
    something a model can learn digit by digit; traces get longer where they hold numbers."""
    from tokenizers import ByteLevelBPETokenizer, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    if split_digits:
        bpe._tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
        )
    bpe.train_from_iterator(
        texts, vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=ROBERTA_SPECIALS + UNIXCODER_SPECIALS
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=1024,
    )
    return add_special_tokens(tok, delta=delta)


def add_special_tokens(tok, exception: bool = True, delta: bool = False):
    """Add the UniXcoder mode tokens and the format's tokens that are missing, in order
    (`<delta>` only for compact traces, so a full-state model's vocabulary stays the release's),
    and make every format token strip the spaces around it (the release's encoding)."""
    wanted = (
        list(OFFICIAL_SPECIAL_TOKENS + LINE_TOKENS)
        + (["<exception>"] if exception else [])
        + ([DELTA] if delta else [])
    )
    have = set(tok.get_vocab())
    missing = [t for t in UNIXCODER_SPECIALS + wanted if t not in have]
    if missing:
        tok.add_special_tokens({"additional_special_tokens": _added(missing)}, replace_extra_special_tokens=False)
    vocab = tok.get_vocab()
    plain = [t for t in ("<s>", "</s>", "<pad>", "<unk>") if t in vocab]  # strings, not AddedTokens, in the release
    tok._tokenizer.add_special_tokens(
        _added(plain + [t for t in SPECIAL_TOKENS if t in vocab])
    )  # same ids; strip flags
    return tok


def load_tokenizer(path: str, exception: bool = True, delta: bool = False):
    """A saved tokenizer (ours, UniXcoder's or the release's legacy files) with the format's
    tokens; `exception=False` leaves out `<exception>` (the released model has none),
    `delta=True` adds `<delta>` (compact traces)."""
    from transformers import AutoTokenizer

    import codeexecutor.modeling.model  # noqa: F401  (registers the "codeexecutor" config type)

    return add_special_tokens(AutoTokenizer.from_pretrained(path), exception, delta)


def structural_ids(tok) -> list[int]:
    ids = [tok.convert_tokens_to_ids(t) for t in STRUCTURAL[:3]]
    colon = tok.encode(" :", add_special_tokens=False) + tok.encode(":", add_special_tokens=False)
    return sorted(set(ids + colon))


class Encoder:
    """Turns (model input, model target) strings into truncated id lists and batches, in
    the source/target layout of a format profile.

    source: <s> <encoder-decoder> </s> body </s>            exact (body <= max_code - 4)
            <s> <encoder-decoder> </s> body <mask0> </s>    official (body <= max_code - 5 = 251)
    target: <mask0> body </s>                               body <= max_trace - 2 (766: the
                                                            release cuts gold there)
    """

    def __init__(
        self, tok, max_code_length: int = 256, max_trace_length: int = 768, profile: Profile | None = None
    ) -> None:
        self.tok = tok
        tok.model_max_length = 1 << 30  # we truncate code and trace ourselves; no length warning
        self.profile = profile or Profile()
        self.max_code = max_code_length
        self.max_trace = max_trace_length
        self.code_body = max_code_length - (5 if self.profile.official else 4)
        self.bos, self.eos, self.pad = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
        self.mode = tok.convert_tokens_to_ids("<encoder-decoder>")
        self.mask0 = tok.convert_tokens_to_ids("<mask0>")
        vocab = tok.get_vocab()
        self.added = {vocab[t]: t for t in SPECIAL_TOKENS if t in vocab}  # joined with spaces when decoding
        self.line_id = vocab.get("<line>")
        self.exception_id = vocab.get("<exception>")
        self.line_ids = frozenset(vocab[t] for t in LINE_TOKENS if t in vocab)  # the code's per-line `<k>`
        # a debugger action's marker, and the ids a step starts with: a row's loss starts at the landing
        starts = frozenset(t for t in (self.line_id, self.exception_id) if t is not None)
        self.action_ids = (vocab[ACTION_MARKER], starts) if ACTION_MARKER in vocab else None

    def ids(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def ids_batch(self, texts: list[str]) -> list[list[int]]:
        """`ids` of many texts in one call of the Rust tokenizer (a fast tokenizer's
        `encode` is this call on one text, through a Python wrapper that costs more than
        the encoding of a short text)."""
        if getattr(self.tok, "is_fast", False) and texts:
            return [e.ids for e in self.tok.backend_tokenizer.encode_batch(texts, add_special_tokens=False)]
        return [self.ids(t) for t in texts]

    def code(self, text: str, ids: list[int] | None = None) -> list[int]:
        """The model's source ids of a code text (`ids`: its ids, already encoded)."""
        body = self.window(self.ids(text) if ids is None else ids)
        tail = [self.mask0, self.eos] if self.profile.official else [self.eos]  # inference/dataset.py: <mask0> </s>
        return [self.bos, self.mode, self.eos] + body + tail

    def window(self, ids: list[int]) -> list[int]:
        """The code tokens the model reads: all that fit; past the code length, the first
        ones (`head`, the release's cut) or the first ones and the program's last whole
        lines within a quarter of the length (`ends`: a module's final call and its
        arguments stay in view). The tail starts at a line's `<k>`, so its line numbers
        are still read; a last line longer than half the length keeps its end only."""
        head, tail = self._cut(ids)
        return ids[:head] + ids[tail:]

    def _cut(self, ids: list[int]) -> tuple[int, int]:
        """(h, t): the window is ids[:h] + ids[t:]."""
        n, budget = len(ids), self.code_body
        if n <= budget:
            return n, n
        if self.profile.window == "head":
            return budget, n
        starts = [i for i, t in enumerate(ids) if t in self.line_ids]
        fits = [i for i in starts if n - i <= budget // 4]
        if fits:
            tail = fits[0]
        elif starts and n - starts[-1] <= budget // 2:
            tail = starts[-1]
        else:
            tail = n - budget // 4
        return budget - (n - tail), tail

    def unseen_lines(self, text: str) -> tuple[int, list[int]]:
        """(code tokens of a model input, its 0-based lines that the window leaves out
        wholly or in part): what the model predicts without reading."""
        ids = self.ids(text)
        head, tail = self._cut(ids)
        starts = [i for i, t in enumerate(ids) if t in self.line_ids]
        unseen = []
        for i, j in zip(starts, starts[1:] + [len(ids)]):  # line k's tokens are ids[i:j]
            if not (j <= head or i >= tail):
                unseen.append(int(self.tok.convert_ids_to_tokens(ids[i])[1:-1]))
        return len(ids), unseen

    def trace(self, text: str) -> list[int]:
        body = self.ids(text)[: self.max_trace - 2]
        return [self.mask0] + body + [self.eos]

    def fit_trace(self, text: str, ids: list[int] | None = None) -> tuple[list[int] | None, str]:
        """Training target ids that keep their label, and what was done to fit them:
        `whole`; `cut_at_step` (a long trace ends after its last whole step: never
        mid-step); `dropped_crash` (a crashing trace that does not fit: cutting it would
        drop its `<exception>` step or invent a crash after the wrong step); or
        `dropped_long_step` (not even the first step fits). `ids`: the text's ids, already encoded."""
        ids = self.ids(text) if ids is None else ids
        budget = self.max_trace - 2
        if len(ids) <= budget:
            return [self.mask0] + ids + [self.eos], "whole"
        if self.exception_id is not None and self.exception_id in ids:
            return None, "dropped_crash"
        cut = next((i for i in range(budget, 0, -1) if ids[i] == self.line_id), 0)  # before a step's <line>
        if cut == 0:
            return None, "dropped_long_step"
        return [self.mask0] + ids[:cut] + [self.eos], "cut_at_step"

    def gold(self, text: str) -> str:
        """A reference trace as the release scores it: BPE-tokenized, cut to
        max_trace - 2 (766) tokens, decoded."""
        return self.decode(self.ids(text)[: self.max_trace - 2], cut_at_bos=False)

    def scored(self, text: str) -> str:
        """A generated trace as the metric reads it: a delta model's answer (already
        expanded to whole states) cut like a reference, so it compares with a full-state
        model's; a full-state model's as generated."""
        return self.gold(text) if self.profile.delta else text

    def encode_batch(self, inputs: list[str], targets: list[str]) -> dict:
        return {"code_ids": [self.code(t) for t in inputs], "trace_ids": [self.trace(t) for t in targets]}

    def encode_rows(self, batch: Mapping[str, list]) -> dict:
        """A batch of dataset rows, serialized in this encoder's profile from their
        structured columns: ids, lengths, and how the target was fitted (`fit_trace`;
        dropped rows have empty trace ids)."""
        out: dict[str, list] = {"code_ids": [], "trace_ids": [], "code_len": [], "trace_len": [], "fit": []}
        pairs = self.profile.examples(batch)
        n = len(pairs)
        encoded = self.ids_batch([c for c, _ in pairs] + [t for _, t in pairs])  # one tokenizer call a batch
        for i, (code, target) in enumerate(pairs):
            code_ids = self.code(code, encoded[i])
            trace_ids, fit = self.fit_trace(target, encoded[n + i])
            out["code_ids"].append(code_ids)
            out["trace_ids"].append(trace_ids or [])
            out["code_len"].append(len(code_ids))
            out["trace_len"].append(len(trace_ids or []))
            out["fit"].append(fit)
        return out

    def collate(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        return {
            **pad([r["code_ids"] for r in rows], self.pad, "code"),
            **pad([r["trace_ids"] for r in rows], self.pad, "trace"),
        }

    def decode(self, ids: list[int], cut_at_bos: bool = True) -> str:
        """Generated trace ids (without <mask0>) back to format text, as the release does:
        up to </s>; up to <s> too (its predictions are cut at id 0, the padding it fills
        them with); the format's tokens joined to the decoded text between them by spaces
        (the slow tokenizer's decode)."""
        if self.eos in ids:
            ids = ids[: ids.index(self.eos)]
        if cut_at_bos and self.bos in ids:
            ids = ids[: ids.index(self.bos)]
        parts: list[str] = []
        run: list[int] = []
        for i in ids:
            if i in self.added:
                if run:
                    parts.append(self.tok.decode(run, skip_special_tokens=False, clean_up_tokenization_spaces=False))
                    run = []
                parts.append(self.added[i])
            else:
                run.append(i)
        if run:
            parts.append(self.tok.decode(run, skip_special_tokens=False, clean_up_tokenization_spaces=False))
        return " ".join(parts)


def pad(seqs: list[list[int]], pad_id: int, name: str) -> dict[str, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return {f"{name}_ids": ids, f"{name}_mask": mask}
