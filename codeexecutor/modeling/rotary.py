"""Rotary positions (RoFormer, Su et al. 2021) for the RoBERTa attention: an opt-in
departure from the release's learned absolute positions.

With `positions: rotary` in a model's config, every self-attention layer rotates its
queries and keys by their token's position before the key/value cache, so an attention
score depends on the distance between two tokens, not on where they are; the learned
absolute position table is replaced by a zero. Copying a name piece by piece (find the
piece just emitted in the code, emit the one after it) needs a head that attends one
position back, which relative positions give every layer for free and absolute ones
must learn per position. The encoder-decoder inference needs nothing else: the code's
keys are cached rotated, and each decoded token is rotated at the position it is given.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.roberta.modeling_roberta import (
    EncoderDecoderCache,
    RobertaSelfAttention,
    eager_attention_forward,
)


def rotary_tables(position_ids: torch.Tensor, dim: int, base: float, dtype: torch.dtype):
    """cos, sin of shape (B, 1, L, dim) for positions (B, L): pair i of a head's dimensions
    turns by position * base^(-2i/dim) (the two halves of the head form the pairs)."""
    inv_freq = base ** (-torch.arange(0, dim, 2, device=position_ids.device, dtype=torch.float32) / dim)  # (dim/2,)
    angles = position_ids.float()[..., None] * inv_freq  # (B, L, dim/2)
    angles = torch.cat([angles, angles], dim=-1)[:, None]  # (B, 1, L, dim)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, L, dim) turned pairwise by the tables."""
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + turned * sin


class RotarySelfAttention(RobertaSelfAttention):
    """RoBERTa's self-attention with queries and keys rotated by `position_ids` (which the
    RoBERTa model hands every layer along with its other keyword arguments)."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        past_key_values=None,
        position_ids: torch.Tensor | None = None,
        **kwargs,
    ):
        if position_ids is None:
            raise ValueError("rotary positions need position_ids in every forward pass")
        kwargs.pop("encoder_hidden_states", None)
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.attention_head_size)
        query = self.query(hidden_states).view(*hidden_shape).transpose(1, 2)  # (B, H, L, dim)
        key = self.key(hidden_states).view(*hidden_shape).transpose(1, 2)
        value = self.value(hidden_states).view(*hidden_shape).transpose(1, 2)
        cos, sin = rotary_tables(position_ids, self.attention_head_size, self.config.rotary_base, query.dtype)
        query, key = rotate(query, cos, sin), rotate(key, cos, sin)
        if past_key_values is not None:
            cache = (
                past_key_values.self_attention_cache
                if isinstance(past_key_values, EncoderDecoderCache)
                else past_key_values
            )
            key, value = cache.update(key, value, self.layer_idx)
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        out, weights = attend(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.dropout.p if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )
        return out.reshape(*input_shape, -1).contiguous(), weights


class NoPositions(nn.Module):
    """Stands in for the absolute position table: adds nothing (a zero that broadcasts)."""

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        return torch.zeros((), device=position_ids.device)


def use_rotary(roberta: nn.Module) -> None:
    """Turn a freshly built RobertaModel's attention to rotary positions, in place."""
    for layer in roberta.encoder.layer:
        old = layer.attention.self
        new = RotarySelfAttention(roberta.config, is_causal=old.is_causal, layer_idx=old.layer_idx)
        layer.attention.self = new
    roberta.embeddings.position_embeddings = NoPositions()
