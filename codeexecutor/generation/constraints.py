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

The name rule also knows scopes (generation/scopes.py): a step at line `k` of a function
names only that function's slots, a whole state of it starts with its parameters, and a
step of the module names only what the module's statements up to the furthest line it
has reached bind. These are facts of CPython's frames, read off the code without running
it; the first mistake of our models' function traces was most often a name the step
could not hold (`def valid_connection(graph, ...)` traced as `graph : <function>`).

A name after a special token is tokenized on its own: the format's special tokens
strip the spaces around them, and byte-level BPE splits `name :` into `name` and ` :`,
so the trie holds each identifier's ids as the tokenizer encodes it in a state.
"""

from __future__ import annotations

import functools
import keyword
import re

import torch

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CLASS = re.compile(r"\bclass\s+([A-Za-z_][A-Za-z0-9_]*)")
BLOCKED = -1e9  # a disallowed token's log-probability (finite: beam sums stay ordered)
OUT, NAME, VALUE, LINE = 0, 1, 2, 3
# (line of the step, furthest module line reached, names left (None: any identifier), names the state must write next)
NO_SCOPE = (-1, -1, None, ())


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


@functools.lru_cache(maxsize=8)
def _line_ids(tok) -> dict[int, int]:
    """A line token's id -> its line (`<12>` -> 12)."""
    return {i: int(t[1:-1]) for t, i in tok.get_vocab().items() if re.fullmatch(r"<\d+>", t)}


def identifiers(code: str) -> set[str]:
    """Names a state of this code can hold: its identifiers (Python keywords left out),
    with the two names a class body holds that its code does not spell: a private name
    mangled with its class (`__a` in `class Tree` is `_Tree__a`), and the hook an `Enum`
    class's namespace starts with."""
    words = {w for w in _IDENT.findall(code) if not keyword.iskeyword(w)}
    classes = {c.lstrip("_") for c in _CLASS.findall(code)}
    words |= {f"_{c}{w}" for c in classes if c for w in words if w.startswith("__") and not w.endswith("__")}
    if "Enum" in words:
        words.add("_generate_next_value_")
    return words


class StateRule:
    """The rules of one program. A decoding state is `(mode, node, used, n, scope)`: mode
    OUT (free), LINE (after `<line>`), NAME (at `node` of the trie, `{token id: child}`,
    key `None` -> the name that ends there; None without the name rule) or VALUE (`n`
    characters written); the names the current state has already named; and the scope
    context (NO_SCOPE's fields). `code`: the program in the model's format (or its
    source); `chars`: token_chars(tok), which a caller decoding many programs computes
    once; `scopes`: the name rule also follows the program's scopes, and with `params`
    a function's whole states start with its parameters."""

    def __init__(
        self,
        tok,
        code: str,
        names: bool = True,
        value_chars: int | None = None,
        chars: list[int] | None = None,
        scopes: bool = True,
        params: bool = True,
    ) -> None:
        from codeexecutor.generation.scopes import Scopes, source_of

        vocab = tok.get_vocab()
        self.line_open = vocab.get("<line>")
        self.line_of = _line_ids(tok)
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
        self.scopes = Scopes(source_of(code)) if names and scopes else None
        self.params = params

    def _index(self, node: dict) -> frozenset[str]:
        names = frozenset([node[None]] if None in node else [])
        for t, child in node.items():
            if t is not None:
                names |= self._index(child)
        self.below[id(node)] = names
        return names

    @staticmethod
    def start() -> tuple[int, dict | None, frozenset[str], int, tuple]:
        return (OUT, None, frozenset(), 0, NO_SCOPE)

    def allowed(self, state) -> list[int] | None:
        """Token ids allowed next; None: any token. A state may end empty only before its
        first name; a value that has reached `value_chars` (and the space before it) ends."""
        mode, node, used, n, (_, _, left, must) = state
        if must and mode == NAME:
            left = frozenset(must[:1])
        if mode == VALUE:
            if self.value_chars and n > self.value_chars:
                return [self.dictsep] if must else [self.dictsep, self.state_close]
            return None
        if mode in (OUT, LINE) or node is None:
            return None
        if left is None:
            ids = [t for t, child in node.items() if t is not None and not self.below[id(child)] <= used]
        else:
            ids = [t for t, child in node.items() if t is not None and self.below[id(child)] & left]
        if None in node and (node[None] not in used if left is None else node[None] in left):
            ids.append(self.colon)
        if node is self.root and not used and not must:
            ids.append(self.state_close)  # an empty state
        return ids or [self.state_close]  # every name taken (or none at all): the state ends

    def refused(self, state) -> int | None:
        """The one token refused where `allowed` leaves the choice free: `</state>` while
        parameters the state must list are still due."""
        return self.state_close if state[0] == VALUE and state[4][3] else None

    def step(self, state, token: int):
        """The decoding state after `token`."""
        mode, node, used, n, scope = state
        root = self.root if self.names else None
        if token == self.state_open or token == self.delta_open:
            return (NAME, root, frozenset(), 0, self._enter(scope, whole=token == self.state_open))
        if token == self.dictsep:
            return (NAME, root, used, 0, scope)
        if token == self.state_close:
            return (OUT, None, used, 0, scope)
        if mode == VALUE:
            return (VALUE, None, used, n + self.chars[token], scope) if self.chars else state
        if mode == NAME and node is None:  # no name rule: the name ends at ` :`
            return (VALUE, None, used, 0, scope) if token == self.colon else state
        if mode == NAME and token in node:
            return (NAME, node[token], used, 0, scope)
        if mode == NAME and token == self.colon and None in node:
            return (VALUE, None, used | {node[None]}, 0, self._named(scope, node[None]))
        if mode == OUT and token == self.line_open:
            return (LINE, None, used, 0, scope)
        if mode == LINE and token in self.line_of:
            return (OUT, None, used, 0, (self.line_of[token], *scope[1:]))
        return (OUT, None, used, 0, scope)

    def _enter(self, scope: tuple, whole: bool) -> tuple:
        """The scope context of a state opened at the current step's line: the names it
        may hold (None: any of the code's identifiers) and, for a whole state of a
        function's frame, the parameters it starts with."""
        from codeexecutor.generation.scopes import Function

        line, reached = scope[0], scope[1]
        frame = self.scopes.at(line) if self.scopes is not None and line >= 0 else None
        if frame is None:
            return (line, reached, None, ())
        if isinstance(frame, Function):
            return (line, reached, frozenset(frame.slots), frame.first if whole and self.params else ())
        reached = max(reached, line)
        return (line, reached, frame.names(reached), ())

    @staticmethod
    def _named(scope: tuple, name: str) -> tuple:
        """The scope context once `name` is named: the names left less this one."""
        line, reached, left, must = scope
        if left is None:
            return scope
        return (line, reached, left - {name}, must[1:] if must and must[0] == name else must)


def first_refused(rule: StateRule, ids: list[int]) -> int | None:
    """Index of the first token of `ids` that the rule refuses; None: it admits them all
    (how the tests and experiments/scope_rule_check.py show the rules admit true traces)."""
    state = rule.start()
    for i, t in enumerate(ids):
        allowed = rule.allowed(state)
        if allowed is not None and t not in allowed or t == rule.refused(state):
            return i
        state = rule.step(state, t)
    return None


class RowConstraints:
    """State rules of the rows of a batched search: per row its program's rules and its
    decoding state."""

    def __init__(self, constraints: list[StateRule], per_program: int) -> None:
        self.rules = [c for c in constraints for _ in range(per_program)]
        self.states = [StateRule.start() for _ in self.rules]

    def mask(self, logp: torch.Tensor) -> torch.Tensor:
        """logp: (rows, V) next-token log-probabilities; disallowed tokens get BLOCKED (one
        masked fill for the batch, not one per row)."""
        ruled, rows, cols, single = [], [], [], []
        for r, (rule, state) in enumerate(zip(self.rules, self.states)):
            ids = rule.allowed(state)
            if ids is not None:
                ruled.append(r)
                rows += [r] * len(ids)
                cols += ids
            else:
                t = rule.refused(state)
                if t is not None:
                    single.append((r, t))
        if not ruled and not single:
            return logp
        blocked = torch.zeros_like(logp, dtype=torch.bool)
        blocked[ruled] = True
        blocked[rows, cols] = False
        for r, t in single:
            blocked[r, t] = True
        return logp.masked_fill(blocked, BLOCKED)

    def advance(self, order: list[int], tokens: list[int]) -> None:
        """Row i now extends row `order[i]` with `tokens[i]`."""
        rules, states = self.rules, self.states
        self.states = [rules[i].step(states[o], t) for i, (o, t) in enumerate(zip(order, tokens))]

    def keep(self, rows: list[int]) -> None:
        self.rules = [self.rules[r] for r in rows]
        self.states = [self.states[r] for r in rows]
