"""The model's closed choices, each a `Literal` that a curriculum's fields are checked
against (training/config.py) and whose values the model's modules name."""

from __future__ import annotations

from typing import Literal, get_args

ProfileName = Literal["official", "exact"]  # the release's trace format, or ours (modeling/profiles.py)
TraceState = Literal["full", "delta"]  # a step writes the whole state, or what changed (modeling/compact.py)
StepOrder = Literal["start", "end"]  # a calling line's step before or after the call's steps
CodeWindow = Literal["head", "ends"]  # a too-long program read from its start, or its start and last lines
Positions = Literal["absolute", "rotary"]  # the release's position table, or rotary (modeling/rotary.py)
Attention = Literal["sdpa", "flex"]  # packed rows' attention: a dense mask, or FlexAttention's block mask

PROFILES = get_args(ProfileName)
CODE_WINDOWS = get_args(CodeWindow)
POSITIONS = get_args(Positions)
