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

from codeexecutor.generation.beam import Beam
from codeexecutor.generation.constraints import RowConstraints, StateRule, token_chars
from codeexecutor.generation.decoding import RELEASE, Decoding
from codeexecutor.generation.verdict import StepEnds


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
        path = self.path = resolve(model)
        if (
            dtype is None
        ):  # bf16 on CUDA; a bf16 checkpoint decoded 1.75x slower in bf16 on an AVX2 CPU (docs/decoding.md)
            dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.model = load_model(path, dtype=dtype).to(self.device).eval()
        cfg = self.model.config
        self.profile = profile_of(cfg)
        try:
            self.tok = load_tokenizer(path, exception=self.profile.exception_step, delta=self.profile.delta)
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"{path}: no usable tokenizer ({str(exc).splitlines()[0]}); copy the model folder with its "
                "tokenizer files"
            ) from None
        if len(self.tok) > cfg.vocab_size:
            raise UsageError(
                f"{path}: the tokenizer has {len(self.tok)} tokens but the model only {cfg.vocab_size}; "
                "they do not belong together"
            )
        self.encoder = Encoder(self.tok, cfg.max_code_length, cfg.max_trace_length, self.profile)

    @classmethod
    def from_model(cls, model, encoder, device) -> TraceGenerator:
        """A generator over a model in memory (evaluation while training)."""
        gen = cls.__new__(cls)
        gen.model, gen.encoder, gen.tok, gen.profile = model, encoder, encoder.tok, encoder.profile
        gen.device = torch.device(device)
        return gen

    @functools.cached_property
    def detector(self):
        """The crash detector saved beside the model (modeling/detector.py), or None."""
        from codeexecutor.modeling.detector import Detector

        path = getattr(self, "path", None)
        return Detector.load(path, self.model, self.encoder) if path else None

    def code_input(self, source: str, task: str = "codenet") -> str:
        """A program in this model's format (its profile)."""
        return self.profile.code(source, task)

    def parse(self, text: str):
        return self.profile.parse(text)

    @torch.no_grad()
    def generate(
        self,
        inputs: list[str],
        decoding: Decoding = RELEASE,
        batch_size: int = 8,
        cache: bool = True,
        sort: bool = True,
    ) -> list[Generated]:
        """Best hypothesis for each model-format code string, in input order, decoded as
        `decoding` says (generation/decoding.py; its `None` fields the model's defaults; by
        default the release's beam of 10 without the state rules). Each answer's
        `exception_peak` is recorded where the model has an `<exception>` step. `cache`:
        False decodes each program alone, recomputing every step (the reference path).
        `sort`: batches are made of programs of similar code length, not in input order
        (answers come back in input order either way)."""
        from codeexecutor.errors import UsageError

        d = decoding.resolved(self)
        beam, exception_bias, length_penalty = d.beam, d.exception_bias, d.length_penalty
        cap = self.model.config.max_trace_length
        max_length = min(d.max_length or cap, cap)
        if "<exception>" in self.tok.get_vocab():
            try:
                ends = StepEnds(self.tok, exception_bias, d.exception_at)
            except ValueError as exc:
                raise UsageError(f"{exc}; pass a number such as --exception-bias 2") from None
        elif exception_bias:
            raise UsageError(
                "this model has no <exception> step (the release's format), so an exception bias has "
                "nothing to act on; leave --exception-bias out"
            )
        else:
            ends = None
        rule = self._rules(d.names, d.values)
        if not cache:
            return self._expanded(
                [
                    self._beam_no_cache(
                        self.encoder.code(text), beam, max_length, rule(text) if rule else None, ends, length_penalty
                    )
                    for text in inputs
                ]
            )
        codes = [self.encoder.code(t) for t in inputs]
        # Batches of programs of similar code length (longest first): less padding in each
        # step's attention, and fewer rows left decoding alone at the end of a batch.
        order = sorted(range(len(codes)), key=lambda i: -len(codes[i])) if sort else list(range(len(codes)))
        out: list[Generated | None] = [None] * len(codes)
        for i in range(0, len(order), batch_size):
            chunk = order[i : i + batch_size]
            rules = [rule(inputs[j]) for j in chunk] if rule else None
            for j, g in zip(
                chunk, self._beam([codes[j] for j in chunk], beam, max_length, rules, ends, length_penalty)
            ):
                out[j] = g
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
            raise UsageError(
                "the release's format writes values as lexical tokens, whose length the tracer does not "
                "bound; leave --constrain-values out for this model"
            )
        chars = None
        if values:
            if getattr(self, "_chars", None) is None:
                self._chars = token_chars(self.tok)
            chars = self._chars
        if not self._one_colon():
            raise UsageError(
                "this model's tokenizer splits ' :' in two, so the state rules cannot find a name's end; "
                "leave --constrain-names and --constrain-values out for it"
            )
        limit = DEFAULT_LIMIT + len(ELLIPSIS) if values else None
        return functools.partial(StateRule, self.tok, names=names, value_chars=limit, chars=chars)

    # -- cached, batched -------------------------------------------------------------------
    def _beam(
        self,
        codes: list[list[int]],
        size: int,
        max_length: int,
        rules: list[StateRule] | None = None,
        ends: StepEnds | None = None,
        length_penalty: float = 0.0,
    ) -> list[Generated]:
        from codeexecutor.generation.device_search import DeviceSearch, Guides

        search = DeviceSearch(self.model, self.encoder, codes, size, max_length, Guides(rules, ends), length_penalty)
        return [
            Generated(self.encoder.decode(ids), float(score), len(ids), ended, peak, end)
            for score, ids, ended, peak, end in search.run()
        ]

    # -- reference: no cache, one program at a time ---------------------------------------------
    def _beam_no_cache(
        self,
        code: list[int],
        size: int,
        max_length: int,
        rule: StateRule | None = None,
        ends: StepEnds | None = None,
        length_penalty: float = 0.0,
    ) -> Generated:
        m, enc = self.model, self.encoder
        code_ids = torch.tensor([code], device=self.device)
        beam = Beam(size, enc.eos, length_penalty)
        rows = [[enc.mask0] for _ in range(size)]
        constraint = RowConstraints([rule], size) if rule else None
        for _ in range(max_length):
            trace = torch.tensor([r + [enc.pad] for r in rows], device=self.device)  # one slot for the next token
            out = m(
                code_ids.expand(size, -1), torch.ones_like(code_ids).expand(size, -1), trace, torch.ones_like(trace)
            )
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
