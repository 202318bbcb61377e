"""The committed training data (curricula/packed/): read by a recipe whose `data.packed`
names it, so a clone trains without building.

Building the GPU recipe's datasets takes hours on a small machine (tracing a million
mutants); unpacking their ids takes a minute. So the tokenized data of
`curricula/recipes/gpu-draw.yaml` is committed, in a compressed ids format
(training/ids.py), and `pretrain --until tokenize` with `data.packed` writes each source's
tokenized folder back from it: no build, no tokenizer, no tokenize.

    curricula/packed/manifest.json    the data fingerprint; each source's parts (rows,
                                      tokens, bytes, fits); each build's provenance
    curricula/packed/tokenizer/       the tokenizer the ids are in
    curricula/packed/ids/SOURCE.PART.ids.xz   a source's ids, a part a build shard
    curricula/packed/test.tar.xz      the fixed 300-example test sample of each test set (rows)
    curricula/packed/builds/          each build's stats.json and build.json (its report)

A source may be built in shards (`--shard I/N` of its build), each added as a part
(`codeexecutor packed add`, codeexecutor/packed_cli.py): a source's parts are read as one.
The ids are bound to what makes them, not to the whole checkout: `data_format.fingerprint`
of the tokenizer, the format profile, the lengths and `DATA_FORMAT`. `codeexecutor packed
rows` turns them back into readable rows.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import tarfile

from codeexecutor.atomic import replacing
from codeexecutor.errors import UsageError
from codeexecutor.training.data_format import fingerprint

ROOT = pathlib.Path(__file__).resolve().parents[2]
RELEASE = ROOT / "curricula" / "packed"


def read_manifest(release: pathlib.Path = RELEASE) -> dict | None:
    path = release / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else None


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
        raise UsageError(
            f"no committed data at {release}: build the recipe's data instead (leave data.packed unset, hours)"
        )
    problem = format_problem(
        manifest.get("data_format"),
        str(release),
        "check out the commit that made them, or build the recipe's data instead (leave data.packed unset, hours)",
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
            "model and tokenizer sections back, or build its data (leave data.packed unset)"
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


def unpack_into(cur, base: pathlib.Path, release: pathlib.Path = RELEASE, workers: int | None = None) -> dict:
    """Each source the curriculum reads written from the committed ids as the tokenized
    folder its path names (under `base`), and the test samples as `DATA/test/BUILD/NAME`
    (DATA: the recipe's `data.dir`); a folder already unpacked with the manifest's rows is kept (a rerun is quick).
    Refused in one line where the ids are not what this recipe would make, a source is not
    committed or a part file is missing. Returns each source's rows."""
    from concurrent.futures import ProcessPoolExecutor

    from codeexecutor.training.ids import unpack_tokenized
    from codeexecutor.training.tokenized import MARKER, folder_name

    manifest = check(cur, release)
    lacking = missing_sources(cur, manifest)
    if lacking:
        raise UsageError(
            f"{release} has no {', '.join(lacking)}: add it (codeexecutor packed add) or leave it out of the recipe"
        )
    lost = [f for n in manifest["sources"] for f in parts(manifest, n, release) if not (ROOT / f).is_file()]
    if lost:
        raise UsageError(f"{lost[0]} is named in {release}/manifest.json and missing: check out the whole repository")
    wanted: dict[str, str] = {}  # source folder (under base) -> the committed source it holds
    for stage in cur.stages:
        for src in stage.sources:
            wanted[os.path.normpath(src.path)] = folder_name(src.path)
    rows, jobs = {}, []
    for path, name in sorted(wanted.items()):
        folder = base / path
        expected = source_figures(manifest, name)["rows"]
        marker = json.loads((folder / MARKER).read_text()) if (folder / MARKER).is_file() else {}
        same = {k: marker.get(k) for k in manifest["identity"]} == manifest["identity"]
        if same and marker.get("rows") == expected:  # unpacked before, from these ids
            rows[path] = expected
            continue
        jobs.append(([str(ROOT / f) for f in parts(manifest, name, release)], str(folder), path, expected))
    if jobs:
        with ProcessPoolExecutor(max_workers=max(1, min(len(jobs), workers or os.cpu_count() or 1))) as ex:
            headers = list(ex.map(unpack_tokenized, [j[0] for j in jobs], [j[1] for j in jobs]))
        for (_, _, path, expected), header in zip(jobs, headers):
            if header["rows"] != expected:
                raise UsageError(
                    f"the ids of {path} hold {header['rows']} rows, the manifest {expected}: add them again"
                )
            rows[path] = expected
    data_dir = base / (cur.data.dir or ".")
    if not (data_dir / "test").is_dir():  # whole or not at all: an unpacking stopped midway leaves no test/
        staged = data_dir / "test.unpacked"
        with replacing(staged) as tmp, tarfile.open(release / "test.tar.xz") as tar:
            tar.extractall(tmp, filter="data")
        os.replace(staged / "test", data_dir / "test")
        shutil.rmtree(staged)
    return rows


def rows(release: pathlib.Path, out: pathlib.Path, names: list[str] | None = None, limit: int | None = None) -> dict:
    """Each committed source back as readable JSON lines (`out/SOURCE.jsonl`, written
    atomically): per row its part, the model's code text and trace text (the format's
    tokens spaced as the release decodes them) and how its target was fitted. Tokenized
    again with the committed tokenizer, a row gives the ids it was read from."""
    from codeexecutor.training.ids import read_arrays

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
