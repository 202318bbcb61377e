"""The licence of a folder of Python code, found where packages keep it.

A functions build stamps every row with its source's licence and refuses a source whose
licence it cannot find (unless the user names one). Where it looks, from the folder up to
three folders above it (a package inside `src/`, a subfolder of a repository):

- `MANIFEST.md` with a `**License.** NAME` line (the shared corpora's provenance files);
- `LICENSE*`, `LICENCE*`, `COPYING*` files, named by their text (MIT, BSD, Apache, GPL, ...);
- `PKG-INFO` or `METADATA` (an unpacked sdist), and beside an installed package's folder the
  `*.dist-info/METADATA` that lists it: the `License-Expression`/`License` field or a
  `License ::` classifier.
"""

from __future__ import annotations

import glob
import os
import re

_TEXTS = (  # (a phrase of the licence's text, its SPDX name), the first match wins
    ("Permission is hereby granted, free of charge", "MIT"),
    ("MIT License", "MIT"),
    ("Apache License", "Apache-2.0"),
    ("GNU LESSER GENERAL PUBLIC LICENSE", "LGPL"),
    ("GNU GENERAL PUBLIC LICENSE", "GPL"),
    ("Mozilla Public License", "MPL-2.0"),
    ("PYTHON SOFTWARE FOUNDATION LICENSE", "PSF-2.0"),
    ("free and unencumbered software released into the public domain", "Unlicense"),
    ("Permission to use, copy, modify, and/or distribute", "ISC"),
)
_CLASSIFIER = re.compile(r"^Classifier:\s*License :: (?:OSI Approved :: )?(.+?)\s*$", re.M)
_FIELD = re.compile(r"^License(?:-Expression)?:\s*(\S.{0,60}?)\s*$", re.M)


def name_of_text(text: str) -> str:
    """The licence a LICENSE file's text is (SPDX-style), or its first line."""
    if "Redistribution and use in source and binary forms" in text:
        return "BSD-3-Clause" if "Neither the name" in text or "names of its contributors" in text else "BSD-2-Clause"
    folded = " ".join(text.split())
    for phrase, name in _TEXTS:
        if phrase.lower() in folded.lower():
            return name
    return next((line.strip()[:40] for line in text.splitlines() if line.strip()), "")


def _from_metadata(path: str) -> str:
    text = (
        open(path, encoding="utf-8", errors="replace").read(20000).split("\n\n", 1)[0]
    )  # the header, not the description
    m = _FIELD.search(text)
    if m and m.group(1).upper() not in ("UNKNOWN", "NONE"):
        return m.group(1)
    m = _CLASSIFIER.search(text)
    return m.group(1) if m else ""


def _in_folder(folder: str) -> tuple[str, str]:
    manifest = os.path.join(folder, "MANIFEST.md")
    if os.path.isfile(manifest):
        m = re.search(
            r"\*\*License\.\*\*\s*([A-Za-z0-9.\- ]+?)[\s(.]", open(manifest, encoding="utf-8", errors="replace").read()
        )
        if m:
            return m.group(1).strip(), manifest
    for pattern in ("LICEN[CS]E*", "COPYING*"):
        for path in sorted(glob.glob(os.path.join(folder, pattern))):
            if os.path.isfile(path):
                return name_of_text(open(path, encoding="utf-8", errors="replace").read(5000)), path
    for name in ("PKG-INFO", "METADATA"):
        path = os.path.join(folder, name)
        licence = _from_metadata(path) if os.path.isfile(path) else ""
        if licence:
            return licence, path
    return "", ""


def _installed(root: str) -> tuple[str, str]:
    """An installed package's licence: the dist-info beside it whose top_level.txt or RECORD names it."""
    package = os.path.basename(os.path.normpath(root))
    for info in sorted(glob.glob(os.path.join(os.path.dirname(os.path.normpath(root)), "*.dist-info"))):
        names = set()
        for listing in ("top_level.txt", "RECORD"):
            path = os.path.join(info, listing)
            if os.path.isfile(path):
                names |= {line.split("/", 1)[0].split(",", 1)[0].strip() for line in open(path, errors="replace")}
        if package in names:
            licence, where = _in_folder(info)
            if not licence:
                licence_dir = os.path.join(info, "licenses")
                licence, where = _in_folder(licence_dir) if os.path.isdir(licence_dir) else ("", "")
            if licence:
                return licence, where
    return "", ""


def find_licence(root: str, levels: int = 3) -> tuple[str, str]:
    """(licence, the file that says so) of a folder of code; ("", "") where none is found."""
    folder = os.path.abspath(root)
    found = _installed(folder)
    if found[0]:
        return found
    for _ in range(levels + 1):
        found = _in_folder(folder)
        if found[0]:
            return found
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return "", ""
