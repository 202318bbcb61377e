"""The draw's data in the repository (curricula/packed/): a clone is ready to draw as it is.

Building the draw's datasets takes hours on a small machine (tracing a million mutants);
packing them takes minutes. So the tokenized data of `curricula/recipes/gpu-draw.yaml`
is committed, in the pack's compressed ids format (campaign/ids.py), and `draw pack`
on a fresh clone only writes what the draw needs beside it (the curriculum, the test
samples, the wheels): no build, no tokenizer, no tokenize.

    curricula/packed/manifest.json    the data fingerprint; each source's parts (rows,
                                      tokens, bytes, fits); each build's provenance
    curricula/packed/tokenizer/       the tokenizer the ids are in
    curricula/packed/ids/SOURCE.PART.ids.xz   a source's ids, a part a build shard
    curricula/packed/test.tar.xz      the fixed 300-example test sample of each test set (rows)
    curricula/packed/builds/          each build's stats.json and build.json (its report)

A source may be built in shards (`--shard I/N` of its build), each added as a part
(`draw add`): the draw reads a source's parts as one. The ids are bound to what makes
them, not to the whole checkout: `data_format.fingerprint` of the tokenizer, the format
profile, the lengths and `DATA_FORMAT`. `draw rows` turns them back into readable rows.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import shutil
import tarfile
import tempfile

from codeexecutor.atomic import replacing, write_json
from codeexecutor.errors import UsageError
from codeexecutor.training.data_format import fingerprint

ROOT = pathlib.Path(__file__).resolve().parents[2]
RELEASE = ROOT / "curricula" / "packed"


def read_manifest(release: pathlib.Path = RELEASE) -> dict | None:
    path = release / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _write_manifest(release: pathlib.Path, manifest: dict) -> None:
    write_json(release / "manifest.json", manifest)


def recipe_encoder(cur, tokenizer: pathlib.Path):
    """The encoder a recipe's ids are made with, on `tokenizer`: its profile, the code
    length its ids keep and its trace length."""
    from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer

    profile = cur.profile()
    tok = load_tokenizer(str(tokenizer), exception=profile.exception_step, delta=profile.delta)
    keep = max(cur.model.max_code_length, cur.tokenizer.keep_code_length or 0)
    return Encoder(tok, keep, cur.model.max_trace_length, profile)


def check(cur, release: pathlib.Path = RELEASE) -> dict:
    """The committed manifest, where its ids are what this recipe's ids would be (same data
    fingerprint) and this checkout's id code is the recorded one; else one line why not."""
    from codeexecutor.training.data_format import format_problem
    from codeexecutor.training.tokenized import identity

    manifest = read_manifest(release)
    if manifest is None:
        raise UsageError(f"no committed data at {release}: build it (codeexecutor draw pack --build, hours)")
    problem = format_problem(
        manifest.get("data_format"),
        str(release),
        "check out the commit that made them, or build and add the data anew (codeexecutor draw pack --build, hours)",
    )
    if problem:
        raise UsageError(problem)
    named = cur.model.tokenizer and pathlib.Path(cur.model.tokenizer)
    tokenizer = (named if named.is_absolute() else ROOT / named) if named else release / "tokenizer"
    want = fingerprint(identity(recipe_encoder(cur, tokenizer)))
    if manifest.get("fingerprint") != want:
        raise UsageError(
            f"{release} was tokenized as {_identity_line(manifest['identity'])} (fingerprint "
            f"{manifest.get('fingerprint')}) and this recipe wants fingerprint {want}: set the recipe's "
            "model and tokenizer sections back, or build its data (codeexecutor draw pack --build)"
        )
    return manifest


def _identity_line(ident: dict) -> str:
    return (
        f"profile {ident.get('profile')}, {ident.get('max_code_length')} code and {ident.get('max_trace_length')} "
        f"trace tokens"
    )


def missing_sources(cur, manifest: dict) -> list[str]:
    from codeexecutor.training.tokenized import folder_name

    names = {folder_name(src.path) for st in cur.stages for src in st.sources}
    return sorted(n for n in names if n not in manifest["sources"])


def parts(manifest: dict, name: str, release: pathlib.Path = RELEASE) -> list[str]:
    """A source's part files in the order they were added: relative to the repository
    (absolute for data outside it)."""
    files = [(release / p["file"]).resolve() for p in manifest["sources"][name]["parts"].values()]
    return [str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f) for f in files]


def source_figures(manifest: dict, name: str) -> dict:
    """A source's rows, tokens, bytes and fits over all its parts."""
    out = {"rows": 0, "tokens": 0, "trace_tokens": 0, "bytes": 0, "fits": {}}
    for p in manifest["sources"][name]["parts"].values():
        for k in ("rows", "tokens", "trace_tokens", "bytes"):
            out[k] += p[k]
        for outcome, n in p["fits"].items():
            out["fits"][outcome] = out["fits"].get(outcome, 0) + n
    out["bytes_per_token"] = round(out["bytes"] / max(out["tokens"], 1), 4)
    return out


def add(prep: pathlib.Path, part: str, release: pathlib.Path = RELEASE) -> dict:
    """A finished prep's tokenized sources (`pretrain --until tokenize` in `prep`) added to
    the committed data as part `part`; the first addition also commits its tokenizer and test
    samples. Later parts must have the committed fingerprint (`gpu-draw-part.yaml` uses the
    committed tokenizer). Refused, before anything is written, where the ids would not fit
    a call beside the tree. Returns the manifest."""
    from codeexecutor.campaign.ids import pack_tokenized

    record, markers, ident = _prep(prep)
    manifest = read_manifest(release) or _new_manifest(release, record, ident)
    if fingerprint(ident) != manifest["fingerprint"]:
        raise UsageError(
            f"{prep} was tokenized as {_identity_line(ident)} with tokenizer {ident['tokenizer']}, the "
            f"committed data as {_identity_line(manifest['identity'])} with {manifest['identity']['tokenizer']}: "
            "tokenize with the committed tokenizer at the draw recipe's lengths (gpu-draw-part.yaml)"
        )
    taken = [n for n in markers if part in (manifest["sources"].get(n) or {}).get("parts", {})]
    if taken:
        raise UsageError(f"{release} already has part {part} of {taken[0]}: name the new part otherwise")
    _check_room(prep, markers)
    (release / "ids").mkdir(parents=True, exist_ok=True)
    for name, marker in markers.items():
        dest = release / "ids" / f"{name}.{part}.ids.xz"
        figures = pack_tokenized(str(prep / "tokenized" / name), str(dest), drop=("source", "source_fingerprint"))
        entry = manifest["sources"].setdefault(name, {"parts": {}})
        entry["parts"][part] = {"file": str(dest.relative_to(release)), **figures, "fits": marker["fits"]}
        print(
            f"draw add: {name} part {part}: {figures['rows']:,} rows, {figures['tokens']:,} tokens, "
            f"{figures['bytes'] / 2**20:.2f} MiB",
            flush=True,
        )
    builds = {pathlib.Path(m["source"]).parent for m in markers.values()}  # DATA/BUILD/NAME -> DATA/BUILD
    _add_builds(manifest, release, builds, record["settings"]["recipe"], part)
    if not manifest.get("test"):
        manifest["test"] = _add_test_samples(release, builds)
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


def _check_room(prep: pathlib.Path, markers: dict) -> None:
    """Refuse a part whose ids, by their tokenized size, would make a file over MAX_FILE or
    leave the tree too large to draw beside the wheels (the exact figure is the pack's)."""
    from codeexecutor.campaign.room import LIMIT, OTHER_ALLOWANCE, WHEELS_ALLOWANCE, tree_bytes

    bound = {n: 0.5 * sum(f.stat().st_size for f in (prep / "tokenized" / n).glob("*.arrow")) for n in markers}
    big = [n for n, b in bound.items() if b > MAX_FILE * 4]  # LZMA takes ids to under a quarter of Arrow's bytes
    if big:
        raise UsageError(f"{big[0]} would pack to a file over {MAX_FILE / 2**20:.0f} MiB: build it in more shards")
    room = LIMIT - tree_bytes() - WHEELS_ALLOWANCE - OTHER_ALLOWANCE
    print(
        f"draw add: {room / 2**20:.1f} MiB of a call's {LIMIT / 2**20:.0f} left beside the tree and the wheels "
        "before this part",
        flush=True,
    )
    if room <= 0:
        raise UsageError(
            f"the working tree already fills what a call carries ({LIMIT / 2**20:.0f} MiB with the wheels): "
            "ship the CPU model in int8 or drop a part before adding one"
        )


def _add_test_samples(release: pathlib.Path, builds: set) -> dict:
    """The fixed test samples of the builds, as test.tar.xz (written atomically); their sizes."""
    from codeexecutor.campaign.room import test_samples

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


def to_campaign(cur, out: pathlib.Path, release: pathlib.Path = RELEASE) -> tuple[dict, dict]:
    """The pack's own files (data.tar.xz: tokenizer, curriculum, test samples) for the
    committed data, whose ids travel in the working tree; (sources' figures, test sizes)."""
    import dataclasses

    import yaml

    from codeexecutor.training.tokenized import folder_name

    manifest = check(cur, release)
    lacking = missing_sources(cur, manifest)
    if lacking:
        raise UsageError(
            f"the committed data has no {', '.join(lacking)}: add it (codeexecutor draw add) or leave it "
            "out of the recipe"
        )
    lost = [f for n in manifest["sources"] for f in parts(manifest, n, release) if not (ROOT / f).is_file()]
    if lost:
        raise UsageError(f"{lost[0]} is named in {release}/manifest.json and missing: check out the whole repository")
    raw = dataclasses.asdict(cur)
    for stage in raw["stages"]:
        for src in stage["sources"]:
            src["path"] = "tokenized/" + folder_name(src["path"])
    raw["model"]["tokenizer"] = "tokenizer"
    raw["data"] = {"dir": "."}
    with tempfile.TemporaryDirectory() as tmp:
        stage = pathlib.Path(tmp) / "data"
        shutil.copytree(release / "tokenizer", stage / "tokenizer")
        with tarfile.open(release / "test.tar.xz") as tar:
            tar.extractall(stage, filter="data")
        (stage / "curriculum.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        with tarfile.open(out / "data.tar.xz", "w:xz", preset=6) as tar:
            tar.add(stage, arcname="data")
    used = {folder_name(src.path) for st in cur.stages for src in st.sources}
    sources = {
        n: {
            **manifest["identity"],
            "folder": n,
            **source_figures(manifest, n),
            "parts": parts(manifest, n, release),
            "in": "tree",
        }
        for n in sorted(used)
    }
    return sources, manifest["test"]


def rows(release: pathlib.Path, out: pathlib.Path, names: list[str] | None = None, limit: int | None = None) -> dict:
    """Each committed source back as readable JSON lines (`out/SOURCE.jsonl`, written
    atomically): per row its part, the model's code text and trace text (the format's
    tokens spaced as the release decodes them) and how its target was fitted. Tokenized
    again with the committed tokenizer, a row gives the ids it was read from."""
    from codeexecutor.campaign.ids import read_arrays

    manifest = read_manifest(release)
    if manifest is None:
        raise UsageError(f"no committed data at {release} (its manifest.json is missing)")
    names = names or sorted(manifest["sources"])
    unknown = [n for n in names if n not in manifest["sources"]]
    if unknown:
        raise UsageError(f"no source {unknown[0]} in {release}: one of {', '.join(sorted(manifest['sources']))}")
    encoder = _manifest_encoder(release, manifest)
    tail = 2 if encoder.profile.official else 1
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in names:
        n = 0
        with replacing(out / f"{name}.jsonl") as tmp, open(tmp, "w") as f:
            for part, entry in manifest["sources"][name]["parts"].items():
                header, arrays = read_arrays(str(release / entry["file"]))
                code_at, trace_at = 0, 0
                for i in range(header["rows"]):
                    if limit is not None and n >= limit:
                        break
                    c, t = int(arrays["code_len"][i]), int(arrays["trace_len"][i])
                    code = arrays["code_ids"][code_at + 3 : code_at + c - tail].tolist()
                    trace = arrays["trace_ids"][trace_at + 1 : trace_at + t - 1].tolist()
                    code_at, trace_at = code_at + c, trace_at + t
                    f.write(
                        json.dumps(
                            {
                                "part": part,
                                "code": encoder.decode(code, cut_at_bos=False),
                                "trace": encoder.decode(trace, cut_at_bos=False),
                                "fit": header["fit_names"][arrays["fit"][i]],
                            }
                        )
                        + "\n"
                    )
                    n += 1
        written[name] = n
    return written


def _manifest_encoder(release: pathlib.Path, manifest: dict):
    """An encoder of the committed identity (its profile read back from the label)."""
    from codeexecutor.modeling.profiles import Profile
    from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer

    ident, p = manifest["identity"], manifest["profile"]
    profile = Profile(p["format_profile"], p["exception_step"], p["trace_state"], p["step_order"], p["code_window"])
    tok = load_tokenizer(str(release / "tokenizer"), exception=profile.exception_step, delta=profile.delta)
    return Encoder(tok, ident["max_code_length"], ident["max_trace_length"], profile)
