"""Constrained decoding: a state may only name variables that the program names, and
its values are no longer than the tracer renders them.

Every name in a trace state (`<state> name : value <dictsep> name : value </state>`, or a
compact step's `<delta> ... </state>`)
is an identifier of the program's code, but a small model does not always copy it: it
writes `MyCgolfgolfgolf…` for `MyClass` and never reaches the ` :` that ends the name,
so the trace runs into the length cap; or it names one variable twice in a state
(`X : 3 <dictsep> X : 3 …`), which no true state does (a state is a dict), and goes on
repeating it. `StateRule` keeps a trie of the token sequences of the code's
identifiers; right after `<state>` or `<dictsep>` the decoder may only write a path of
that trie towards a name the state has not named yet (or `</state>` for an empty
state), and a complete name may only be followed by ` :` or by a longer name. Values,
line numbers, outputs and the exception step are left alone.

A value is the other loop: `'atcoderatcoderatcoder…'` or `[0, 0, 0, …` grows until the
length cap, though the tracer never renders a value longer than its limit (100
characters, then `...`: execution/render.py; no value of the 2 M in our training sets is
longer than 103). With `value_chars`, once a value has that many characters it must end
(`<dictsep>` or `</state>`), and the trace goes on to its next step. Characters are
counted from the byte-level tokens' bytes (one per byte that starts a UTF-8 character),
so a token's share adds up exactly to the decoded text's length.

The release decodes without these rules, so `TraceGenerator.generate` leaves them off
(`names=False, values=False`), and a released checkpoint still generates exactly what
the release's inference generates. `codeexecutor trace` turns both on for a model of
our own trace formats (`--no-constrain-names`, `--no-constrain-values` turn them off);
`evaluate` and `rerank` decode freely unless asked, so their scores compare with the
release's protocol.

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
OUT, NAME, VALUE = 0, 1, 2


def _byte_decoder() -> dict[str, int]:
    """Byte-level BPE's printable stand-in for each byte, back to the byte (GPT-2's table:
    printable Latin-1 bytes stand for themselves, the rest for 256 + their rank)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), ord("\xff") + 1)]
    table, extra = {chr(b): b for b in keep}, 0
    for b in range(256):
        if b not in keep:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def token_chars(tok) -> list[int]:
    """Per token id, the characters it adds to decoded text: the bytes that start a UTF-8
    character (not 0b10xxxxxx); an added token (`<function>`) counts its own length."""
    decoder, out = _byte_decoder(), []
    for piece in tok.convert_ids_to_tokens(list(range(len(tok)))):
        piece = piece or ""
        if all(ch in decoder for ch in piece):
            out.append(sum((decoder[ch] & 0xC0) != 0x80 for ch in piece))
        else:
            out.append(len(piece))
    return out


def identifiers(code: str) -> set[str]:
    """Names a state of this code can hold: its identifiers (Python keywords left out)."""
    return {w for w in _IDENT.findall(code) if not keyword.iskeyword(w)}


class StateRule:
    """The rules of one program. A decoding state is `(mode, node, used, n)`: mode OUT
    (free), NAME (at `node` of the trie, `{token id: child}`, key `None` -> the name that
    ends there; None without the name rule) or VALUE (`n` characters written); and the
    names the current state has already named. `chars`: token_chars(tok), which a caller
    decoding many programs computes once."""

    def __init__(self, tok, code: str, names: bool = True, value_chars: int | None = None,
                 chars: list[int] | None = None) -> None:
        vocab = tok.get_vocab()
        self.state_open, self.dictsep, self.state_close = vocab["<state>"], vocab["<dictsep>"], vocab["</state>"]
        self.delta_open = vocab.get("<delta>", self.state_open)  # a compact step's state opens like a whole one
        colon = tok.encode(" :", add_special_tokens=False)
        if len(colon) != 1:
            raise ValueError(f"this tokenizer splits ' :' into {len(colon)} tokens; the state rules need one")
        self.colon = colon[0]
        self.names, self.value_chars = names, value_chars
        self.chars = (chars or token_chars(tok)) if value_chars else None
        self.root: dict = {}
        if names:
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
    def start() -> tuple[int, dict | None, frozenset[str], int]:
        return (OUT, None, frozenset(), 0)

    def allowed(self, state) -> list[int] | None:
        """Token ids allowed next; None: any token. A state may end empty only before its
        first name; a value that has reached `value_chars` (and the space before it) ends."""
        mode, node, used, n = state
        if mode == VALUE:
            return [self.dictsep, self.state_close] if self.value_chars and n > self.value_chars else None
        if mode == OUT or node is None:
            return None
        ids = [t for t, child in node.items() if t is not None and not self.below[id(child)] <= used]
        if None in node and node[None] not in used:
            ids.append(self.colon)
        if node is self.root and not used:
            ids.append(self.state_close)  # an empty state
        return ids or [self.state_close]  # every name taken (or none at all): the state ends

    def step(self, state, token: int):
        """The decoding state after `token`."""
        mode, node, used, n = state
        root = self.root if self.names else None
        if token == self.state_open or token == self.delta_open:
            return (NAME, root, frozenset(), 0)
        if token == self.dictsep:
            return (NAME, root, used, 0)
        if token == self.state_close:
            return (OUT, None, used, 0)
        if mode == VALUE:
            return (VALUE, None, used, n + self.chars[token]) if self.chars else state
        if mode == NAME and node is None:  # no name rule: the name ends at ` :`
            return (VALUE, None, used, 0) if token == self.colon else state
        if mode == NAME and token in node:
            return (NAME, node[token], used, 0)
        if mode == NAME and token == self.colon and None in node:
            return (VALUE, None, used | {node[None]}, 0)
        return (OUT, None, used, 0)


class RowConstraints:
    """State rules of the rows of a batched search: per row its program's rules and its
    decoding state."""

    def __init__(self, constraints: list[StateRule], per_program: int) -> None:
        self.rules = [c for c in constraints for _ in range(per_program)]
        self.states = [StateRule.start() for _ in self.rules]

    def mask(self, logp: torch.Tensor) -> torch.Tensor:
        """logp: (rows, V) next-token log-probabilities; disallowed tokens get BLOCKED (one
        masked fill for the batch, not one per row)."""
        ruled, rows, cols = [], [], []
        for r, (rule, state) in enumerate(zip(self.rules, self.states)):
            ids = rule.allowed(state)
            if ids is not None:
                ruled.append(r)
                rows += [r] * len(ids)
                cols += ids
        if not ruled:
            return logp
        blocked = torch.zeros_like(logp, dtype=torch.bool)
        blocked[ruled] = True
        blocked[rows, cols] = False
        return logp.masked_fill(blocked, BLOCKED)

    def advance(self, order: list[int], tokens: list[int]) -> None:
        """Row i now extends row `order[i]` with `tokens[i]`."""
        rules, states = self.rules, self.states
        self.states = [rules[i].step(states[o], t) for i, (o, t) in enumerate(zip(order, tokens))]

    def keep(self, rows: list[int]) -> None:
        self.rules = [self.rules[r] for r in rows]
        self.states = [self.states[r] for r in rows]
