"""Pack what one GPU draw needs into `.campaign/` (git-ignored): data built and tokenized here.

    .venv/bin/python benchmarks/campaign_pack.py [--data runs/quality/data-depth]   # the recipe's data, then:
    bash benchmarks/gpu_campaign.sh draw                                          # on the lent GPU machine

A lent GPU machine has Python 3.12 with PyTorch but no package registry, no ../shared
and 15 minutes, so the draw builds nothing there: it trains on what this pack carries.

- `data.tar.xz`: the recipe's tokenizer, trained here in its own step
  (training/tokenized.py), every source of the recipe tokenized for it (int16 ids), the
  fixed 300-example test sample of each of the six test sets (raw rows, scored there
  as `evaluate --limit 300` scores them here), and each build's stats.json;
- `whl/`: wheels of what the device lacks, at the versions requirements.txt pins;
- `manifest.json`: the code it was packed for (a hash of the files the draw runs), the
  interpreter that traced the data, and the sizes. `draw` refuses a pack of other code, of
  mixed interpreters, or over the 64 MiB a call carries.

`--smoke` packs the demo datasets (curricula/demo.yaml) with no wheels: what
`CAMPAIGN_SMOKE=1 gpu_campaign.sh draw` runs on the CPU, in CI.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import pathlib
import shutil
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PACK = ROOT / ".campaign"
LIMIT = 64 * 2**20  # what one device call carries, working tree included
TREE_ALLOWANCE = 16 * 2**20  # the working tree beside the pack where git cannot measure it: a little over today's
RECIPE = ROOT / "curricula" / "recipes" / "cpu-hour.yaml"
SMOKE_RECIPE = ROOT / "curricula" / "demo.yaml"
TEST_SETS = {"codenetmut": ("codenetmut", "errors"), "tutorial": ("tutorial",), "singleline": ("singleline",),
             "functions": ("functions", "functions_errors")}  # build folder -> its datasets
TEST_LIMIT = 300
CODE = ("codeexecutor", "curricula", "eval", "mutation", "benchmarks", "ds_configs")  # what the draw runs
CODE_FILES = ("run_pretrain.sh",)


def code_hash(root: pathlib.Path = ROOT) -> str:
    """A hash of the source files the draw runs (Python, shell, YAML, JSON under CODE): the
    same checkout here and on the device, or a stale pack."""
    h = hashlib.sha256()
    files = [root / f for f in CODE_FILES]
    for d in CODE:
        files += [p for p in (root / d).rglob("*") if p.suffix in (".py", ".sh", ".yaml", ".json")
                  and "results" not in p.parts and "__pycache__" not in p.parts and ".campaign" not in p.parts]
    for path in sorted(files):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def tree_bytes(root: pathlib.Path = ROOT) -> int:
    """What travels with a device call beside the pack: tracked files and untracked ones git
    does not ignore (TREE_ALLOWANCE where git is not there to say)."""
    import subprocess

    try:
        names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                               capture_output=True, check=True).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        return TREE_ALLOWANCE
    return sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())


def curriculum_for(recipe: pathlib.Path, data: pathlib.Path):
    """The recipe with its sources moved to `data` (each source's last two path parts,
    `NAME/NAME`, found under `data`)."""
    import yaml

    from codeexecutor.training.config import Curriculum

    raw = yaml.safe_load(recipe.read_text())
    for stage in raw["stages"]:
        for src in stage["sources"]:
            src["path"] = str(data.joinpath(*pathlib.PurePath(src["path"]).parts[-2:]))
    return Curriculum.from_dict(raw, str(recipe)), raw


def test_samples(data: pathlib.Path, out: pathlib.Path, limit: int = TEST_LIMIT) -> dict:
    """The fixed test sample of each test set (eval.evaluate.sample: the rows `evaluate
    --limit` scores), as small datasets in the layout of a build, stats.json beside."""
    import datasets

    from eval.evaluate import sample

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


def wheels(dest: pathlib.Path) -> None:
    """The carried wheels (the previous pack's list of what the device lacks)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _wheels import download, missing

    download(dest)
    gaps = missing(dest)
    if gaps:
        sys.exit(f"campaign_pack: requirements neither carried nor on the device: {gaps}; add them to _wheels.CARRY")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "runs" / "quality" / "data-depth"),
                    help="the recipe's built datasets (bench_quality.py --build-only builds them)")
    ap.add_argument("--recipe", default=None, help=f"curriculum to pack (default {RECIPE.relative_to(ROOT)})")
    ap.add_argument("--out", default=str(PACK))
    ap.add_argument("--smoke", action="store_true", help="the demo datasets, no wheels: the CPU smoke run's pack")
    ap.add_argument("--tokenizer-sample", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--assume-python", metavar="X.Y", help="the interpreter that traced a build made before builds "
                    "recorded it (their stats.json has no `python`)")
    args = ap.parse_args()
    from codeexecutor.execution.interpreters import dataset_python
    from codeexecutor.training.tokenized import tokenize_curriculum, train_curriculum_tokenizer

    data, out = pathlib.Path(args.data).resolve(), pathlib.Path(args.out)
    recipe = pathlib.Path(args.recipe) if args.recipe else (SMOKE_RECIPE if args.smoke else RECIPE)
    if not data.is_dir():
        print(f"campaign_pack: no built datasets at {data}: build them (benchmarks/bench_quality.py --build-only "
              f"--data {data}) or pass --data", file=sys.stderr)
        sys.exit(2)
    cur, raw = curriculum_for(recipe, data)
    missing = [s.path for st in cur.stages for s in st.sources if not os.path.isdir(s.path)]
    if missing:
        print(f"campaign_pack: {missing[0]} is missing: {data} is not this recipe's data", file=sys.stderr)
        sys.exit(2)
    pythons = {dataset_python(s.path) or args.assume_python for st in cur.stages for s in st.sources}
    if None in pythons:
        print(f"campaign_pack: a build under {data} does not say which interpreter traced it (built before builds "
              "recorded it): rebuild it, or name it with --assume-python X.Y", file=sys.stderr)
        sys.exit(2)
    if len(pythons) > 1:
        print(f"campaign_pack: {data} mixes builds of Python {', '.join(sorted(pythons))}: rebuild with one", file=sys.stderr)
        sys.exit(2)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        stage = pathlib.Path(tmp) / "data"
        report = train_curriculum_tokenizer(cur, ".", str(stage / "tokenizer"), args.tokenizer_sample)
        report["rows_read"] = {os.path.relpath(k, data): v for k, v in report["rows_read"].items()}
        markers = tokenize_curriculum(cur, ".", str(stage / "tokenizer"), str(stage / "tokenized"), args.workers)
        for m in markers.values():
            m["source"] = os.path.relpath(m["source"], data)  # no paths of this machine in the pack
            m.pop("source_fingerprint", None)
        sizes = test_samples(data, stage / "test")
        relative = json.loads(json.dumps(raw))  # the recipe, its sources named as the pack holds them
        for st in relative["stages"]:
            for src in st["sources"]:
                src["path"] = "tokenized/" + markers[src["path"]]["folder"]
        relative["model"]["tokenizer"] = "tokenizer"
        (stage / "curriculum.yaml").write_text(__import__("yaml").safe_dump(relative, sort_keys=False))
        (stage / "tokenized" / "curriculum.yaml").unlink()
        with tarfile.open(out / "data.tar.xz", "w:xz", preset=6) as tar:
            tar.add(stage, arcname="data")
    if not args.smoke:
        (out / "whl").mkdir()
        wheels(out / "whl")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    tree = tree_bytes()
    manifest = {"code": code_hash(), "python": next(iter(pythons), None), "recipe": str(recipe.relative_to(ROOT)),
                "tree_bytes": tree,
                "smoke": args.smoke, "packed": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "bytes": size, "tokenizer": report, "sources": {m["folder"]: m for m in markers.values()}, "test": sizes}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"{out}: {size / 2**20:.1f} MiB (of the {LIMIT / 2**20:.0f} MiB a call carries, {tree / 2**20:.1f} "
          f"of them the working tree); data traced by Python {manifest['python']}; code {manifest['code']}")
    if size + tree > LIMIT:
        print(f"campaign_pack: {size / 2**20:.1f} MiB is too large to carry with the working tree's {tree / 2**20:.1f}",
              file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
