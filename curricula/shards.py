"""What a `--shard I/N` build promised, and the checks a merge makes of its shards.

A build writes `build.json` into its folder before its first unit: the builder, its shard,
the options that decide its rows, the corpora it reads (by name, in order: a shard takes
every N-th unit of their concatenation) and how many units the shard holds (after
`--limit`, which a resume may raise: it chooses units, not their rows). A resume with
other options is refused (its rows would mix two builds), and `build merge` refuses shards
that do not make one build: other options, another N, a shard given twice, a shard missing,
or a shard whose build has not finished (`--partial` merges what there is). Each refusal is
one line naming the shard folders and the fix. Folders built before `build.json` existed
merge unchecked, as they did.
"""

from __future__ import annotations

import json
import os

MANIFEST = "build.json"
_DONE_PREFIX = b'{"_done"'  # how a journal's done line starts (journal.Journal.write_unit)


def record_build(out: str, builder: str, shard: tuple[int, int], options: dict, sources: list[str], units: int) -> None:
    """Write OUT/build.json, or check that a resumed build is the one that began there."""
    from codeexecutor.atomic import write_json
    from codeexecutor.errors import UsageError

    manifest = {
        "builder": builder,
        "shard": list(shard),
        "options": options,
        "sources": [os.path.basename(os.path.normpath(s)) for s in sources],
        "units": units,
    }
    path = os.path.join(out, MANIFEST)
    if os.path.isfile(path):
        with open(path) as f:
            before = json.load(f)
        changed = _differences(before, manifest)
        if changed:
            raise UsageError(
                f"{out} holds a build made with {changed[0][1]} and this run has {changed[0][2]}: resume it "
                "with the options it was begun with, or build into a new --out"
            )
    os.makedirs(out, exist_ok=True)
    write_json(path, manifest, ensure_ascii=False)


def _differences(a: dict, b: dict) -> list[tuple[str, str, str]]:
    """(key, a's setting, b's setting) for every setting two manifests disagree on."""
    out = []
    for key in ("builder", "sources", "shard"):
        if a.get(key) != b.get(key):
            out.append((key, f"{key} {_show(a.get(key), key)}", f"{key} {_show(b.get(key), key)}"))
    for key in sorted(set(a.get("options", {})) | set(b.get("options", {}))):
        x, y = a.get("options", {}).get(key), b.get("options", {}).get(key)
        if x != y:
            flag = "--" + key.replace("_", "-")
            out.append((key, f"{flag} {x}", f"{flag} {y}"))
    return out


def _show(value, key: str) -> str:
    if key == "shard" and value:
        return f"{value[0]}/{value[1]}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def done_units(journal: str) -> int:
    """How many finished units a journal holds (its done lines; a scan of bytes, no parsing)."""
    with open(journal, "rb") as f:
        return sum(raw.startswith(_DONE_PREFIX) and raw.endswith(b"\n") for raw in f)


def check_shards(shards: list[str], partial: bool = False) -> None:
    """Refuse (UsageError) shard folders that do not make one whole build."""
    from codeexecutor.errors import UsageError

    manifests = []
    for d in shards:
        path = os.path.join(d, MANIFEST)
        if os.path.isfile(path):
            with open(path) as f:
                manifests.append((d, json.load(f)))
    if not manifests:
        return  # built before build.json: nothing recorded to check
    if len(manifests) < len(shards):
        recorded = {d for d, _ in manifests}
        unrecorded = [d for d in shards if d not in recorded]
        raise UsageError(
            f"{', '.join(unrecorded)} has no {MANIFEST} (built by an older version) and the other shards do: "
            "rebuild it with the same options, or merge the old shards on their own"
        )
    first, reference = manifests[0]
    for d, m in manifests:
        changed = [c for c in _differences(reference, m) if c[0] != "shard"]
        if changed or m["shard"][1] != reference["shard"][1]:
            key, a, b = changed[0] if changed else ("shard", f"N={reference['shard'][1]}", f"N={m['shard'][1]}")
            raise UsageError(
                f"the shards are not one build: {first} has {a} and {d} has {b}; build every shard with the "
                "same options and --shard I/N with one N"
            )
    count = reference["shard"][1]
    seen: dict[int, str] = {}
    for d, m in manifests:
        index = m["shard"][0]
        if index in seen:
            raise UsageError(
                f"shard {index}/{count} is given twice ({seen[index]} and {d}): give each shard folder once"
            )
        seen[index] = d
    if partial:
        return
    missing = [i for i in range(count) if i not in seen]
    if missing:
        named = ", ".join(f"{i}/{count}" for i in missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise UsageError(
            f"shard {named} missing from the merge ({len(seen)} of {count} given): build and add them, "
            "or pass --partial to merge the shards there are"
        )
    for d, m in manifests:
        done = done_units(os.path.join(d, "journal.jsonl"))
        if done < m["units"]:
            raise UsageError(
                f"{d} is unfinished ({done} of its {m['units']} units built): resume it with its build "
                "command, or pass --partial to merge what is built"
            )
