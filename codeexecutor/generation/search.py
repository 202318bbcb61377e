"""Trace generation: batched beam search that reuses the code's cached keys/values.

`TraceGenerator(model)` loads a model (our `save_pretrained` folder, the released
checkpoint's RoBERTa folder, or a hub id; modeling/loading.py) with its tokenizer and
format profile, and turns model-format code (`code_input`, docs/trace-format.md) into generated trace
text with its sequence log-probability.

The search follows the release's beam rules (generation/beam.py), so a released
checkpoint generates exactly what the release's own inference generates; what differs
is the work per step. The code of every program in a batch is encoded once; the cache
is expanded to `beam` rows per program and reordered as beams are chosen, so each step
runs the model on one new token per live hypothesis, and a program whose search is
done leaves the batch. `cache=False` is the slow reference (the whole prefix
recomputed at every step, one program at a time), kept for the benchmark and tests.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from transformers.cache_utils import DynamicLayer

from codeexecutor.generation.beam import Beam, select
from codeexecutor.generation.constraints import RowConstraints, StateRule, token_chars
from codeexecutor.generation.verdict import StepEnds


class _BeamLayer(DynamicLayer):
    """A key/value cache layer for beam search over a fixed code prefix.

    Buffers are preallocated for code + trace length, so a step writes in place instead
    of concatenating the whole cache; and reordering beams touches only the trace part:
    beams are only ever permuted among the beams of one program, whose code keys/values
    are identical, so positions before `frozen` never need to move.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int, frozen: int) -> None:
        super().__init__()
        N, H, L, D = keys.shape
        self.kbuf = keys.new_empty((N, H, capacity, D))
        self.vbuf = values.new_empty((N, H, capacity, D))
        self.kbuf[:, :, :L] = keys
        self.vbuf[:, :, :L] = values
        self.length, self.frozen = L, frozen
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self.keys, self.values = self.kbuf[:, :, :L], self.vbuf[:, :, :L]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        end = self.length + key_states.shape[-2]
        self.kbuf[:, :, self.length : end] = key_states
        self.vbuf[:, :, self.length : end] = value_states
        self.length = end
        self.keys, self.values = self.kbuf[:, :, :end], self.vbuf[:, :, :end]
        return self.keys, self.values

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        f, L = self.frozen, self.length
        if L > f:
            self.kbuf[:, :, f:L] = self.kbuf[:, :, f:L].index_select(0, beam_idx)
            self.vbuf[:, :, f:L] = self.vbuf[:, :, f:L].index_select(0, beam_idx)

    def keep_rows(self, rows: torch.LongTensor) -> None:
        """Drop the rows of programs whose search is done (the code part too)."""
        self.kbuf, self.vbuf = self.kbuf.index_select(0, rows), self.vbuf.index_select(0, rows)
        self.keys, self.values = self.kbuf[:, :, : self.length], self.vbuf[:, :, : self.length]


@dataclass
class Generated:
    text: str
    logprob: float
    tokens: int
    finished: bool = True  # False: cut at max_length before </s> (a looping or too-long trace)
    exception_peak: float | None = None  # highest <exception> margin at a step end (generation/verdict.py)
    exception_end: float | None = None  # the <exception> margin at the last step end
    compact: str | None = None  # a delta model's text as generated; `text` is its expansion to whole states
    expansion_problems: int = 0  # what the expansion could not read (modeling/compact.py)


class TraceGenerator:
    def __init__(self, model: str, device: str | None = None, dtype: torch.dtype | None = None) -> None:
        from codeexecutor.errors import UsageError
        from codeexecutor.modeling.loading import load_model, resolve
        from codeexecutor.modeling.profiles import profile_of
        from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer

        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        path = resolve(model)
        if dtype is None and self.device.type == "cpu":
            dtype = torch.float32  # a bf16 checkpoint decoded 1.75x slower in bf16 on an AVX2 CPU (docs/decoding.md)
        self.model = load_model(path, dtype=dtype).to(self.device).eval()
        cfg = self.model.config
        self.profile = profile_of(cfg)
        try:
            self.tok = load_tokenizer(path, exception=self.profile.exception_step, delta=self.profile.delta)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: no usable tokenizer ({str(exc).splitlines()[0]}); copy the model folder with its "
                             "tokenizer files") from None
        if len(self.tok) > cfg.vocab_size:
            raise UsageError(f"{path}: the tokenizer has {len(self.tok)} tokens but the model only {cfg.vocab_size}; "
                             "they do not belong together")
        self.encoder = Encoder(self.tok, cfg.max_code_length, cfg.max_trace_length, self.profile)

    @classmethod
    def from_model(cls, model, encoder, device) -> "TraceGenerator":
        """A generator over a model in memory (evaluation while training)."""
        gen = cls.__new__(cls)
        gen.model, gen.encoder, gen.tok, gen.profile = model, encoder, encoder.tok, encoder.profile
        gen.device = torch.device(device)
        return gen

    def code_input(self, source: str, task: str = "codenet") -> str:
        """A program in this model's format (its profile)."""
        return self.profile.code(source, task)

    def parse(self, text: str):
        return self.profile.parse(text)

    @torch.no_grad()
    def generate(self, inputs: list[str], beam: int = 10, max_length: int | None = None, batch_size: int = 8,
                 cache: bool = True, names: bool = False, values: bool = False,
                 exception_bias: float = 0.0, exception_at: str = "step", length_penalty: float = 0.0) -> list[Generated]:
        """Best hypothesis for each model-format code string, in input order. At most
        `max_length` tokens are generated (</s> included; default and cap: the model's
        max_trace_length, 768 as in the release). `names`: states may only name the
        code's identifiers, `values`: a value is at most as long as the tracer renders one
        (generation/constraints.py; the release has neither rule).
        `exception_bias`: added to `<exception>` at step ends (generation/verdict.py);
        each answer's `exception_peak` is recorded where the model has that step;
        `exception_at="end"`: only where the trace would end. `length_penalty`: the
        finished hypotheses are ranked by log-probability over length ** alpha
        (generation/beam.py; 0, the release's ranking, by default)."""
        from codeexecutor.errors import UsageError

        cap = self.model.config.max_trace_length
        max_length = min(max_length or cap, cap)
        if "<exception>" in self.tok.get_vocab():
            try:
                ends = StepEnds(self.tok, exception_bias, exception_at)
            except ValueError as exc:
                raise UsageError(f"{exc}; pass a number such as --exception-bias 2") from None
        elif exception_bias:
            raise UsageError("this model has no <exception> step (the release's format), so an exception bias has "
                             "nothing to act on; leave --exception-bias out")
        else:
            ends = None
        rule = self._rules(names, values)
        if not cache:
            return self._expanded([self._beam_no_cache(self.encoder.code(text), beam, max_length,
                                                       rule(text) if rule else None, ends, length_penalty)
                                   for text in inputs])
        out: list[Generated] = []
        for i in range(0, len(inputs), batch_size):
            chunk = inputs[i : i + batch_size]
            rules = [rule(t) for t in chunk] if rule else None
            out += self._beam([self.encoder.code(t) for t in chunk], beam, max_length, rules, ends, length_penalty)
        return self._expanded(out)

    def _expanded(self, out: list[Generated]) -> list[Generated]:
        """A delta model's answers with whole states (`text`), what it wrote kept in `compact`."""
        if not self.profile.delta:
            return out
        for g in out:
            e = self.profile.expand(g.text)
            g.compact, g.text, g.expansion_problems = g.text, e.text, len(e.problems)
        return out

    def rules_apply(self) -> bool:
        """Whether the state rules can decode this model: a format of our own (the
        release's writes lexical values) whose tokenizer keeps ' :' one token (the name
        rule's end of a name)."""
        return not self.profile.official and self._one_colon()

    def _one_colon(self) -> bool:
        return len(self.tok.encode(" :", add_special_tokens=False)) == 1

    def _rules(self, names: bool, values: bool) -> functools.partial | None:
        """code -> its StateRule; None without rules."""
        from codeexecutor.errors import UsageError
        from codeexecutor.execution.render import DEFAULT_LIMIT, ELLIPSIS

        if not (names or values):
            return None
        if values and self.profile.official:
            raise UsageError("the release's format writes values as lexical tokens, whose length the tracer does not "
                             "bound; leave --constrain-values out for this model")
        chars = None
        if values:
            if getattr(self, "_chars", None) is None:
                self._chars = token_chars(self.tok)
            chars = self._chars
        if not self._one_colon():
            raise UsageError("this model's tokenizer splits ' :' in two, so the state rules cannot find a name's end; "
                             "leave --constrain-names and --constrain-values out for it")
        limit = DEFAULT_LIMIT + len(ELLIPSIS) if values else None
        return functools.partial(StateRule, self.tok, names=names, value_chars=limit, chars=chars)

    # -- cached, batched -------------------------------------------------------------------
    def _beam(self, codes: list[list[int]], size: int, max_length: int,
              rules: list[StateRule] | None = None, ends: StepEnds | None = None,
              length_penalty: float = 0.0) -> list[Generated]:
        from codeexecutor.modeling.tokenizer import pad

        m, enc, dev = self.model, self.encoder, self.device
        batch = pad(codes, enc.pad, "code")
        code_ids, code_mask = batch["code_ids"].to(dev), batch["code_mask"].to(dev)
        B, S = code_ids.shape
        kv, code_len = m.encode(code_ids, code_mask)
        kv.batch_repeat_interleave(size)  # (B*size, ...)
        kv.layers = [_BeamLayer(layer.keys, layer.values, S + max_length + 2, S) for layer in kv.layers]
        key_mask = code_mask.bool().repeat_interleave(size, 0)  # (B*size, S)
        code_len = code_len.repeat_interleave(size, 0)  # (B*size,)
        fed = torch.zeros_like(code_len)  # target tokens fed so far that are not <pad>
        tokens = torch.full((B * size,), enc.mask0, dtype=torch.long, device=dev)
        beams = [Beam(size, enc.eos, length_penalty) for _ in range(B)]
        alive = list(range(B))  # programs in the batch, in row order
        scores = None  # (A, size) the hypotheses' summed log-probabilities, on the device
        constraint = RowConstraints(rules, size) if rules else None
        for _ in range(max_length):
            # As the release: a generated <pad> is masked out as a key (ids.ne(1)) and gets
            # RoBERTa's padding position; later tokens' positions do not count it.
            real = tokens.ne(enc.pad)
            fed = fed + real
            positions = torch.where(real, code_len + fed - 1, -1)  # + 2 in decode_step: n+2, n+3, ...; <pad>: 1
            key_mask = torch.cat([key_mask, real[:, None]], 1)  # (A*size, S+step+1)
            logp = m.decode_step(tokens, kv, key_mask, positions)  # (A*size, V)
            if constraint:
                logp = constraint.mask(logp)
            margin = None
            if ends:
                logp, margin = ends(logp)
                margin = margin.view(len(alive), size).cpu()
            A = len(alive)
            ended = None if scores is None else tokens.view(A, size).eq(enc.eos)
            scores, back, token = select(logp.view(A, size, -1), scores, ended)
            host = torch.stack([back, token]).cpu()  # with the scores, the step's two copies to the host
            backs, toks, best = host[0].tolist(), host[1].tolist(), scores.cpu().tolist()
            for a, b in enumerate(alive):
                beams[b].record(best[a], backs[a], toks[a], None if margin is None else margin[a], host[0, a])
            if constraint:
                constraint.advance([o + a * size for a in range(A) for o in backs[a]], [t for row in toks for t in row])
            if size > 1:  # greedy search keeps every row where it is: nothing to reorder
                order = (back + torch.arange(A, device=dev)[:, None] * size).reshape(-1)
                kv.reorder_cache(order)
                key_mask, fed = key_mask[order], fed[order]
            tokens = token.reshape(-1)
            keep = [a for a, b in enumerate(alive) if not beams[b].done()]
            if len(keep) < len(alive):  # finished programs leave the batch
                if not keep:
                    break
                rows = torch.tensor([a * size + k for a in keep for k in range(size)], device=dev)
                for layer in kv.layers:
                    layer.keep_rows(rows)
                key_mask, code_len, fed, tokens = key_mask[rows], code_len[rows], fed[rows], tokens[rows]
                scores = scores[torch.tensor(keep, device=dev)]
                if constraint:
                    constraint.keep(rows.tolist())
                alive = [alive[a] for a in keep]
        results = []
        for b in range(B):
            score, ids = beams[b].best()
            results.append(Generated(enc.decode(ids), float(score), len(ids), beams[b].ended(), beams[b].peak(),
                                     beams[b].end()))
        return results

    # -- reference: no cache, one program at a time ---------------------------------------------
    def _beam_no_cache(self, code: list[int], size: int, max_length: int, rule: StateRule | None = None,
                       ends: StepEnds | None = None, length_penalty: float = 0.0) -> Generated:
        m, enc = self.model, self.encoder
        code_ids = torch.tensor([code], device=self.device)
        beam = Beam(size, enc.eos, length_penalty)
        rows = [[enc.mask0] for _ in range(size)]
        constraint = RowConstraints([rule], size) if rule else None
        for _ in range(max_length):
            trace = torch.tensor([r + [enc.pad] for r in rows], device=self.device)  # one slot for the next token
            out = m(code_ids.expand(size, -1), torch.ones_like(code_ids).expand(size, -1), trace, torch.ones_like(trace))
            logp = m.log_probs(out.logits[:, -1])  # (size, V)
            if constraint:
                logp = constraint.mask(logp)
            margin = None
            if ends:
                logp, margin = ends(logp)
            back = beam.advance(logp, margin)
            if constraint:
                constraint.advance(back.tolist(), beam.last_tokens())
            rows = [rows[k] + [t] for k, t in zip(back.tolist(), beam.last_tokens())]
            if beam.done():
                break
        score, ids = beam.best()
        return Generated(enc.decode(ids), float(score), len(ids), beam.ended(), beam.peak(), beam.end())
