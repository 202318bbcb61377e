"""What the tracer needs to know about a code object to give one trace on every interpreter.

Python 3.11 runs a list, set or dict comprehension in a frame of its own, which the tracer
leaves out, so a comprehension is part of the step of the line that holds it. From 3.12 on
(PEP 709) the comprehension's loop is compiled into the enclosing code, so its iterations
fire `line` events of the enclosing frame, its iteration variables live in that frame's
fast locals ("hidden" locals, saved before the loop and restored after it), and the
variables it reads are no longer closure cells. `analyse` reads this back off the bytecode:

- `skip`: offsets where a `line` event belongs to the comprehension's own loop (its body,
  its `END_FOR`, its clean-up handler): never a step;
- `tail`: offsets just after the loop (the restores and the first instruction past them),
  with the comprehension's first line: an event there at that line is the loop's exit,
  which 3.11 never reported (its call returned on that same line);
- `lead`: offsets where a comprehension's first iterable starts on a later line than the
  comprehension itself, with that first line: 3.11 had a step of it just before;
- `hidden`: the loop's variables that are nowhere else locals of the code: never part
  of a state; `shadowed`: those that are locals of the code too (in the middle of the
  loop the frame holds the loop's value, 3.11's frame the local's);
- `slots`: a function's locals in 3.11's order (parameters, then plain locals in order of
  first use, then cell variables sorted by name, then free variables), in which 3.11
  lists names that become bound between two reads of the frame.

On 3.11 `analyse` only tells module, class and function frames apart.
"""

from __future__ import annotations

import sys

INLINED = sys.version_info >= (3, 12)  # PEP 709: comprehensions inlined into their enclosing code
CO_OPTIMIZED, CO_VARARGS, CO_VARKEYWORDS = 0x1, 0x4, 0x8
SUSPENDABLE = 0x20 | 0x80 | 0x200  # generator, coroutine, async generator: a frame that is resumed
MODULE, CLASS, FUNCTION = "module", "class", "function"

if INLINED:
    import dis
    import re

    _OP = dis.opmap
    _BUILD = frozenset(_OP[n] for n in ("BUILD_LIST", "BUILD_SET", "BUILD_MAP"))
    _SWAP, _FOR_ITER, _END_FOR, _POP_TOP = _OP["SWAP"], _OP["FOR_ITER"], _OP["END_FOR"], _OP["POP_TOP"]
    _LOAD_FAST_AND_CLEAR, _MAKE_CELL, _RERAISE = _OP["LOAD_FAST_AND_CLEAR"], _OP["MAKE_CELL"], _OP["RERAISE"]
    _EXTENDED_ARG, _CACHE = _OP["EXTENDED_ARG"], _OP.get("CACHE", 0)
    # The accumulator of an inlined comprehension (BUILD_LIST/SET/MAP 0), moved under the
    # iterator (SWAP 2), right before the loop (FOR_ITER): no other construct compiles so.
    _COMP_START = re.compile(
        b"["
        + b"".join(re.escape(bytes([o])) for o in sorted(_BUILD))
        + b"]\x00"
        + re.escape(bytes([_SWAP]))
        + b"\x02(?:"
        + re.escape(bytes([_EXTENDED_ARG]))
        + b".)?"
        + re.escape(bytes([_FOR_ITER])),
        re.DOTALL,
    )
    # Instructions naming one local, cell or free variable by its index, and those naming two.
    _ONE = frozenset(
        _OP[n]
        for n in (
            "LOAD_FAST",
            "LOAD_FAST_CHECK",
            "LOAD_FAST_AND_CLEAR",
            "STORE_FAST",
            "DELETE_FAST",
            "LOAD_DEREF",
            "STORE_DEREF",
            "DELETE_DEREF",
            "MAKE_CELL",
            "LOAD_CLOSURE",
            "LOAD_FROM_DICT_OR_DEREF",
        )
        if n in _OP and _OP[n] < 256
    )
    _TWO = frozenset(
        _OP[n] for n in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST") if n in _OP
    )
    _STORES = frozenset(_OP[n] for n in ("STORE_FAST", "STORE_FAST_STORE_FAST") if n in _OP)
    _RESTORE_OPS = _STORES | {_SWAP, _POP_TOP}
    _CLEANUP_OPS = _RESTORE_OPS | {_RERAISE}


class CodeInfo:
    """See the module docstring. `skip` is empty for code without inlined comprehensions,
    and `slots` is None where the interpreter's own order is already 3.11's."""

    __slots__ = ("kind", "suspendable", "skip", "tail", "lead", "hidden", "shadowed", "extents", "slots")

    def __init__(self, kind: str, suspendable: bool) -> None:
        self.kind = kind
        self.suspendable = suspendable
        self.skip: frozenset[int] = frozenset()
        self.tail: dict[int, int] = {}
        self.lead: dict[int, int] = {}
        self.hidden: frozenset[str] = frozenset()
        self.shadowed: frozenset[str] = frozenset()  # a comprehension's variables that are locals of the code too
        self.extents: tuple[tuple[int, int], ...] = ()  # (first, END_FOR) offsets of each comprehension
        self.slots: tuple[str, ...] | None = None


def kind_of(code) -> str:
    if code.co_flags & CO_OPTIMIZED:
        return FUNCTION
    return MODULE if code.co_name == "<module>" else CLASS


def analyse(code) -> CodeInfo:
    info = CodeInfo(kind_of(code), bool(code.co_flags & SUSPENDABLE))
    if not INLINED:
        return info
    starts = [m.end() - 1 for m in _COMP_START.finditer(code.co_code) if m.start() % 2 == 0]
    regions, c = _regions(code, starts) if starts else ([], None)
    if regions:
        info.skip = frozenset().union(*(r.skip for r in regions))
        for r in regions:
            info.tail.update(r.tail)
            info.lead.update(r.lead)
        info.tail = {k: v for k, v in info.tail.items() if k not in info.skip}
        outside, captures = _references(c, regions)
        params = set(_params(code))
        info.hidden = frozenset(n for r in regions for n in r.names if n not in outside and n not in params)
        info.shadowed = frozenset(n for r in regions for n in r.names) - info.hidden
        info.extents = tuple((r.first, r.end) for r in regions)
        captures -= info.hidden
    else:
        captures = set()
    if info.kind == FUNCTION and (sys.version_info >= (3, 13) or regions):
        info.slots = _slots_311(code, info.hidden, captures)
    return info


class _Region:
    """One inlined comprehension: the offsets of its loop, its tail, its saved names."""

    __slots__ = ("first", "end", "names", "skip", "tail", "lead")

    def __init__(self, first: int, end: int, names: tuple[str, ...]) -> None:
        self.first = first  # offset of its first instruction (the saves of its names)
        self.end = end  # offset of its END_FOR
        self.names = names
        self.skip: set[int] = set()
        self.tail: dict[int, int] = {}
        self.lead: dict[int, int] = {}


class _Code:
    """A code object's instructions as parallel lists (EXTENDED_ARG folded into the
    instruction it prefixes, whose `starts` is the prefix's offset; caches left out), read
    straight off `co_code`: `dis.get_instructions` costs a traced run of a short program
    several times over."""

    def __init__(self, code) -> None:
        raw = code.co_code
        self.code = code
        self.offsets: list[int] = []
        self.starts: list[int] = []
        self.ops: list[int] = []
        self.args: list[int] = []
        ext, start = 0, -1
        for i in range(0, len(raw), 2):
            op = raw[i]
            if op == _CACHE:
                continue
            arg = raw[i + 1] | ext
            if op == _EXTENDED_ARG:
                ext, start = arg << 8, i if start < 0 else start
                continue
            self.offsets.append(i)
            self.starts.append(i if start < 0 else start)
            self.ops.append(op)
            self.args.append(arg)
            ext, start = 0, -1
        self.at = {o: k for k, o in enumerate(self.offsets)}
        self.positions = list(code.co_positions())  # one per code unit, caches included
        self.raw = raw

    def position(self, k: int):
        return self.positions[self.offsets[k] // 2]

    def target(self, k: int) -> int:
        """The offset a forward jump at instruction k goes to (relative to after its caches)."""
        after = self.offsets[k] + 2
        while after < len(self.raw) and self.raw[after] == _CACHE:
            after += 2
        return after + 2 * self.args[k]

    def names(self, k: int) -> tuple[str, ...]:
        """The local, cell or free variables instruction k names."""
        op, arg = self.ops[k], self.args[k]
        name = self.code._varname_from_oparg
        if op in _ONE:
            return (name(arg),)
        if op in _TWO:
            return (name(arg >> 4), name(arg & 15))
        return ()


def _within(pos, span) -> bool:
    """Whether an instruction's source span (a co_positions tuple) lies inside `span`."""
    if pos[0] is None or pos[2] is None or span[0] is None:
        return False
    return (span[0], span[2]) <= (pos[0], pos[2]) and (pos[1], pos[3]) <= (span[1], span[3])


def _exception_entries(code) -> list[tuple[int, int, int]]:
    """(start, end, target) offsets of the code's exception table (its varint encoding)."""
    table = code.co_exceptiontable
    out, i = [], 0

    def varint() -> int:
        nonlocal i
        b = table[i]
        i += 1
        val = b & 63
        while b & 64:
            b = table[i]
            i += 1
            val = (val << 6) | (b & 63)
        return val

    while i < len(table):
        start = varint() * 2
        length = varint() * 2
        target = varint() * 2
        varint()  # depth and lasti
        out.append((start, start + length, target))
    return out


def _regions(code, starts: list[int]) -> tuple[list[_Region], _Code]:
    c = _Code(code)
    ops = c.ops
    entries = _exception_entries(code)
    handlers = {e[2] for e in entries}
    regions = []
    for start in starts:
        k = c.at.get(start)
        if k is None or k < 2 or ops[k] != _FOR_ITER:
            continue
        compline = c.position(k - 2)[0]  # the accumulator's line: where the comprehension starts
        j = k - 3
        if j >= 0 and ops[j] == _SWAP:
            j -= 1
        names = []
        while j >= 0 and ops[j] in (_LOAD_FAST_AND_CLEAR, _MAKE_CELL):
            if ops[j] == _LOAD_FAST_AND_CLEAR:
                names.append(c.names(j)[0])
            j -= 1
        e = c.at.get(c.target(k))  # the loop's exit: its END_FOR, or the instruction after it
        if e is not None and ops[e] != _END_FOR:
            e -= 1
        if e is None or e <= k or ops[e] != _END_FOR:
            continue
        region = _Region(c.starts[j + 1], c.offsets[e], tuple(reversed(names)))
        region.skip.update(c.offsets[k : e + 1])
        region.skip.update(c.starts[k : e + 1])
        # 3.11 made the comprehension's function on its first line before it evaluated the
        # first iterable: where that iterable starts on a later line, 3.11 had a step there.
        span = c.position(k - 2)
        m = j
        while m > 0 and _within(c.position(m - 1), span):
            m -= 1
        if m >= 0 and _within(c.position(m), span) and c.position(m)[0] != compline:
            region.lead[c.starts[m]] = compline
        # The tail: restores of the saved names (the consumer of the result may sit among them).
        pending = list(region.names)
        t = e + 1
        if t < len(ops) and ops[t] == _POP_TOP:  # 3.13: END_FOR leaves the iterator to pop
            t += 1
        while t < len(ops) and pending and ops[t] in _RESTORE_OPS and c.offsets[t] not in handlers:
            for name in c.names(t):
                if name in pending:
                    pending.remove(name)
            t += 1
        for q in range(e + 1, min(t + 1, len(ops))):
            region.tail[c.starts[q]] = compline
        # Its clean-up handler (restore and re-raise), reached when the loop raises.
        for lo, _, target in entries:
            if region.first <= lo <= region.end and target in c.at:
                block = []
                h = c.at[target]
                while h < len(ops) and ops[h] in _CLEANUP_OPS:
                    block.append(c.offsets[h])
                    if ops[h] == _RERAISE:
                        region.skip.update(block)
                        break
                    h += 1
        regions.append(region)
    return regions, c


def _references(c: _Code, regions: list[_Region]) -> tuple[set[str], set[str]]:
    """Names referenced outside every comprehension, and the enclosing code's names that a
    comprehension's body reads or writes (3.11 made them cells, to pass them in)."""
    outside: set[str] = set()
    captures: set[str] = set()
    for k, offset in enumerate(c.offsets):
        names = c.names(k)
        if not names:
            continue
        inside = [r for r in regions if r.first <= offset <= r.end]
        if inside:
            shadow = {n for r in inside for n in r.names}
            captures.update(n for n in names if n not in shadow)
            continue
        own = {n for r in regions if offset in r.tail or offset in r.skip for n in r.names}
        outside.update(n for n in names if n not in own)
    return outside, captures


def _params(code) -> tuple[str, ...]:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & CO_VARARGS) + bool(code.co_flags & CO_VARKEYWORDS)
    return code.co_varnames[:n]


def _slots_311(code, hidden: frozenset[str], captures: set[str]) -> tuple[str, ...]:
    params = _params(code)
    own = set(code.co_varnames) | set(code.co_cellvars)
    captured = {n for n in captures if n in own}
    plain = [n for n in code.co_varnames[len(params) :] if n not in hidden and n not in captured]
    cells = sorted((set(code.co_cellvars) | captured) - hidden - set(params))
    return (*params, *plain, *cells, *code.co_freevars)
