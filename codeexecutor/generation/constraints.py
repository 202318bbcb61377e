"""Constrained decoding: a state may only name variables that the program names.

Every name in a trace state (`<state> name : value <dictsep> name : value </state>`)
is an identifier of the program's code, but a small model does not always copy it: it
writes `MyCgolfgolfgolf…` for `MyClass` and never reaches the ` :` that ends the name,
so the trace runs into the length cap; or it names one variable twice in a state
(`X : 3 <dictsep> X : 3 …`), which no true state does (a state is a dict), and goes on
repeating it. `NameConstraint` keeps a trie of the token sequences of the code's
identifiers; right after `<state>` or `<dictsep>` the decoder may only write a path of
that trie towards a name the state has not named yet (or `</state>` for an empty
state), and a complete name may only be followed by ` :` or by a longer name. Values,
line numbers, outputs and the exception step are left alone.

The release decodes without it, so it is off by default (`TraceGenerator.generate`,
`names=False`) and a released checkpoint still generates exactly what the release's
inference generates; `--constrain-names` turns it on (eval and `codeexecutor trace`).

A name after a special token is tokenized on its own: the format's special tokens
strip the spaces around them, and byte-level BPE splits `name :` into `name` and ` :`,
so the trie holds each identifier's ids as the tokenizer encodes it in a state.
"""

from __future__ import annotations

import keyword
import re

import torch

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BLOCKED = -1e9  # a disallowed token's log-probability (finite: beam sums stay ordered)
OUT, NAME = 0, 1


def identifiers(code: str) -> set[str]:
    """Names a state of this code can hold: its identifiers (Python keywords left out)."""
    return {w for w in _IDENT.findall(code) if not keyword.iskeyword(w)}


class NameConstraint:
    """The name rule of one program. A decoding state is `(mode, node, used)`: mode OUT
    (free) or NAME at `node` of the trie (`{token id: child}`, key `None` -> the name
    that ends there), and the names the current state has already named."""

    def __init__(self, tok, code: str) -> None:
        vocab = tok.get_vocab()
        self.state_open, self.dictsep, self.state_close = vocab["<state>"], vocab["<dictsep>"], vocab["</state>"]
        colon = tok.encode(" :", add_special_tokens=False)
        if len(colon) != 1:
            raise ValueError(f"this tokenizer splits ' :' into {len(colon)} tokens; the name constraint needs one")
        self.colon = colon[0]
        self.root: dict = {}
        for name in sorted(identifiers(code)):
            node = self.root
            for t in tok.encode(name, add_special_tokens=False):
                node = node.setdefault(t, {})
            node[None] = name
        self.below: dict[int, frozenset[str]] = {}  # id(node) -> the names its paths reach
        self._index(self.root)

    def _index(self, node: dict) -> frozenset[str]:
        names = frozenset([node[None]] if None in node else [])
        for t, child in node.items():
            if t is not None:
                names |= self._index(child)
        self.below[id(node)] = names
        return names

    @staticmethod
    def start() -> tuple[int, dict | None, frozenset[str]]:
        return (OUT, None, frozenset())

    def allowed(self, state) -> list[int] | None:
        """Token ids allowed next; None: any token. A state may end empty only before its
        first name."""
        mode, node, used = state
        if mode == OUT:
            return None
        ids = [t for t, child in node.items() if t is not None and not self.below[id(child)] <= used]
        if None in node and node[None] not in used:
            ids.append(self.colon)
        if node is self.root and not used:
            ids.append(self.state_close)  # an empty state
        return ids or [self.state_close]  # every name taken (or none at all): the state ends

    def step(self, state, token: int):
        """The decoding state after `token`."""
        mode, node, used = state
        if token == self.state_open:
            return (NAME, self.root, frozenset())
        if token == self.dictsep:
            return (NAME, self.root, used)
        if mode == NAME and token in node:
            return (NAME, node[token], used)
        if mode == NAME and token == self.colon and None in node:
            return (OUT, None, used | {node[None]})
        return (OUT, None, used)


class RowConstraints:
    """Name constraints of the rows of a batched search: per row its program's
    constraint and its decoding state."""

    def __init__(self, constraints: list[NameConstraint], per_program: int) -> None:
        self.rules = [c for c in constraints for _ in range(per_program)]
        self.states = [NameConstraint.start() for _ in self.rules]

    def mask(self, logp: torch.Tensor) -> torch.Tensor:
        """logp: (rows, V) next-token log-probabilities; disallowed tokens get BLOCKED."""
        out = None
        for r, (rule, state) in enumerate(zip(self.rules, self.states)):
            ids = rule.allowed(state)
            if ids is None:
                continue
            if out is None:
                out = logp.clone()
            keep = torch.tensor(ids, device=logp.device)
            row = torch.full_like(logp[r], BLOCKED)
            row[keep] = logp[r, keep]
            out[r] = row
        return logp if out is None else out

    def advance(self, order: list[int], tokens: list[int]) -> None:
        """Row i now extends row `order[i]` with `tokens[i]`."""
        rules, states = self.rules, self.states
        self.states = [rules[i].step(states[o], t) for i, (o, t) in enumerate(zip(order, tokens))]

    def keep(self, rows: list[int]) -> None:
        self.rules = [self.rules[r] for r in rows]
        self.states = [self.states[r] for r in rows]
