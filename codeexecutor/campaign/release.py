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
import os
import pathlib
import shutil
import tarfile
import tempfile

from codeexecutor.errors import UsageError

ROOT = pathlib.Path(__file__).resolve().parents[2]
RELEASE = ROOT / "curricula" / "packed"


def read_manifest(release: pathlib.Path = RELEASE) -> dict | None:
    path = release / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _write_manifest(release: pathlib.Path, manifest: dict) -> None:
    tmp = release / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, release / "manifest.json")


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
    from codeexecutor.training.data_format import DATA_FORMAT, DATA_FORMAT_CODE, code_digest, fingerprint
    from codeexecutor.training.tokenized import identity

    manifest = read_manifest(release)
    if manifest is None:
        raise UsageError(f"no committed data at {release}: build it (codeexecutor draw pack --build, hours)")
    if manifest.get("data_format") != DATA_FORMAT:
        raise UsageError(f"{release} holds ids of data format {manifest.get('data_format')} and this code makes format "
                         f"{DATA_FORMAT}: add the data again (codeexecutor draw add) or check out the commit that made it")
    if code_digest() != DATA_FORMAT_CODE:
        raise UsageError("the code that makes ids changed without its version (training/data_format.py): bump "
                         "DATA_FORMAT if ids change, then record the digest (python -m codeexecutor.training.data_format)")
    named = cur.model.tokenizer and pathlib.Path(cur.model.tokenizer)
    tokenizer = (named if named.is_absolute() else ROOT / named) if named else release / "tokenizer"
    want = fingerprint(identity(recipe_encoder(cur, tokenizer)))
    if manifest.get("fingerprint") != want:
        raise UsageError(f"{release} was tokenized as {_identity_line(manifest['identity'])} (fingerprint "
                         f"{manifest.get('fingerprint')}) and this recipe wants fingerprint {want}: set the recipe's "
                         "model and tokenizer sections back, or build its data (codeexecutor draw pack --build)")
    return manifest


def _identity_line(ident: dict) -> str:
    return (f"profile {ident.get('profile')}, {ident.get('max_code_length')} code and {ident.get('max_trace_length')} "
            f"trace tokens")


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
    samples. Later parts must use the committed tokenizer (`--set
    model.tokenizer=curricula/packed/tokenizer`). Returns the manifest."""
    from codeexecutor.campaign.ids import pack_tokenized
    from codeexecutor.campaign.pack import test_samples
    from codeexecutor.training.data_format import DATA_FORMAT, fingerprint

    record = json.loads((prep / "pretrain.json").read_text()) if (prep / "pretrain.json").is_file() else {}
    if not record.get("phases", {}).get("tokenize", {}).get("done"):
        raise UsageError(f"{prep} has not finished tokenizing: run codeexecutor pretrain --recipe R --out {prep} "
                         "--until tokenize first")
    tokenized = prep / "tokenized"
    markers = {d.name: json.loads((d / "tokenized.json").read_text()) for d in sorted(tokenized.iterdir())
               if (d / "tokenized.json").is_file()}
    ident = {k: next(iter(markers.values()))[k] for k in ("tokenizer", "profile", "max_code_length", "max_trace_length")}
    if any({k: m[k] for k in ident} != ident for m in markers.values()):
        raise UsageError(f"the sources of {tokenized} were tokenized differently: tokenize them again in one run")
    manifest = read_manifest(release)
    if manifest is None:
        release.mkdir(parents=True, exist_ok=True)
        tokenizer = pathlib.Path(record["phases"]["tokenizer"]["tokenizer"])
        shutil.copytree(tokenizer, release / "tokenizer", dirs_exist_ok=True)
        from codeexecutor.training.config import Curriculum

        profile = Curriculum.from_dict(record["settings"]["recipe"], "pretrain.json", str(ROOT), buildable=True).profile()
        manifest = {"data_format": DATA_FORMAT, "fingerprint": fingerprint(ident), "identity": ident,
                    "profile": profile.to_config(), "sources": {}, "builds": {}, "test": {}}
    elif fingerprint(ident) != manifest["fingerprint"]:
        raise UsageError(f"{prep} was tokenized as {_identity_line(ident)} with tokenizer {ident['tokenizer']}, the "
                         f"committed data as {_identity_line(manifest['identity'])} with {manifest['identity']['tokenizer']}: "
                         "tokenize with --set model.tokenizer=curricula/packed/tokenizer and the recipe's lengths")
    recipe = record["settings"]["recipe"]
    data_dir = pathlib.Path(recipe["data"]["dir"])
    data_dir = data_dir if data_dir.is_absolute() else ROOT / data_dir
    (release / "ids").mkdir(exist_ok=True)
    for name, marker in markers.items():
        dest = release / "ids" / f"{name}.{part}.ids.xz"
        figures = pack_tokenized(str(tokenized / name), str(dest))
        entry = manifest["sources"].setdefault(name, {"parts": {}})
        entry["parts"][part] = {"file": str(dest.relative_to(release)), **figures, "fits": marker["fits"]}
        print(f"draw add: {name} part {part}: {figures['rows']:,} rows, {figures['tokens']:,} tokens, "
              f"{figures['bytes'] / 2**20:.2f} MiB", flush=True)
    _add_builds(manifest, release, data_dir, recipe, part)
    if not (release / "test.tar.xz").is_file():
        with tempfile.TemporaryDirectory() as tmp:
            manifest["test"] = test_samples(data_dir, pathlib.Path(tmp) / "test")
            with tarfile.open(release / "test.tar.xz", "w:xz", preset=9) as tar:
                tar.add(pathlib.Path(tmp) / "test", arcname="test")
    manifest["updated"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    manifest["tokens"] = sum(source_figures(manifest, n)["tokens"] for n in manifest["sources"])
    manifest["bytes"] = sum(source_figures(manifest, n)["bytes"] for n in manifest["sources"])
    _write_manifest(release, manifest)
    return manifest


def _add_builds(manifest: dict, release: pathlib.Path, data_dir: pathlib.Path, recipe: dict, part: str) -> None:
    """Each build's report (stats.json, build.json) into builds/, and its provenance: the
    recipe's options for it and the interpreter that traced it."""
    (release / "builds").mkdir(exist_ok=True)
    specs = recipe["data"].get("builds") or {}
    folders = {(data_dir / src["path"]).parent for st in recipe["stages"] for src in st["sources"]}
    for folder in sorted(folders):
        build, spec = folder.name, specs.get(folder.name)
        if not (folder / "stats.json").is_file():
            continue
        for report in ("stats.json", "build.json"):
            if (folder / report).is_file():
                shutil.copy(folder / report, release / "builds" / f"{build}.{part}.{report}")
        stats = json.loads((folder / "stats.json").read_text())
        manifest["builds"][f"{build}.{part}"] = {"options": spec, "python": stats.get("python")}


def to_campaign(cur, out: pathlib.Path, release: pathlib.Path = RELEASE) -> tuple[dict, dict]:
    """The pack's own files (data.tar.xz: tokenizer, curriculum, test samples) for the
    committed data, whose ids travel in the working tree; (sources' figures, test sizes)."""
    import dataclasses

    import yaml

    from codeexecutor.training.tokenized import folder_name

    manifest = check(cur, release)
    lacking = missing_sources(cur, manifest)
    if lacking:
        raise UsageError(f"the committed data has no {', '.join(lacking)}: add it (codeexecutor draw add) or leave it "
                         "out of the recipe")
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
    sources = {n: {**manifest["identity"], "folder": n, **source_figures(manifest, n),
                   "parts": parts(manifest, n, release), "in": "tree"} for n in sorted(used)}
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
        tmp = out / f"{name}.jsonl.tmp"
        with open(tmp, "w") as f:
            for part, entry in manifest["sources"][name]["parts"].items():
                header, arrays = read_arrays(str(release / entry["file"]))
                code_at, trace_at = 0, 0
                for i in range(header["rows"]):
                    if limit is not None and n >= limit:
                        break
                    c, t = int(arrays["code_len"][i]), int(arrays["trace_len"][i])
                    code = arrays["code_ids"][code_at + 3:code_at + c - tail].tolist()
                    trace = arrays["trace_ids"][trace_at + 1:trace_at + t - 1].tolist()
                    code_at, trace_at = code_at + c, trace_at + t
                    f.write(json.dumps({"part": part, "code": encoder.decode(code, cut_at_bos=False),
                                        "trace": encoder.decode(trace, cut_at_bos=False),
                                        "fit": header["fit_names"][arrays["fit"][i]]}) + "\n")
                    n += 1
        os.replace(tmp, out / f"{name}.jsonl")
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
