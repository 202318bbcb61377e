"""`codeexecutor packed add|rows`: the committed training data (curricula/packed/) grown a
part at a time, and read back as rows. The reading side, which training uses, is
training/packed.py; adding a part scores nothing but samples the test sets the way
`evaluate --limit` does, so it lives here, above eval.

    codeexecutor pretrain --recipe curricula/recipes/gpu-draw-part.yaml --out runs/draw-s1 --until tokenize ...
    codeexecutor packed add --prep runs/draw-s1 --part s1of4
    codeexecutor packed rows --out runs/rows [--source codenetmut] [--limit 100]
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import re
import shutil
import subprocess
import tarfile
import tempfile

from codeexecutor.atomic import replacing, write_json
from codeexecutor.errors import UsageError
from codeexecutor.training.data_format import fingerprint
from codeexecutor.training.packed import RELEASE, ROOT, _identity_line, read_manifest, source_figures

LIMIT = 64 * 2**20  # what one device call carries, working tree included
WHEELS_ALLOWANCE = int(8.7 * 2**20)  # the wheels a GPU lease's second call carries, DeepSpeed's with them (measured)
# The GPU model a lease commits and every later call carries (gpu_run/recipe.yaml's model,
# `mini-wide` in int8: 13.4 MiB), counted until one is committed (then the tree holds it).
MODEL_ALLOWANCE = int(13.5 * 2**20)
TEST_SETS = {
    "codenetmut": ("codenetmut", "errors"),
    "tutorial": ("tutorial",),
    "singleline": ("singleline",),
    "functions": ("functions", "functions_errors"),
}  # build folder -> its datasets
TEST_LIMIT = 300  # the fixed test sample of each set: what `evaluate --limit 300` scores


def tree_bytes(root: pathlib.Path = ROOT) -> int:
    """What travels with a device call: tracked files and untracked ones git does not
    ignore (0 where git is not there to say)."""
    try:
        names = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        return 0
    return sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())


def test_samples(data: pathlib.Path, out: pathlib.Path, limit: int = TEST_LIMIT) -> dict:
    """The fixed test sample of each test set (the rows `evaluate --limit` scores), as small
    datasets in the layout of a build, stats.json beside."""
    import datasets

    from eval.evaluate import sample  # the rows `evaluate --limit` scores

    sizes = {}
    for build, names in TEST_SETS.items():
        for name in names:
            folder = data / build / name
            if not folder.is_dir():
                continue
            test = datasets.load_from_disk(str(folder))["test"]
            rows = test.select(sample(len(test), limit))
            datasets.DatasetDict({"test": rows}).save_to_disk(str(out / build / name))
            sizes[f"{build}/{name}"] = len(rows)
        if (data / build / "stats.json").exists():
            shutil.copy(data / build / "stats.json", out / build / "stats.json")
    return sizes


def _write_manifest(release: pathlib.Path, manifest: dict) -> None:
    write_json(release / "manifest.json", manifest)


def add(prep: pathlib.Path, part: str, release: pathlib.Path = RELEASE) -> dict:
    """A finished prep's tokenized sources (`pretrain --until tokenize` in `prep`) added to
    the committed data as part `part`; the first addition also commits its tokenizer and test
    samples. Later parts must have the committed fingerprint (`gpu-draw-part.yaml` uses the
    committed tokenizer). Refused, before anything is written, where the ids would not fit
    a call beside the tree. Returns the manifest."""
    from codeexecutor.training.ids import pack_tokenized

    record, markers, ident = _prep(prep)
    manifest = read_manifest(release) or _new_manifest(release, record, ident)
    if fingerprint(ident) != manifest["fingerprint"]:
        raise UsageError(
            f"{prep} was tokenized as {_identity_line(ident)} with tokenizer {ident['tokenizer']}, the "
            f"committed data as {_identity_line(manifest['identity'])} with {manifest['identity']['tokenizer']}: "
            "tokenize with the committed tokenizer at the draw recipe's lengths (curricula/recipes/gpu-draw-part.yaml)"
        )
    taken = [n for n in markers if part in (manifest["sources"].get(n) or {}).get("parts", {})]
    if taken:
        raise UsageError(f"{release} already has part {part} of {taken[0]}: name the new part otherwise")
    (release / "ids").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # packed outside the tree, moved in once the room is checked
        packed = {}
        for name in markers:
            dest = pathlib.Path(tmp) / f"{name}.{part}.ids.xz"
            packed[name] = pack_tokenized(
                str(prep / "tokenized" / name), str(dest), drop=("source", "source_fingerprint")
            )
        _check_room(release, list(pathlib.Path(tmp).iterdir()))
        for name, figures in packed.items():
            dest = release / "ids" / f"{name}.{part}.ids.xz"
            shutil.move(pathlib.Path(tmp) / dest.name, dest)
            entry = manifest["sources"].setdefault(name, {"parts": {}})
            entry["parts"][part] = {"file": str(dest.relative_to(release)), **figures, "fits": markers[name]["fits"]}
            print(
                f"packed add: {name} part {part}: {figures['rows']:,} rows, {figures['tokens']:,} tokens, "
                f"{figures['bytes'] / 2**20:.2f} MiB",
                flush=True,
            )
    builds = {pathlib.Path(m["source"]).parent for m in markers.values()}  # DATA/BUILD/NAME -> DATA/BUILD
    try:
        _add_builds(manifest, release, builds, record["settings"]["recipe"], part)
        if not manifest.get("test"):
            manifest["test"] = _add_test_samples(release, builds)
    except BaseException:  # refused or stopped: the part's files go, the manifest was never written
        for name in packed:
            (release / "ids" / f"{name}.{part}.ids.xz").unlink(missing_ok=True)
        for report in release.glob(f"builds/*.{part}.*.json"):
            report.unlink()
        raise
    manifest["updated"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    manifest["tokens"] = sum(source_figures(manifest, n)["tokens"] for n in manifest["sources"])
    manifest["bytes"] = sum(source_figures(manifest, n)["bytes"] for n in manifest["sources"])
    _write_manifest(release, manifest)
    return manifest


def _prep(prep: pathlib.Path) -> tuple[dict, dict, dict]:
    """(pretrain.json, each tokenized source's marker, their common identity) of a prep
    whose tokenize phase finished."""
    record = json.loads((prep / "pretrain.json").read_text()) if (prep / "pretrain.json").is_file() else {}
    if not record.get("phases", {}).get("tokenize", {}).get("done"):
        raise UsageError(
            f"{prep} has not finished tokenizing: run codeexecutor pretrain --recipe R --out {prep} "
            "--until tokenize first"
        )
    tokenized = prep / "tokenized"
    markers = {
        d.name: json.loads((d / "tokenized.json").read_text())
        for d in sorted(tokenized.iterdir())
        if (d / "tokenized.json").is_file()
    }
    if not markers:
        raise UsageError(f"{tokenized} holds no tokenized source: tokenize again (pretrain --until tokenize)")
    ident = {
        k: next(iter(markers.values()))[k] for k in ("tokenizer", "profile", "max_code_length", "max_trace_length")
    }
    if any({k: m[k] for k in ident} != ident for m in markers.values()):
        raise UsageError(f"the sources of {tokenized} were tokenized differently: tokenize them again in one run")
    return record, markers, ident


def _new_manifest(release: pathlib.Path, record: dict, ident: dict) -> dict:
    """The first part's manifest, with the prep's tokenizer copied beside it."""
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.data_format import DATA_FORMAT

    release.mkdir(parents=True, exist_ok=True)
    shutil.copytree(pathlib.Path(record["phases"]["tokenizer"]["tokenizer"]), release / "tokenizer", dirs_exist_ok=True)
    (release / "tokenizer" / "training.json").unlink(missing_ok=True)  # the sample's report names this machine's paths
    profile = Curriculum.from_dict(record["settings"]["recipe"], "pretrain.json", None, buildable=True).profile()
    return {
        "data_format": DATA_FORMAT,
        "fingerprint": fingerprint(ident),
        "identity": ident,
        "profile": profile.to_config(),
        "sources": {},
        "builds": {},
        "test": {},
    }


MAX_FILE = 45 * 2**20  # a committed file stays well under what git hosts take (50 MB)


def _check_room(release: pathlib.Path, files: list[pathlib.Path]) -> None:
    """Refuse new ids files over MAX_FILE, or that leave no room, in what a call carries,
    for the tree, the wheels and the GPU model a lease commits."""
    new = sum(f.stat().st_size for f in files)
    big = [f.name for f in files if f.stat().st_size > MAX_FILE]
    if big:
        raise UsageError(f"{big[0]} is over {MAX_FILE / 2**20:.0f} MiB: build its source in more shards")
    committed = release.parent.parent / "models"
    model = 0 if list(committed.glob("*/lease.json")) else MODEL_ALLOWANCE
    room = LIMIT - tree_bytes() - WHEELS_ALLOWANCE - model
    print(
        f"packed add: {new / 2**20:.1f} MiB of ids; {room / 2**20:.1f} MiB of a call's {LIMIT / 2**20:.0f} were left "
        "beside the tree, the wheels and the GPU model",
        flush=True,
    )
    if new > room:
        raise UsageError(
            f"the part's {new / 2**20:.1f} MiB of ids would not fit what a call carries ({room / 2**20:.1f} MiB left): "
            "build a smaller shard, or drop a part first (codeexecutor packed drop)"
        )


def _add_test_samples(release: pathlib.Path, builds: set) -> dict:
    """The fixed test samples of the builds, as test.tar.xz (written atomically); their sizes."""
    with tempfile.TemporaryDirectory() as tmp:
        sizes: dict = {}
        for data_dir in {b.parent for b in builds}:
            sizes.update(test_samples(data_dir, pathlib.Path(tmp) / "test"))
        with replacing(release / "test.tar.xz") as part, tarfile.open(part, "w:xz", preset=9) as tar:
            tar.add(pathlib.Path(tmp) / "test", arcname="test")
    return sizes


def _add_builds(manifest: dict, release: pathlib.Path, builds: set, recipe: dict, part: str) -> None:
    """Each build's report (stats.json, build.json) into builds/, and its provenance: the
    recipe's options for it, the interpreter that traced it, the corpora it read and, for
    the functions, how many rows each licence covers. A build that does not say which
    interpreter traced it is refused."""
    (release / "builds").mkdir(exist_ok=True)
    specs = (recipe.get("data") or {}).get("builds") or {}
    for folder in sorted(builds):
        if not (folder / "stats.json").is_file():
            raise UsageError(f"{folder} has no stats.json: not a finished build (build it again)")
        for report in ("stats.json", "build.json"):
            if (folder / report).is_file():  # this machine's paths written relative to the repository
                text = (folder / report).read_text().replace(str(ROOT.parent) + "/", "../")
                (release / "builds" / f"{folder.name}.{part}.{report}").write_text(text)
        stats = json.loads((folder / "stats.json").read_text())
        if not stats.get("python"):
            raise UsageError(f"{folder}/stats.json does not say which interpreter traced it: rebuild it")
        built = json.loads((folder / "build.json").read_text()) if (folder / "build.json").is_file() else {}
        manifest["builds"][f"{folder.name}.{part}"] = {
            "options": specs.get(folder.name),
            "python": stats["python"],
            "corpora": built.get("sources"),
            "shard": built.get("shard"),
            "licences": _licences(folder),
        }


def _licences(build: pathlib.Path) -> dict | str:
    """Rows a licence covers in a build that stamps each row with one (the functions);
    else where its corpora's licences are written."""
    import datasets

    counts: dict[str, int] = {}
    for split in build.iterdir():
        if not (split / "dataset_dict.json").is_file():
            continue
        ds = datasets.load_from_disk(str(split))
        for part in ds.values():
            if "license" in part.column_names:
                for name in part["license"]:
                    counts[name] = counts.get(name, 0) + 1
    return counts or "the corpora's own (curricula/packed/README.md)"


def drop(part: str, sources: list[str] | None, release: pathlib.Path = RELEASE) -> dict:
    """Part `part` of `sources` (default: every source that has it) taken out of the
    committed data: its ids files deleted, its entries and the reports of the builds left
    without a part removed, the totals counted again. What makes room in what a call
    carries (a committed model to continue travels beside the ids). Returns the manifest."""
    manifest = read_manifest(release)
    if manifest is None:
        raise UsageError(f"no committed data at {release} (its manifest.json is missing)")
    names = sources or sorted(n for n, e in manifest["sources"].items() if part in e["parts"])
    lacking = [n for n in names if part not in (manifest["sources"].get(n) or {}).get("parts", {})]
    if lacking or not names:
        raise UsageError(f"{release} has no part {part} of {lacking[0] if lacking else 'any source'}")
    if any(len(manifest["sources"][n]["parts"]) == 1 for n in names):
        raise UsageError(f"part {part} is the only part of a source in {names}: a source keeps at least one")
    for name in names:
        entry = manifest["sources"][name]["parts"].pop(part)
        (release / entry["file"]).unlink(missing_ok=True)
        print(f"packed drop: {name} part {part}: {entry['rows']:,} rows, {entry['bytes'] / 2**20:.2f} MiB", flush=True)
    kept = {n.split("-")[0] for n, e in manifest["sources"].items() if part in e["parts"]}  # BUILD-NAME -> BUILD
    for build in [b for b in manifest["builds"] if b.endswith(f".{part}") and b.split(".")[0] not in kept]:
        del manifest["builds"][build]
        for report in ("stats.json", "build.json"):
            (release / "builds" / f"{build}.{report}").unlink(missing_ok=True)
    manifest["updated"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    manifest["tokens"] = sum(source_figures(manifest, n)["tokens"] for n in manifest["sources"])
    manifest["bytes"] = sum(source_figures(manifest, n)["bytes"] for n in manifest["sources"])
    _write_manifest(release, manifest)
    return manifest


def _args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    ad = sub.add_parser("add", help="add a prep's tokenized sources to the committed data (curricula/packed) as a part")
    ad.add_argument(
        "--prep", required=True, help="a folder where `pretrain --until tokenize` finished (e.g. runs/draw-s1)"
    )
    ad.add_argument(
        "--part", required=True, help="the part's name, e.g. s0of4 for the builds' --shard 0/4 (letters, digits, -)"
    )
    dr = sub.add_parser("drop", help="take a part out of the committed data (room for what else a call carries)")
    dr.add_argument("--part", required=True, help="the part's name, e.g. s2of4")
    dr.add_argument("--source", action="append", dest="sources", metavar="NAME", help="only this source (repeatable)")
    rw = sub.add_parser(
        "rows", help="the committed data back as readable JSON lines (code, trace, fit), a file a source"
    )
    rw.add_argument("--out", required=True, help="folder for SOURCE.jsonl")
    rw.add_argument("--source", action="append", dest="sources", metavar="NAME", help="only this source (repeatable)")
    rw.add_argument("--limit", type=int, help="at most this many rows a source")


def _run(args: argparse.Namespace) -> int:
    from codeexecutor.training.packed import rows

    if args.action == "rows":
        written = rows(RELEASE, pathlib.Path(args.out), args.sources, args.limit)
        for name, n in written.items():
            print(f"{pathlib.Path(args.out) / (name + '.jsonl')}: {n:,} rows")
        return 0
    if args.action == "drop":
        manifest = drop(args.part, args.sources)
        print(f"{RELEASE}: {manifest['tokens']:,} tokens, {manifest['bytes'] / 2**20:.1f} MiB")
        return 0
    if not re.fullmatch(r"[A-Za-z0-9-]+", args.part):
        raise UsageError(f"--part {args.part!r}: use letters, digits and -, e.g. s0of4")
    if not (pathlib.Path(args.prep) / "tokenized").is_dir():
        raise UsageError(
            f"{args.prep} has no tokenized sources: run codeexecutor pretrain --recipe R --out {args.prep} "
            "--until tokenize first"
        )
    manifest = add(pathlib.Path(args.prep).resolve(), args.part)
    print(
        f"{RELEASE}: {manifest['tokens']:,} tokens in {len(manifest['sources'])} sources, "
        f"{manifest['bytes'] / 2**20:.1f} MiB; fingerprint {manifest['fingerprint']}"
    )
    return 0


# The subcommands this module defines, by name: (help, add_arguments, run); codeexecutor/cli.py lists them.
COMMANDS = {
    "packed": ("the committed training data (curricula/packed): add a part, read it back as rows", _args, _run),
}
