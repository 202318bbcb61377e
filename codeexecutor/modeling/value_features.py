"""The features the value model's `features` architecture reads off one use.

A use is (name, use, before, after): the missing name, the kind of use (`name`,
`attribute`, `call`), and the code before and after it. Each feature is a string that
`hashed` maps to an embedding bucket. Three groups:

* the name itself: the whole name, its pieces (`has_min_size` -> has, min, size), its
  affixes and shape;
* the tokens just before and after the use, and the first token of its line;
* what the context says about the name elsewhere (`FEATURE_SET` 2): how it is used
  (`x.append(`, `x[`, `len(x)`), how it is bound (`x = []`, `def x(`, `import x`,
  `for x in`, `x: int`, a default `x=None`), what it is compared with or tested against
  (`x == 0`, `isinstance(x, str)`), and whether the value is unpacked (`a, b = f()`).
  These are what a reader of the snippet uses to guess a value's type, and they hold
  across packages, where the name alone does not.
"""

from __future__ import annotations

import re
import zlib

from codeexecutor.execution.values import STDLIB

FEATURE_SET = 2  # the version of `features`: a model folder trained on another is refused
_TOKEN = re.compile(r"\w+|[^\w\s]")
_PIECES = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_WINDOW = 2000  # characters of context either side searched for the name's bindings and uses


def hashed(feats: list[str], buckets: int) -> list[int]:
    return [zlib.crc32(f.encode("utf-8", "surrogatepass")) % buckets for f in feats]


def features(name: str, use: str, before: str, after: str) -> list[str]:
    """The features of one use (strings; the classifier hashes them)."""
    return (
        _name_features(name, use) + _local_features(name, use, before, after) + _context_features(name, before, after)
    )


def _name_features(name: str, use: str) -> list[str]:
    out = [f"n={name}", f"u={use}", f"un={use}:{name}", f"suf={name[-3:]}", f"pre={name[:3]}"]
    pieces = [p.lower() for p in _PIECES.findall(name)]
    out += [f"p={p}" for p in pieces] + [f"up={use}:{p}" for p in pieces]
    if pieces:
        out += [f"last={use}:{pieces[-1]}", f"first={use}:{pieces[0]}"]
    shape = "UPPER" if name.isupper() else "Cap" if name[:1].isupper() else "_" if name.startswith("_") else "low"
    out.append(f"shape={shape}:{use}")
    if name in STDLIB:
        out.append(f"stdlib:{use}")
    return out


def _local_features(name: str, use: str, before: str, after: str) -> list[str]:
    """The tokens around the use and its line."""
    line = before[before.rfind("\n") + 1 :]
    back = _TOKEN.findall(before[-200:])[-6:]
    ahead = _TOKEN.findall(after[:120])[:6]
    out = [f"b{i}={t}" for i, t in enumerate(reversed(back), 1)] + [f"a{i}={t}" for i, t in enumerate(ahead, 1)]
    b1, b2 = (back[-1] if back else "^"), (back[-2] if len(back) > 1 else "^")
    a1, a2 = (ahead[0] if ahead else "$"), (ahead[1] if len(ahead) > 1 else "$")
    out += [f"b21={b2} {b1}", f"ba={b1}|{a1}", f"a12={a1} {a2}", f"ua={use}:{a1}", f"na={name}:{a1}", f"nb={name}:{b1}"]
    words = _TOKEN.findall(line)
    out.append(f"line={words[0] if words else '^'}:{use}")
    out += [f"bag={t}" for t in set(words[-8:])]
    target = re.match(r"\s*([\w\s,.\[\]*]+?)\s*=(?!=)", line)
    if target and "," in target.group(1):
        out.append(f"unpacked:{use}")
    return out


def _context_features(name: str, before: str, after: str) -> list[str]:
    """How the name is used and bound elsewhere in the context."""
    esc = re.escape(name)
    near = before[-400:] + " " + after[:300]
    wide = before[-_WINDOW:] + " " + after[:_WINDOW]
    out = [f"dot={a}" for a in set(re.findall(rf"(?<![\w.]){esc}\s*\.\s*(\w+)", near))]
    ops = re.findall(rf"(?<![\w.]){esc}\s*([(\[]|==|!=|<|>|\+|-|\*|%|/|\bin\b|\bis\b|\bor\b|\band\b)", near)
    out += [f"op={s}" for s in set(ops)]
    heads = (
        r"\bin|\bnot|\bfor|\bif|\bwhile|\breturn|\bwith|\braise|\byield|\blen\(|\bint\(|\bstr\(|\bfloat\(|\bsorted\("
    )
    out += [f"ctx={s}" for s in set(re.findall(rf"({heads})\s*{esc}\b", near))]
    if re.search(rf"\bdef\s+{esc}\s*\(", wide):
        out.append("bound=def")
    if re.search(rf"\bclass\s+{esc}\b", wide):
        out.append("bound=class")
    if re.search(rf"^\s*import\s+(?:[\w.]+\s+as\s+{esc}\b|{esc}\b)", wide, re.M):
        out.append("bound=import")
    if re.search(rf"^\s*from\s+\S+\s+import\s+[\w\s,(]*\b{esc}\b", wide, re.M):
        out.append("bound=from")
    out += [f"ret={r}" for r in _returns(name, wide)]
    if re.search(rf"\bfor\s+(?:[\w\s,(]*,\s*)?{esc}\b[\w\s,)]*\bin\b", wide):
        out.append("bound=for")
    for rhs in set(re.findall(rf"(?<![\w.]){esc}\s*=(?!=)\s*(['\"]{{2}}|[^\s\w]|\w+)", wide)):
        out.append(f"asg={_shape(rhs)}")
    for rhs in set(re.findall(rf"(?<![\w.]){esc}\s*(\+|-|\*|/|%)=", wide)):
        out.append(f"aug={rhs}")
    for ann in set(re.findall(rf"(?<![\w.]){esc}[ \t]*:[ \t]*(?:'|\")?([A-Za-z_][\w.]*)", wide)):
        out.append(f"ann={ann.split('.')[-1]}")
    for typ in set(re.findall(rf"isinstance\(\s*{esc}\s*,\s*\(?\s*([\w.]+)", wide)):
        out.append(f"isa={typ.split('.')[-1]}")
    for op, rhs in set(
        re.findall(rf"(?<![\w.]){esc}\s*(==|!=|<=|>=|<|>|\bis not\b|\bis\b)\s*(['\"]{{2}}|[^\s\w]|\w+)", wide)
    ):
        out.append(f"cmp={op}{_shape(rhs)}")
    return out


def _returns(name: str, text: str) -> set[str]:
    """What the function `name`, defined in the context, returns: each `return`'s shape."""
    found = re.search(rf"\bdef\s+{re.escape(name)}\s*\(", text)
    if not found:
        return set()
    body = text[found.end() : found.end() + 1500]
    end = re.search(r"\n(?=\S)", body)
    body = body[: end.start()] if end else body
    out = set()
    for value in re.findall(r"\breturn\b[ \t]*([^\n]{0,40})", body):
        value = value.strip()
        if not value:
            out.add("None")
        elif re.match(r"[rbuf]?['\"]", value):
            out.add("str")
        elif value[0] in "([{":
            out.add(value[0] + ("," if "," in value.split(")")[0] else ""))
        else:
            word = re.match(r"[\w.]+\(?", value)
            out.add(_shape(word.group(0)) if word else value[0])
    return out


def _shape(token: str) -> str:
    """A right-hand side's first token as a type hint: literals by kind, names as they are."""
    if token in ("''", '""'):
        return "str0"
    if token in ("'", '"'):
        return "str"
    if token.isdigit():
        return "0" if token == "0" else "int"
    return token
