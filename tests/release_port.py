"""Test-only port of the released CodeExecutor inference, on CPU.

Written from the release's `inference/{dataset,model,run}.py` (microsoft/CodeBERT,
CodeExecutor/), independently of our generation code, to check that a checkpoint in the
released layout generates through `TraceGenerator` exactly what the release generates:

* `SlowTokenizer`: the slow `RobertaTokenizer`'s handling of added tokens (split the
  text at them, strip the whitespace around them; decode joins them with spaces), over
  the plain byte-level BPE of the legacy files.
* `source_ids`: `TextDataset.__getitem__` (251 body tokens, `<mask0> </s>`, padded to 256).
* `Seq2Seq.generate` + `Beam`: the source encoded once and its keys/values cut to its
  length and repeated per beam; at each step the *whole target prefix* is run again
  against that source cache, with RoBERTa computing positions from the ids and the
  mask `bias[:, S:S+T, :S+T] & ids.ne(1)`; OpenNMT-style `Beam` bookkeeping.
* `run.eval`: the best hypothesis, cut at id 0, decoded.
"""

from __future__ import annotations

import json
import pathlib
import re

import torch


class SlowTokenizer:
    """Encode/decode as the release's slow RobertaTokenizer did with its legacy files."""

    def __init__(self, path: pathlib.Path) -> None:
        from transformers import AutoTokenizer

        self.bpe = AutoTokenizer.from_pretrained(str(path))  # only used on text without added tokens
        self.added = json.loads((path / "added_tokens.json").read_text())  # token -> id
        self.by_id = {i: t for t, i in self.added.items()}
        vocab = json.loads((path / "vocab.json").read_text())
        self.vocab = {**vocab, **self.added}
        no_split = sorted(list(self.added) + ["<s>", "</s>", "<pad>", "<unk>"], key=len, reverse=True)
        self.split_re = re.compile("(" + "|".join(re.escape(t) for t in no_split) + ")")
        self.no_split = set(no_split)

    def encode(self, text: str) -> list[int]:
        pieces = self.split_re.split(text)
        for i, piece in enumerate(pieces):  # tokenize(): "We strip left and right by default"
            if piece in self.no_split:
                if i > 0:
                    pieces[i - 1] = pieces[i - 1].rstrip()
                if i + 1 < len(pieces):
                    pieces[i + 1] = pieces[i + 1].lstrip()
        ids = []
        for piece in pieces:
            if piece in self.no_split:
                ids.append(self.vocab[piece])
            elif piece:
                ids += self.bpe.encode(piece, add_special_tokens=False)
        return ids

    def decode(self, ids: list[int]) -> str:
        parts, run = [], []
        for i in ids:
            if i in self.by_id:
                if run:
                    parts.append(self.bpe.decode(run, clean_up_tokenization_spaces=False))
                    run = []
                parts.append(self.by_id[i])
            else:
                run.append(i)
        if run:
            parts.append(self.bpe.decode(run, clean_up_tokenization_spaces=False))
        return " ".join(parts)


def source_ids(tok: SlowTokenizer, code_text: str, max_source_length: int = 256) -> list[int]:
    """inference/dataset.py: tokens of the code (task token included), cut to
    max_source_length - 5, framed <s> <encoder-decoder> </s> ... <mask0> </s>, padded."""
    body = tok.encode(code_text)[: max_source_length - 5]
    ids = (
        [tok.vocab["<s>"], tok.vocab["<encoder-decoder>"], tok.vocab["</s>"]]
        + body
        + [tok.vocab["<mask0>"], tok.vocab["</s>"]]
    )
    return ids + [tok.vocab["<pad>"]] * (max_source_length - len(ids))


class PortBeam:
    """The release's `Beam`, on CPU tensors."""

    def __init__(self, size: int, sos: int, eos: int) -> None:
        self.size = size
        self.scores = torch.zeros(size)
        self.prevKs: list[torch.Tensor] = []
        self.nextYs = [torch.zeros(size, dtype=torch.long)]
        self.nextYs[0][0] = sos
        self._eos = eos
        self.eosTop = False
        self.finished: list = []

    def getCurrentState(self) -> torch.Tensor:
        return self.nextYs[-1].clone().view(-1, 1)

    def getCurrentOrigin(self) -> torch.Tensor:
        return self.prevKs[-1]

    def advance(self, wordLk: torch.Tensor) -> None:
        numWords = wordLk.size(1)
        if len(self.prevKs) > 0:
            beamLk = wordLk + self.scores.unsqueeze(1).expand_as(wordLk)
            for i in range(self.nextYs[-1].size(0)):
                if self.nextYs[-1][i] == self._eos:
                    beamLk[i] = -1e20
        else:
            beamLk = wordLk[0]
        flatBeamLk = beamLk.view(-1)
        bestScores, bestScoresId = flatBeamLk.topk(self.size, 0, True, True)
        self.scores = bestScores
        prevK = bestScoresId // numWords
        self.prevKs.append(prevK)
        self.nextYs.append(bestScoresId - prevK * numWords)
        for i in range(self.nextYs[-1].size(0)):
            if self.nextYs[-1][i] == self._eos:
                self.finished.append((self.scores[i], len(self.nextYs) - 1, i))
        if self.nextYs[-1][0] == self._eos:
            self.eosTop = True

    def done(self) -> bool:
        return self.eosTop and len(self.finished) >= self.size

    def getFinal(self) -> list:
        if len(self.finished) == 0:
            self.finished.append((self.scores[0], len(self.nextYs) - 1, 0))
        self.finished.sort(key=lambda a: -a[0])
        if len(self.finished) != self.size:
            unfinished = [
                (self.scores[i], len(self.nextYs) - 1, i)
                for i in range(self.nextYs[-1].size(0))
                if self.nextYs[-1][i] != self._eos
            ]
            unfinished.sort(key=lambda a: -a[0])
            self.finished += unfinished[: self.size - len(self.finished)]
        return self.finished[: self.size]

    def getHyp(self, beam_res: list) -> list[list[int]]:
        hyps = []
        for _, timestep, k in beam_res:
            hyp = []
            for j in range(len(self.prevKs[:timestep]) - 1, -1, -1):
                hyp.append(int(self.nextYs[j + 1][k]))
                k = self.prevKs[j][k]
            hyps.append(hyp[::-1])
        return hyps

    def buildTargetTokens(self, preds: list[list[int]]) -> list[list[int]]:
        out = []
        for pred in preds:
            tokens = []
            for t in pred:
                if t == self._eos:
                    break
                tokens.append(t)
            out.append(tokens)
        return out


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    out = torch.zeros(mask.shape, dtype=dtype)
    out.masked_fill_(~mask, torch.finfo(dtype).min)
    return out[:, None]  # (B, 1, Q, K)


@torch.no_grad()
def release_generate(encoder, source: list[int], beam_size: int, max_length: int, sos: int, eos: int) -> list[int]:
    """Seq2Seq.generate for one program; the best hypothesis's ids (without </s>)."""
    from transformers.cache_utils import DynamicCache

    dtype = next(encoder.parameters()).dtype
    source_ids = torch.tensor([source])
    bias = torch.tril(torch.ones((1024, 1024), dtype=torch.uint8)).view(1, 1024, 1024)
    mask = source_ids.ne(1)[:, None, :] * source_ids.ne(1)[:, :, None]
    encoder_output = encoder(source_ids, attention_mask=_additive(mask, dtype), use_cache=True)
    source_len = int(source_ids.ne(1).sum())
    context_kv = [
        (
            layer.keys[:, :, :source_len].repeat(beam_size, 1, 1, 1),
            layer.values[:, :, :source_len].repeat(beam_size, 1, 1, 1),
        )
        for layer in encoder_output.past_key_values.layers
    ]
    beam = PortBeam(beam_size, sos, eos)
    input_ids = beam.getCurrentState()
    context_ids = source_ids[:, :source_len].repeat(beam_size, 1)
    for _ in range(max_length):
        if beam.done():
            break
        ids = torch.cat((context_ids, input_ids), -1)
        mask = bias[:, context_ids.size(-1) : ids.size(-1), : ids.size(-1)].bool()
        mask = mask & ids[:, None, :].ne(1)
        context = DynamicCache()  # the source keys/values, fresh each step: the target prefix is recomputed
        for i, (k, v) in enumerate(context_kv):
            context.update(k.clone(), v.clone(), i)
        out = encoder(input_ids, attention_mask=_additive(mask, dtype), past_key_values=context).last_hidden_state
        hidden_states = out[:, -1, :]
        logits = hidden_states @ encoder.embeddings.word_embeddings.weight.T  # lm_head: tied, no bias
        beam.advance(torch.log_softmax(logits, dim=-1))
        input_ids = input_ids.index_select(0, beam.getCurrentOrigin())
        input_ids = torch.cat((input_ids, beam.getCurrentState()), -1)
    hyp = beam.getHyp(beam.getFinal())
    pred = beam.buildTargetTokens(hyp)[0]
    return pred[: pred.index(0)] if 0 in pred else pred  # run.eval: cut at id 0


def load_release_encoder(path: pathlib.Path, dtype=torch.float64):
    from transformers import RobertaConfig, RobertaModel

    config = RobertaConfig.from_pretrained(str(path))
    config.is_decoder = True  # inference/run.py
    encoder = RobertaModel.from_pretrained(str(path), config=config, attn_implementation="eager")
    return encoder.to(dtype).eval()
