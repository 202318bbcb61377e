"""`codeexecutor draw pack`: what one GPU draw carries beside the working tree, into
`.campaign/` (git-ignored).

A lent GPU machine has Python 3.12 with PyTorch but no package registry, no ../shared and
15 minutes, so the draw builds nothing there: it trains on ids tokenized here. By default
they are the committed data (curricula/packed/, campaign/release.py), which travels in
the working tree, and the pack holds the rest:

- `data.tar.xz`: the tokenizer, the curriculum over the packed sources, the fixed
  300-example test sample of each test set (raw rows, scored there as `evaluate --limit`
  scores them here);
- `whl/`: wheels of what the device lacks, at the versions requirements.txt pins;
- `manifest.json`: the data fingerprint and format the ids were made in, the interpreter
  that traced the data, each source's parts and tokens, and the sizes. `verify` checks it
  against this checkout (`draw plan` here, the draw there): ids of another data format, a
  missing file or more than the 64 MiB a call carries are refused in one line; a pack made
  before code changed elsewhere stays good.

`--build` prepares the recipe's data here instead (`codeexecutor pretrain --until
tokenize`: builds, a tokenizer, every source tokenized once, all resumable, in `--prep`)
and packs its ids into `ids/NAME.ids.xz` (campaign/ids.py); `--smoke` packs the demo
datasets (curricula/demo.yaml) with no wheels: what `CAMPAIGN_SMOKE=1 run_draw.sh` runs on
the CPU, in CI.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import pathlib
import shutil
import tarfile
import tempfile
from dataclasses import dataclass

from codeexecutor.campaign.room import (
    DEEPSPEED_ALLOWANCE,
    LIMIT,
    OTHER_ALLOWANCE,
    TREE_ALLOWANCE,
    WHEELS_ALLOWANCE,
    test_samples,
    tree_bytes,
)
from codeexecutor.errors import UsageError

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACK = ROOT / ".campaign"
RECIPE = ROOT / "curricula" / "recipes" / "gpu-draw.yaml"
SMOKE_RECIPE = ROOT / "curricula" / "demo.yaml"
CODE = ("codeexecutor", "curricula", "eval", "mutation", "benchmarks", "ds_configs")  # what the draw runs
CODE_FILES = ("run_pretrain.sh", "run_draw.sh")


def code_hash(root: pathlib.Path = ROOT) -> str:
    """A hash of the source files the draw runs (Python, shell, YAML, JSON under CODE): the
    same checkout here and on the device, or a stale pack."""
    h = hashlib.sha256()
    files = [root / f for f in CODE_FILES if (root / f).exists()]
    for d in CODE:
        files += [
            p
            for p in (root / d).rglob("*")
            if p.suffix in (".py", ".sh", ".yaml", ".json")
            and "results" not in p.parts
            and "__pycache__" not in p.parts
            and ".campaign" not in p.parts
        ]
    for path in sorted(files):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def rebased_recipe(recipe: pathlib.Path, data: pathlib.Path) -> dict:
    """The recipe with its datasets under `data` (each source's last two path parts,
    `BUILD/NAME`, and data.dir = `data`): a recipe for datasets built elsewhere (`--data`)."""
    import yaml

    raw = yaml.safe_load(recipe.read_text())
    for stage in raw["stages"]:
        for src in stage["sources"]:
            src["path"] = str(pathlib.PurePath(*pathlib.PurePath(src["path"]).parts[-2:]))
    raw.setdefault("data", {})["dir"] = str(data)
    return raw


def _pack_ids(job: tuple) -> dict:
    from codeexecutor.campaign.ids import pack_tokenized

    src, dst, *rows = job
    return pack_tokenized(src, dst, max_rows=rows[0] if rows else None)


def fit_cut(figures: dict[str, dict], room: int) -> dict[str, int]:
    """Rows to keep of each source so that the ids fit in `room` bytes ({} where they fit):
    the sources dearest a token give up rows first (SingleLine's short rows), each down to
    a tenth of its rows, then the next, so the largest set of unique tokens fits."""
    over = sum(f["bytes"] for f in figures.values()) - room
    cut: dict[str, int] = {}
    for name, f in sorted(figures.items(), key=lambda kv: -kv[1]["bytes_per_token"]):
        if over <= 0:
            break
        if not f["rows"] or f["bytes"] < 2**20:
            continue
        per_row = f["bytes"] / f["rows"]
        drop = min(f["rows"] * 9 // 10, int(over / per_row * 1.03) + 1)  # 3%: a cut source packs a little worse a row
        cut[name] = f["rows"] - drop
        over -= drop * per_row
    return cut


@dataclass(frozen=True)
class Prep:
    """How a pack that is built here is prepared: the prep folder (`pretrain --until
    tokenize` runs there, resumable; default runs/draw-prep), a folder of built datasets to
    take the sources from instead of building them (`data`), the interpreter to assume
    where the builds do not say which traced them, and the workers that pack the ids."""

    folder: str | None = None
    data: str | None = None
    assume_python: str | None = None
    workers: int | None = None


def pack(
    recipe: str | None = None,
    out: str | None = None,
    overrides: list[str] = (),
    smoke: bool = False,
    wheels: bool = True,
    build: bool = False,
    committed: pathlib.Path | None = None,
    prep: Prep | None = None,
) -> dict:
    """The draw's pack; returns its manifest. From the committed data (campaign/release.py)
    unless asked to `build`, given a prep folder or data, or packing the smoke run's demo
    data: then prepared here (pretrain --until tokenize) and packed."""
    recipe_path = pathlib.Path(recipe) if recipe else (SMOKE_RECIPE if smoke else RECIPE)
    out_dir = pathlib.Path(out) if out else PACK
    prep = prep or Prep()
    if not (build or smoke or prep.data or prep.folder):
        return _pack_committed(recipe_path, out_dir, list(overrides), wheels, committed)
    return _pack_built(recipe_path, out_dir, overrides, smoke, wheels, prep)


def _pack_committed(
    recipe_path: pathlib.Path, out_dir: pathlib.Path, overrides: list[str], wheels: bool, where: pathlib.Path | None
) -> dict:
    """The pack of the committed data (`where`: curricula/packed): its ids stay in the
    working tree (they travel with it); the pack holds the curriculum, tokenizer, test
    samples and wheels."""
    from codeexecutor.campaign import release
    from codeexecutor.training.recipe import load_recipe

    where = where or release.RELEASE
    cur, _ = load_recipe(str(recipe_path), None, overrides)  # no folder of its data is looked for: nothing is built
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    sources, test = release.to_campaign(cur, out_dir, where)
    committed = release.read_manifest(where)
    pythons = {b.get("python") for b in committed["builds"].values()}
    if None in pythons or not pythons:
        raise UsageError(f"{where}/manifest.json does not say which interpreter traced a build: add it again")
    if len(pythons) > 1:
        raise UsageError(f"the committed builds were traced by Python {', '.join(sorted(pythons))}: add them from one")
    head = {
        "committed": str(where.relative_to(ROOT)) if where.is_relative_to(ROOT) else str(where),
        "fingerprint": committed["fingerprint"],
        "data_format": committed["data_format"],
        "python": next(iter(pythons), None),
    }
    return _finish(out_dir, recipe_path, sources, test, head, wheels, smoke=False, tokenizer=committed["identity"])


def _pack_built(
    recipe_path: pathlib.Path, out_dir: pathlib.Path, overrides, smoke: bool, wheels: bool, prep: Prep
) -> dict:
    """Prepare (pretrain --until tokenize: build, tokenizer, tokenize, each resumable) and
    pack the ids into the pack itself."""
    from codeexecutor.pretrain import Pretrain
    from codeexecutor.training.data_format import DATA_FORMAT, fingerprint

    default = ROOT / "runs" / ("draw-prep-smoke" if smoke else "draw-prep")
    prep_dir = pathlib.Path(os.path.abspath(prep.folder)) if prep.folder else default
    if prep.data:
        recipe_path = _rebase_on(recipe_path, pathlib.Path(prep.data), prep_dir)
    run = Pretrain(
        str(recipe_path), out=str(prep_dir), resume=True, base_dir=str(ROOT), overrides=list(overrides), score=False
    )
    python = _prepared(run, prep.assume_python)
    tokenized = prep_dir / "tokenized"
    folders = _folders(tokenized)
    markers = {
        p: json.loads((tokenized / folder / "tokenized.json").read_text()) | {"folder": folder}
        for p, folder in folders.items()
    }
    figures = _pack_sources(tokenized, markers, out_dir, prep.workers, wheels and not smoke)
    tokenizer = prep_dir / "tokenizer"
    if not tokenizer.is_dir():
        tokenizer = pathlib.Path(run.record["phases"]["tokenizer"]["tokenizer"])
    sizes = _data_tar(out_dir, tokenizer, ROOT / run.cur.data.dir, tokenized, folders)
    ident = {
        k: next(iter(markers.values()))[k] for k in ("tokenizer", "profile", "max_code_length", "max_trace_length")
    }
    sources = {
        folder: {**markers[p], **figures[folder], "parts": [f"ids/{folder}.ids.xz"], "in": "pack"}
        for p, folder in folders.items()
    }
    head = {"fingerprint": fingerprint(ident), "data_format": DATA_FORMAT, "python": python}
    return _finish(out_dir, recipe_path, sources, sizes, head, wheels, smoke, run.record["phases"].get("tokenizer", {}))


def _rebase_on(recipe_path: pathlib.Path, data: pathlib.Path, prep_dir: pathlib.Path) -> pathlib.Path:
    """The recipe with its sources looked for under the built folder `data` (`--data`),
    written into the prep folder; refused in one line where `data` is not its datasets."""
    import yaml

    if not data.is_dir():
        raise UsageError(
            f"no built datasets at {data}: build them (codeexecutor pretrain --recipe R --until build) "
            "or leave out --data to build the recipe's"
        )
    raw = rebased_recipe(recipe_path, data.resolve())
    lacking = [src["path"] for st in raw["stages"] for src in st["sources"] if not (data / src["path"]).is_dir()]
    if lacking and not (raw["data"].get("builds")):
        raise UsageError(
            f"{data} has no {lacking[0]}: not this recipe's datasets "
            "(each source is looked for as BUILD/NAME under --data)"
        )
    prep_dir.mkdir(parents=True, exist_ok=True)
    out = prep_dir / "recipe.yaml"
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def _prepared(run, assume_python: str | None) -> str | None:
    """Runs the prep up to its tokenized sources; the one interpreter that traced them
    (refused in one line where a source is missing, unrecorded or of mixed interpreters)."""
    from codeexecutor.execution.interpreters import dataset_python

    cur = run.cur
    sources = list(dict.fromkeys(s.path for st in cur.stages for s in st.sources))
    missing = [p for p in sources if not (ROOT / p).is_dir() and not cur.data.builds]
    if missing:
        raise UsageError(f"{missing[0]} is missing and the recipe builds nothing: build it, or pass --data DIR")
    run.run(until="tokenize")
    pythons = {dataset_python(str(ROOT / p)) or assume_python for p in sources}
    if None in pythons:
        raise UsageError(
            f"a dataset of {cur.data.dir} does not say which interpreter traced it (built before builds "
            "recorded it): rebuild it, or name it with --assume-python X.Y"
        )
    if len(pythons) > 1:
        raise UsageError(f"{cur.data.dir} mixes builds of Python {', '.join(sorted(pythons))}: rebuild with one")
    return next(iter(pythons), None)


def _pack_sources(
    tokenized: pathlib.Path, markers: dict, out_dir: pathlib.Path, workers: int | None, wheels: bool
) -> dict:
    """Each tokenized source's ids into `out_dir/ids/`, a process a source; where they are
    over what a call carries beside the tree (and the wheels), the costliest sources' first
    rows only, packed again. The figures of each source's ids, by folder."""
    from concurrent.futures import ProcessPoolExecutor

    shutil.rmtree(out_dir, ignore_errors=True)
    (out_dir / "ids").mkdir(parents=True)
    jobs = [(str(tokenized / m["folder"]), str(out_dir / "ids" / f"{m['folder']}.ids.xz")) for m in markers.values()]
    with ProcessPoolExecutor(max_workers=max(1, min(len(jobs), workers or os.cpu_count() or 1))) as ex:
        figures = dict(zip((m["folder"] for m in markers.values()), ex.map(_pack_ids, jobs)))
        room = LIMIT - tree_bytes() - OTHER_ALLOWANCE - (WHEELS_ALLOWANCE if wheels else 0)
        cut = fit_cut(figures, room)
        if cut:
            print(f"draw pack: the ids are over what a call carries beside the rest: keeping {cut}", flush=True)
            redo = [(src, dst, cut[name]) for (src, dst), name in zip(jobs, figures) if name in cut]
            figures.update(zip((os.path.basename(src) for src, _, _ in redo), ex.map(_pack_ids, redo)))
    return figures


def _data_tar(
    out_dir: pathlib.Path, tokenizer: pathlib.Path, data_dir: pathlib.Path, tokenized: pathlib.Path, folders: dict
) -> dict:
    """`data.tar.xz`: the tokenizer, the test samples and the curriculum with its sources
    as the pack holds them. The test samples' sizes."""
    import yaml

    with tempfile.TemporaryDirectory() as tmp:
        stage = pathlib.Path(tmp) / "data"
        shutil.copytree(tokenizer, stage / "tokenizer")
        sizes = test_samples(data_dir, stage / "test")
        relative = yaml.safe_load((tokenized / "curriculum.yaml").read_text())
        for st in relative["stages"]:
            for src in st["sources"]:
                src["path"] = "tokenized/" + folders[os.path.normpath(src["path"])]
        relative["model"]["tokenizer"] = "tokenizer"
        relative["data"] = {"dir": "."}
        (stage / "curriculum.yaml").write_text(yaml.safe_dump(relative, sort_keys=False))
        with tarfile.open(out_dir / "data.tar.xz", "w:xz", preset=6) as tar:
            tar.add(stage, arcname="data")
    return sizes


def _finish(
    out_dir: pathlib.Path,
    recipe_path: pathlib.Path,
    sources: dict,
    test: dict,
    head: dict,
    wheels: bool,
    smoke: bool,
    tokenizer: dict,
) -> dict:
    """The wheels (where room is) and the manifest, beside the pack's data."""
    ids = sum(f["bytes"] for f in sources.values() if f["in"] == "pack")
    room = LIMIT - tree_bytes() - OTHER_ALLOWANCE - (WHEELS_ALLOWANCE if wheels and not smoke else 0)
    carry_deepspeed = False
    if wheels and not smoke:
        from codeexecutor.campaign.wheels import download
        from codeexecutor.campaign.wheels import missing as gaps

        carry_deepspeed = ids + DEEPSPEED_ALLOWANCE <= room
        if not carry_deepspeed:
            print(
                "draw pack: no room for DeepSpeed's wheels beside the data: the draw trains on the torch engine and "
                "skips its launcher, ZeRO and fp16 checks",
                flush=True,
            )
        (out_dir / "whl").mkdir()
        download(out_dir / "whl", deepspeed=carry_deepspeed)
        lacking = gaps(out_dir / "whl")
        if lacking:
            raise UsageError(f"requirements neither carried nor on the device: {lacking}; add them to wheels.CARRY")
    size = sum(f.stat().st_size for f in out_dir.rglob("*") if f.is_file())
    parts = {
        "ids": ids,
        "ids_in_tree": sum(f["bytes"] for f in sources.values() if f["in"] == "tree"),
        "data": (out_dir / "data.tar.xz").stat().st_size,
        "wheels": sum(f.stat().st_size for f in (out_dir / "whl").glob("*.whl")) if (out_dir / "whl").is_dir() else 0,
    }
    manifest = {
        **head,
        "code": code_hash(),
        "recipe": os.path.relpath(recipe_path, ROOT),
        "tree_bytes": tree_bytes(),
        "smoke": smoke,
        "deepspeed": carry_deepspeed or (smoke or not wheels),
        "packed": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "bytes": size,
        "parts": parts,
        "tokens": sum(f["tokens"] for f in sources.values()),
        "tokenizer": tokenizer,
        "sources": sources,
        "test": test,
    }
    for m in manifest["sources"].values():
        m.pop("source_fingerprint", None)
        m["source"] = os.path.relpath(m["source"], ROOT) if m.get("source") else None  # no paths of this machine
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if size + manifest["tree_bytes"] > LIMIT:
        raise UsageError(
            f"the pack is {size / 2**20:.1f} MiB, too large to carry with the working tree's "
            f"{manifest['tree_bytes'] / 2**20:.1f} MiB (limit {LIMIT / 2**20:.0f}): pack less data"
        )
    return manifest


def part_paths(manifest: dict, name: str, pack_dir: pathlib.Path) -> list[pathlib.Path]:
    """A packed source's ids files: in the working tree (committed data) or in the pack."""
    entry = manifest["sources"][name]
    base = ROOT if entry.get("in") == "tree" else pack_dir
    return [base / p for p in entry.get("parts") or [f"ids/{name}.ids.xz"]]


def verify(manifest: dict, pack_dir: pathlib.Path, tree: int | None = None) -> int:
    """Bytes left of what a call carries, for a pack that can run on this checkout: its ids
    of this code's data format (made by the code recorded for it), every file there, and
    all of it within the limit beside the working tree (`tree` bytes; the pack's record
    of it where not given). Else one line naming the fix (UsageError)."""
    from codeexecutor.training.data_format import format_problem

    problem = format_problem(manifest.get("data_format"), str(pack_dir), "pack again (codeexecutor draw pack)")
    if problem:
        raise UsageError(problem)
    if manifest.get("committed"):
        from codeexecutor.campaign.release import read_manifest

        committed = read_manifest(ROOT / manifest["committed"]) or {}
        if committed.get("fingerprint") != manifest.get("fingerprint"):
            raise UsageError(
                f"{pack_dir} was packed for data {manifest.get('fingerprint')} and {manifest['committed']} "
                f"holds {committed.get('fingerprint')}: pack again (codeexecutor draw pack)"
            )
    if not manifest.get("python"):
        raise UsageError(f"{pack_dir} does not say which interpreter traced its data: pack it again")
    lost = [str(f) for n in manifest.get("sources", {}) for f in part_paths(manifest, n, pack_dir) if not f.is_file()]
    if lost or not (pack_dir / "data.tar.xz").is_file():
        raise UsageError(
            f"{pack_dir} lacks {lost[0] if lost else 'data.tar.xz'}: pack it again (codeexecutor draw pack)"
        )
    size = sum(f.stat().st_size for f in pack_dir.rglob("*") if f.is_file())
    tree = manifest.get("tree_bytes", TREE_ALLOWANCE) if tree is None else tree
    if size + tree > LIMIT:
        raise UsageError(
            f"{pack_dir} is {size / 2**20:.1f} MiB beside a working tree of {tree / 2**20:.1f} MiB, over "
            f"the {LIMIT / 2**20:.0f} MiB a call carries: pack again with less"
        )
    return LIMIT - size - tree


def _folders(tokenized: pathlib.Path) -> dict[str, str]:
    """source path -> its tokenized folder's name, from the tokenized curriculum."""
    import yaml

    raw = yaml.safe_load((tokenized / "curriculum.yaml").read_text())
    out: dict[str, str] = {}
    for st in raw["stages"]:
        for src in st["sources"]:
            out.setdefault(os.path.normpath(src["path"]), os.path.basename(os.path.normpath(src["path"])))
    return out


def summary(manifest: dict, out: pathlib.Path) -> str:
    """The lines `draw pack` prints: size, tokens, bytes a token."""
    size, tree, parts = manifest["bytes"], manifest["tree_bytes"], manifest["parts"]
    ids = parts["ids"] + parts.get("ids_in_tree", 0)
    lines = [
        f"{out}: {size / 2**20:.1f} MiB (ids {parts['ids'] / 2**20:.1f}, wheels {parts['wheels'] / 2**20:.1f}, "
        f"the rest {parts['data'] / 2**20:.1f}) beside a working tree of {tree / 2**20:.1f} MiB "
        f"({parts.get('ids_in_tree', 0) / 2**20:.1f} of them committed ids): "
        f"{(size + tree) / 2**20:.1f} of the {LIMIT / 2**20:.0f} MiB a call carries",
        f"tokens carried: {manifest['tokens']:,} in {len(manifest['sources'])} sources "
        f"({ids / max(manifest['tokens'], 1):.3f} bytes a token); data traced by Python {manifest['python']}; "
        f"data fingerprint {manifest['fingerprint']} (format {manifest['data_format']})",
    ]
    return "\n".join(lines)
