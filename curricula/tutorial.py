"""Tutorial: runnable examples of the official Python tutorial, multiplied with CRP.

Sources: the tutorial's reST files (`*.rst.txt`) as Debian's `python3.11-doc` installs
them (/usr/share/doc/python3.11/html/_sources/tutorial), else
../shared/data/python-tutorial/tutorial_rst, else `--sources DIR`.

Extraction: every interactive session (`>>>` / `...` lines, output lines dropped; a
blank line ends it) and every literal block (`::`) that parses as Python becomes a
snippet. Snippets are run in the sandbox without input; those that do not run alone
(NameError on a name from an earlier example, reading input, ...) are dropped and
counted. Each kept snippet is multiplied by CRP on its numeric literals (the paper's
procedure), the mutants executed, and the `ok` ones kept. Splits are by snippet.
"""

from __future__ import annotations

import concurrent.futures as cf
import glob
import logging
import os
import re
import time
from collections import Counter

from codeexecutor.atomic import write_json
from codeexecutor.source import parse_quietly
from curricula.common import RowKey, assign_splits, make_example, save_dataset
from curricula.journal import Journal, read_journal, record_units, traced_by

log = logging.getLogger("curricula.tutorial")
DEBIAN_SOURCES = "/usr/share/doc/python3.11/html/_sources/tutorial"
TASK = "tutorial"


def default_sources() -> str:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for candidate in (DEBIAN_SOURCES, os.path.join(here, "..", "shared", "data", "python-tutorial", "tutorial_rst")):
        if glob.glob(os.path.join(candidate, "*.rst.txt")):
            return os.path.normpath(candidate)
    from codeexecutor.errors import UsageError

    raise UsageError(
        "no Python tutorial sources found: `apt-get install python3.11-doc` "
        f"(gives {DEBIAN_SOURCES}) or pass --sources DIR with the *.rst.txt files"
    )


_PROMPT = re.compile(r"^(\s*)(>>>|\.\.\.)( |$)")


def extract_snippets(text: str, name: str) -> list[tuple[str, str]]:
    """(snippet id, code) pairs from one reST file."""

    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = _PROMPT.match(lines[i])
        if m and m.group(2) == ">>>":
            start, code = i, []
            while i < len(lines) and lines[i].strip():
                pm = _PROMPT.match(lines[i])
                if pm:
                    code.append(lines[i][pm.end() :] if pm.group(3) else "")
                i += 1
            snippet = "\n".join(code).strip("\n") + "\n"
            out.append((f"{name}:{start + 1}", snippet))
            continue
        if lines[i].rstrip().endswith("::") and not lines[i].lstrip().startswith(".."):
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block = []
            first = j
            indent = len(lines[j]) - len(lines[j].lstrip()) if j < len(lines) else 0
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) >= indent > 0):
                block.append(lines[j][indent:] if lines[j].strip() else "")
                j += 1
            if block and _PROMPT.match(block[0]):  # an interactive session: the branch above reads it
                i += 1
                continue
            code = "\n".join(block).strip("\n") + "\n"
            if indent > 0 and code.strip():
                try:
                    parse_quietly(code)
                    out.append((f"{name}:{first + 1}", code))
                except SyntaxError:
                    pass
            i = j
            continue
        i += 1
    return out


def string_spans(code: str) -> tuple[tuple[int, int], ...]:
    """Byte ranges of string literals: CRP on tutorials changes numbers only (the paper)."""
    from mutation.parsing import parse, walk

    return tuple((n.start_byte, n.end_byte) for n in walk(parse(code.encode()).root_node) if n.type == "string")


TEST_PCT, VALID_PCT = 12, 6


def build_tutorial(
    out: str, sources: str | None = None, mutants: int = 100, workers: int = 2, seed: int = 0, progress: bool = True
) -> dict:
    from codeexecutor.execution import ExecutorPool
    from mutation import MutationError, mutate

    sources = sources or default_sources()
    os.makedirs(out, exist_ok=True)
    snippets = []
    for path in sorted(glob.glob(os.path.join(sources, "*.rst.txt"))):
        with open(path, encoding="utf-8") as f:
            snippets += extract_snippets(f.read(), os.path.basename(path).split(".")[0])
    if not snippets:
        from codeexecutor.errors import UsageError

        raise UsageError(f"no code found in {sources}/*.rst.txt")
    # A larger held-out share than CodeNet's 5%/5%: the tutorial has only a few hundred
    # snippets; held-out snippets give mutants too (kind "mutant", reported apart).
    splits = assign_splits((sid for sid, _ in snippets), test_pct=TEST_PCT, valid_pct=VALID_PCT)
    journal = Journal(os.path.join(out, "journal.jsonl"))
    journal.check_python()
    todo = [(sid, code) for sid, code in snippets if sid not in journal.done]
    start = time.perf_counter()
    with ExecutorPool(workers) as pool, cf.ThreadPoolExecutor(workers + 1) as threads:

        def task(item):
            sid, code = item
            counts, rows = Counter(), []
            original = pool.execute(code)
            if original.status.value != "ok" or not original.steps:
                counts[f"skip:{original.status.value}"] += 1
                return sid, rows, {"counts": dict(counts)}
            counts["snippets_used"] += 1
            split = splits[sid]
            rows.append(make_example(RowKey(sid, sid, split, TASK), code, original, "snippet"))
            try:
                ms = mutate(code, n=mutants, seed=seed, operators=["CRP"], protected=string_spans(code))
            except MutationError:
                ms = []
            for k, m in enumerate(ms):
                r = pool.execute(m.code)
                counts[f"mutant:{r.status.value}"] += 1
                if r.status.value == "ok":
                    rows.append(
                        make_example(RowKey(f"{sid}_m{k:03d}", sid, split, TASK, sid), m.code, r, "mutant", m.operators)
                    )
            counts["examples"] += len(rows)
            return sid, rows, {"counts": dict(counts)}

        record_units(
            journal,
            threads.map(task, todo),
            len(snippets),
            len(snippets) - len(todo),
            "tutorial",
            "snippet",
            progress,
            log,
        )
    by_split: dict[str, list[dict]] = {}
    counts = Counter()
    for kind, obj in read_journal(os.path.join(out, "journal.jsonl")):
        if kind == "done":
            counts.update(obj.get("counts", {}))
        else:
            by_split.setdefault(obj["split"], []).append(obj)
    sizes = save_dataset(by_split, os.path.join(out, TASK))
    stats = {
        "python": traced_by(os.path.join(out, "journal.jsonl")),
        "sources": sources,
        "snippets": len(snippets),
        "counts": dict(sorted(counts.items())),
        "datasets": {TASK: sizes},
        "seconds_this_run": round(time.perf_counter() - start, 1),
    }
    write_json(os.path.join(out, "stats.json"), stats, ensure_ascii=False)
    return stats
