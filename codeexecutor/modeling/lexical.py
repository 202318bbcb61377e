"""Python lexical tokens, as the official release feeds code and values to its model.

The release's `code_tokens` are a program's Python tokens with a 0-based line token
before each line (`<0> s = [ 'x' , 'y' ]`; string literals keep their quotes), and its
trace values are the tokens of the value with string quotes dropped
(`s : [ x , y ]`). Two functions give those forms:

* `code_lines(source)`: per source line that starts a token, (0-based line, indent
  change, tokens). Python's own `tokenize` decides (multi-line strings and bracketed
  continuations stay whole tokens of the line they start on; comments are dropped);
  source that `tokenize` rejects is cut per line by the same regular expression that
  values use, with indentation read from leading whitespace.
* `value_tokens(text)`: a rendered value (see execution/render.py) cut into tokens,
  string quotes dropped; `<function>`-style renderings stay one token.
"""

from __future__ import annotations

import io
import re
import tokenize

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING, tokenize.ENDMARKER}

_TOKEN = re.compile(
    r"""
    <[A-Za-z_][\w ]*>                                          # <function>, <class>, <Foo object>
  | (?:[rRbBuUfF]{1,2})?(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")  # a string literal
  | (?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?     # a number
  | \w+                                                         # a name
  | \.\.\.|\*\*=?|//=?|<<=?|>>=?|->|:=|[-+*/%@&|^<>=!]=         # multi-character operators
  | \S                                                          # anything else, one character
""",
    re.VERBOSE,
)
_STRING = re.compile(r"""^([rRbBuUfF]{0,2})('|")(.*)\2$""", re.DOTALL)


def regex_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def unquote(token: str) -> str:
    """A string literal token without its prefix and quotes (escaped quotes unescaped);
    any other token unchanged."""
    m = _STRING.match(token)
    if not m:
        return token
    quote = m.group(2)
    return m.group(3).replace("\\" + quote, quote)


def value_tokens(text: str) -> list[str]:
    """Tokens of a rendered value with string quotes dropped (empty strings vanish)."""
    return [t for t in (unquote(tok) for tok in regex_tokens(text)) if t]


def lexical_value(text: str) -> str:
    return " ".join(value_tokens(text))


def code_lines(source: str) -> list[tuple[int, int, list[str]]]:
    """(0-based line, indent change, tokens) for every line on which a token starts.

    The indent change is +1 when the line opens a block, -n when it closes n, else 0."""
    try:
        return _tokenized(source)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _by_regex(source)


_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python >= 3.12 cuts f-strings into parts
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def _tokenized(source: str) -> list[tuple[int, int, list[str]]]:
    lines: dict[int, list[str]] = {}
    change: dict[int, int] = {}
    pending = 0
    text = source.splitlines(keepends=True)
    fstring_depth, fstring_start = 0, None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.INDENT:
            pending += 1
            continue
        if tok.type == tokenize.DEDENT:
            pending -= 1
            continue
        if _FSTRING_START is not None and tok.type in (_FSTRING_START, _FSTRING_END) or fstring_depth:
            # one token per f-string, as Python 3.11 gives it, whatever the Python version
            if tok.type == _FSTRING_START:
                fstring_depth += 1
                fstring_start = fstring_start or tok.start
            elif tok.type == _FSTRING_END:
                fstring_depth -= 1
                if not fstring_depth:
                    tok = tok._replace(string=_slice(text, fstring_start, tok.end), start=fstring_start)
                    fstring_start = None
            if fstring_depth:
                continue
        if tok.type in _SKIP:
            continue
        row = tok.start[0] - 1
        if row not in lines:
            lines[row] = []
            change[row] = pending
            pending = 0
        lines[row].append(tok.string)
    return [(row, change[row], toks) for row, toks in lines.items()]


def _slice(text: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    (r0, c0), (r1, c1) = start, end
    if r0 == r1:
        return text[r0 - 1][c0:c1]
    return text[r0 - 1][c0:] + "".join(text[r0 : r1 - 1]) + text[r1 - 1][:c1]


def _by_regex(source: str) -> list[tuple[int, int, list[str]]]:
    out = []
    for row, delta, line in indented_lines(source):
        tokens = regex_tokens(line)
        if tokens and not line.startswith("#"):
            out.append((row, delta, tokens))
    return out


def indented_lines(source: str) -> list[tuple[int, int, str]]:
    """(0-based line, indent change, stripped line) for every non-blank line, the
    indentation read from leading whitespace (one level per new, deeper width)."""
    out = []
    levels = [0]
    for row, line in enumerate(source.splitlines()):
        stripped = line.strip()
        if not stripped:
            continue
        width = len(line) - len(line.lstrip(" \t"))
        delta = 0
        if width > levels[-1]:
            levels.append(width)
            delta = 1
        else:
            while len(levels) > 1 and width < levels[-1]:
                levels.pop()
                delta -= 1
        out.append((row, delta, stripped))
    return out
