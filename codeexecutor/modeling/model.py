"""The UniXcoder-style encoder-decoder (docs/curriculum.md): one RoBERTa used through attention masks.

Training is one prefix-LM forward over [code ; trace]: code tokens see all code tokens
(bidirectional), trace tokens see all code tokens and the trace tokens before them
(causal). Inference is encoder-decoder with the same weights: the code is encoded once
into a key/value cache, then trace tokens are decoded one at a time against it.

Sequence layout (as UniXcoder's encoder-decoder mode; modeling/tokenizer.py builds it):
    code  = <s> <encoder-decoder> </s> c1 ... cS [<mask0>] </s>   (at most max_code_length)
    trace = <mask0> t1 ... tT </s>                                (at most max_trace_length)
The model predicts t1 ... tT </s> from <mask0> t1 ... tT. Positions count from the
first code token and continue into the trace right after the *real* (unpadded) code,
so padding never shifts a position (the release: RoBERTa's positions, 2 ... n+1 for the
source and n+2 ... for the target).

The generation head is the release's (CodeExecutor `inference/model.py`, `Seq2Seq`):
logits = lm_head(last hidden state), a bias-free linear layer tied to the word
embeddings; no dense layer, no tanh. UniXcoder's generation head is the same tied
projection, so its weights and the released ones generate as they were trained to.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import AutoConfig, AutoModel, RobertaConfig, RobertaModel
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.modeling_utils import PreTrainedModel

from codeexecutor.modeling.choices import POSITIONS
from codeexecutor.modeling.rotary import use_rotary

POSITION_OFFSET = 2  # RoBERTa positions start after padding_idx (1)
# Model sizes by name. `base`: UniXcoder's (12 x 768, ~125 M parameters with its
# vocabulary). `small`: ~30 M with a 16 k vocabulary, for a single-GPU hour. `mini`: ~6 M
# with an 8 k vocabulary, for a CPU hour. `mini-wide`: mini at 384 wide (~11 M), a CPU
# step 1.9x mini's (benchmarks/bench_quality.py compares them). `tiny`: CPU demos and tests.
ATTENTIONS = ("sdpa", "flex")  # how packed training rows attend: tiles through SDPA, or FlexAttention (a GPU's)
PRESETS = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "small": dict(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048),
    "mini-wide": dict(hidden_size=384, num_hidden_layers=4, num_attention_heads=6, intermediate_size=1536),
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256),
}


class CodeExecutorConfig(RobertaConfig):
    """RoBERTa config plus the code/trace lengths and the loss weighting."""

    model_type = "codeexecutor"

    def __init__(
        self,
        max_code_length: int = 256,
        max_trace_length: int = 768,
        structural_weight: float = 1.0,
        other_weight: float = 10.0,
        structural_token_ids: list[int] | None = None,
        mask0_token_id: int | None = None,
        format_profile: str = "exact",
        exception_step: bool | None = None,
        positions: str = "absolute",
        rotary_base: float = 10000.0,
        trace_state: str = "full",
        step_order: str = "start",
        code_window: str = "head",
        exception_weight: float | None = None,
        exception_token_id: int | None = None,
        attention: str = "sdpa",
        **kwargs,
    ) -> None:
        kwargs.setdefault("is_decoder", True)  # self-attention with a key/value cache
        kwargs.setdefault("add_cross_attention", False)
        super().__init__(**kwargs)
        self.max_code_length = max_code_length
        self.max_trace_length = max_trace_length
        self.structural_weight = structural_weight
        self.other_weight = other_weight
        self.structural_token_ids = list(structural_token_ids or [])
        self.exception_weight = exception_weight  # of the <exception> label; None: other_weight like any token
        self.exception_token_id = exception_token_id
        self.mask0_token_id = mask0_token_id
        self.format_profile = format_profile  # modeling/profiles.py
        self.exception_step = (format_profile == "exact") if exception_step is None else bool(exception_step)
        self.trace_state = trace_state  # full | delta: how a trace step writes its state (modeling/compact.py)
        self.step_order = (
            step_order  # start | end: a calling line's step before or after its call's (modeling/profiles.py)
        )
        self.code_window = (
            code_window  # head | ends: which tokens of a too-long program the model reads (modeling/tokenizer.py)
        )
        if positions not in POSITIONS:
            raise ValueError(f"unknown positions {positions!r}; one of {', '.join(POSITIONS)}")
        self.positions = positions  # absolute: the release's learned table; rotary: modeling/rotary.py
        self.rotary_base = rotary_base
        if attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {attention!r}; one of {', '.join(ATTENTIONS)}")
        self.attention = (
            attention  # of packed training rows: key tiles through SDPA, or FlexAttention's block mask (CUDA)
        )

    @classmethod
    def preset(cls, name: str, vocab_size: int, **kwargs) -> CodeExecutorConfig:
        """A model of one of the PRESETS sizes, with RoBERTa's special ids and positions."""
        if name not in PRESETS:
            raise ValueError(f"unknown model preset {name!r}; one of {', '.join(PRESETS)}")
        defaults = dict(
            max_position_embeddings=1026, type_vocab_size=10, pad_token_id=1, bos_token_id=0, eos_token_id=2
        )
        return cls(vocab_size=vocab_size, **{**defaults, **PRESETS[name], **kwargs})


def prefix_lm_mask(code_mask: torch.Tensor, trace_mask: torch.Tensor) -> torch.Tensor:
    """Boolean attention mask (B, S+T, S+T), True = may attend.

    code_mask: (B, S) 1 for real code tokens; trace_mask: (B, T) 1 for real trace tokens.
    Code queries see real code keys; trace queries see real code keys and real trace keys
    at or before their own position. Every query also sees itself, so no row is empty
    (padding queries' outputs are never used).
    """
    B, S = code_mask.shape
    T = trace_mask.shape[1]
    code = code_mask.bool()  # (B, S)
    trace = trace_mask.bool()  # (B, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=code.device).tril()  # (T, T)
    top = torch.cat(
        [code[:, None, :].expand(B, S, S), torch.zeros(B, S, T, dtype=torch.bool, device=code.device)], dim=2
    )
    bottom = torch.cat([code[:, None, :].expand(B, T, S), causal[None] & trace[:, None, :]], dim=2)
    mask = torch.cat([top, bottom], dim=1)  # (B, S+T, S+T)
    eye = torch.eye(S + T, dtype=torch.bool, device=code.device)[None]  # (1, L, L)
    return mask | eye


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, Q, K) boolean -> (B, 1, Q, K) additive float mask as RoBERTa's attention expects."""
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    out.masked_fill_(~mask, torch.finfo(dtype).min)
    return out[:, None]  # (B, 1, Q, K)


class CodeExecutorModel(PreTrainedModel):
    config_class = CodeExecutorConfig
    base_model_prefix = "roberta"
    _tied_weights_keys = {"lm_head.weight": "roberta.embeddings.word_embeddings.weight"}
    supports_gradient_checkpointing = True
    _supports_sdpa = True  # RoBERTa attention runs through SDPA when the config asks for it

    def __init__(self, config: CodeExecutorConfig) -> None:
        super().__init__(config)
        self.roberta = RobertaModel(config, add_pooling_layer=False)
        if config.positions == "rotary":
            use_rotary(self.roberta)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)  # tied; the release's head
        self.post_init()
        self.tie_lm_head()

    def tie_lm_head(self) -> None:
        self.lm_head.weight = self.roberta.embeddings.word_embeddings.weight

    def get_input_embeddings(self) -> nn.Embedding:
        return self.roberta.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.roberta.embeddings.word_embeddings = value
        self.tie_lm_head()

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(0.0, self.config.initializer_range)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(0.0, self.config.initializer_range)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)  # Seq2Seq.generate: self.lm_head(hidden_states)

    def token_weights(self, labels: torch.Tensor) -> torch.Tensor:
        """Per-token loss weights: structural tokens (<state> </state> <dictsep> :) get
        structural_weight, every other token other_weight (the released weighting);
        `<exception>` gets exception_weight where one is set."""
        weights = torch.full(labels.shape, float(self.config.other_weight), device=labels.device)
        if self.config.structural_token_ids:
            ids = torch.tensor(self.config.structural_token_ids, device=labels.device)
            weights[torch.isin(labels, ids)] = float(self.config.structural_weight)
        if self.config.exception_weight is not None and self.config.exception_token_id is not None:
            weights[labels == self.config.exception_token_id] = float(self.config.exception_weight)
        return weights

    def loss_table(self):
        """(vocab,) numpy: the loss weight of predicting each token, as `token_weights`
        gives it (what a packed row's data worker multiplies its targets by)."""
        from codeexecutor.modeling.rows import loss_weights

        c = self.config
        return loss_weights(
            c.vocab_size,
            c.other_weight,
            c.structural_weight,
            c.structural_token_ids,
            c.exception_weight,
            c.exception_token_id,
        )

    def compile_rows(self, fullgraph: bool = True, backend="inductor") -> None:
        """Compile the packed-row forward and loss whole (`torch.compile(fullgraph=True,
        dynamic=False)`: a graph break is an error, and a row's fixed shape compiles once).
        `fullgraph=False` allows breaks: for ZeRO-3, whose hooks gather each module's
        parameters between compiled pieces. `backend`: torch.compile's (a rehearsal
        traces with aot_eager: benchmarks/rehearse_compile.py)."""
        from codeexecutor.modeling.row_forward import masked_row_loss

        self._row_loss = torch.compile(masked_row_loss, fullgraph=fullgraph, dynamic=False, backend=backend)

    def forward(
        self,
        code_ids: torch.Tensor | None = None,
        code_mask: torch.Tensor | None = None,
        trace_ids: torch.Tensor | None = None,
        trace_mask: torch.Tensor | None = None,
        reduction: str = "mean",
        row: dict | None = None,
    ) -> Seq2SeqLMOutput:
        """Prefix-LM training forward. trace_ids start with <mask0>; the loss is on
        predicting trace_ids[:, 1:] (weighted; padding ignored). reduction="none" gives
        one loss per example (hard-example mining). `row`: a packed micro-step row
        (modeling/rows.py) instead, through modeling/row_forward.py (compiled once
        `compile_rows` has run): the same loss as these examples padded apart."""
        if row is not None:
            from codeexecutor.modeling.row_forward import check_flex_dropout, masked_row_loss

            if "kv_num" in row:
                check_flex_dropout(self)
            loss = getattr(self, "_row_loss", masked_row_loss)(self, row)
            return Seq2SeqLMOutput(loss=loss)
        B, S = code_ids.shape
        T = trace_ids.shape[1]
        ids = torch.cat([code_ids, trace_ids], dim=1)  # (B, S+T)
        code_len = code_mask.sum(1, keepdim=True)  # (B, 1)
        positions = (
            torch.cat(
                [
                    torch.arange(S, device=ids.device)[None].expand(B, S),
                    code_len + torch.arange(T, device=ids.device)[None],  # (B, T): right after the real code
                ],
                dim=1,
            ).clamp(max=self.config.max_position_embeddings - POSITION_OFFSET - 1)
            + POSITION_OFFSET
        )
        mask = additive(prefix_lm_mask(code_mask, trace_mask), self.dtype)  # (B, 1, L, L)
        hidden = self.roberta(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False
        ).last_hidden_state
        logits = self.logits(hidden[:, S:-1])  # (B, T-1, V): predicts trace tokens 1..T-1
        labels = trace_ids[:, 1:]  # (B, T-1)
        valid = trace_mask[:, 1:].bool()
        ce = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1), reduction="none").view_as(
            labels
        )
        w = self.token_weights(labels) * valid
        per_example = (ce * w).sum(1) / w.sum(1).clamp(min=1e-9)  # (B,)
        loss = per_example if reduction == "none" else (ce * w).sum() / w.sum().clamp(min=1e-9)
        return Seq2SeqLMOutput(loss=loss, logits=logits)

    # -- inference: encoder-decoder with the code keys/values cached ---------------------
    def encode(self, code_ids: torch.Tensor, code_mask: torch.Tensor):
        """Encode the code once; returns (cache, code_mask, next positions (B,))."""
        B, S = code_ids.shape
        mask = (
            code_mask.bool()[:, None, :].expand(B, S, S) | torch.eye(S, dtype=torch.bool, device=code_ids.device)[None]
        )
        positions = torch.arange(S, device=code_ids.device)[None].expand(B, S) + POSITION_OFFSET
        out = self.roberta(
            input_ids=code_ids, attention_mask=additive(mask, self.dtype), position_ids=positions, use_cache=True
        )
        return out.past_key_values, code_mask.sum(1)

    def prefill(self, code_ids: torch.Tensor, code_mask: torch.Tensor, trace_ids: torch.Tensor):
        """Encode the code and an imposed trace prefix (starting with <mask0>) in one pass,
        as training reads them; returns (cache, code_len (B,), (B, V) log-probs of the token
        after the prefix). Decoding goes on with `decode_step` at position code_len + T."""
        B, S = code_ids.shape
        T = trace_ids.shape[1]
        ids = torch.cat([code_ids, trace_ids], dim=1)
        code_len = code_mask.sum(1)
        positions = (
            torch.cat(
                [
                    torch.arange(S, device=ids.device)[None].expand(B, S),
                    code_len[:, None] + torch.arange(T, device=ids.device),
                ],
                dim=1,
            ).clamp(max=self.config.max_position_embeddings - POSITION_OFFSET - 1)
            + POSITION_OFFSET
        )
        mask = additive(prefix_lm_mask(code_mask, torch.ones_like(trace_ids)), self.dtype)
        out = self.roberta(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        return out.past_key_values, code_len, self.log_probs(self.logits(out.last_hidden_state[:, -1]))

    def decode_step(
        self, token_ids: torch.Tensor, cache, key_mask: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """One decoding step for (N,) tokens. key_mask: (N, K+1) bool over cached keys and
        the new one; positions: (N,) position of the new token. Returns (N, V) log-probs."""
        mask = additive(key_mask[:, None, :], self.dtype)  # (N, 1, 1, K+1)
        pos = positions.clamp(max=self.config.max_position_embeddings - POSITION_OFFSET - 1)[:, None] + POSITION_OFFSET
        out = self.roberta(
            input_ids=token_ids[:, None], attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True
        )
        return self.log_probs(self.logits(out.last_hidden_state[:, -1]))  # (N, V)

    @staticmethod
    def log_probs(logits: torch.Tensor) -> torch.Tensor:
        """Log-softmax in float32 at least (half-precision logits are upcast; float64 stays)."""
        if logits.dtype in (torch.float16, torch.bfloat16):
            logits = logits.float()
        return F.log_softmax(logits, dim=-1)

    @classmethod
    def from_encoder(cls, encoder: RobertaModel, config: CodeExecutorConfig) -> CodeExecutorModel:
        """Our model around the weights of a RoBERTa encoder (UniXcoder, the released
        CodeExecutor), its architecture kept and its embeddings resized to
        `config.vocab_size` (new tokens get fresh rows)."""
        src = encoder.config
        merged = CodeExecutorConfig(**{**config.to_dict(), **{k: getattr(src, k) for k in ARCHITECTURE_KEYS}})
        merged._attn_implementation = getattr(config, "_attn_implementation", None) or "sdpa"
        model = cls(merged)
        if encoder.config.vocab_size != merged.vocab_size:
            encoder.resize_token_embeddings(merged.vocab_size)
        missing, unexpected = model.roberta.load_state_dict(encoder.state_dict(), strict=False)
        if unexpected:
            raise ValueError(f"unexpected weights {unexpected[:5]}")
        missing = [k for k in missing if not k.endswith("position_ids")]
        if missing:
            raise ValueError(f"weights missing: {', '.join(missing[:5])}")
        model.tie_lm_head()
        return model


ARCHITECTURE_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
    "layer_norm_eps",
    "hidden_act",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
)


# So that Auto* classes (AutoTokenizer reads config.json to pick a tokenizer) know the type.
AutoConfig.register("codeexecutor", CodeExecutorConfig, exist_ok=True)
AutoModel.register(CodeExecutorConfig, CodeExecutorModel, exist_ok=True)
