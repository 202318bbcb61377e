"""Pre-tokenized sources: a dataset tokenized once, in one run's format, read as it is.

A curriculum source normally names a built dataset, which a run tokenizes at the start of
each stage. A source may instead name a *tokenized* folder: the ids of a dataset's
training rows in one tokenizer and format profile (`write_tokenized`), with
`tokenized.json` saying which, and the run reads its ids directly (`load_tokenized`).
A run whose tokenizer or profile differs from the folder's is refused with one line: ids
of another tokenizer would train on the wrong text. Ids are stored as int16 where the
vocabulary fits (2 bytes a token instead of 8), which is what lets a GPU lease carry a
whole recipe's data (committed in a denser form still: training/ids.py, training/packed.py).

    codeexecutor tokenize --curriculum C --tokenizer DIR --out DIR   # every source of C, and a curriculum using them

Each source is written atomically as it is done, with a line on stderr before and after it;
started again (after a kill), `tokenize` keeps the sources already written for the same
tokenizer, profile and data, and does the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

from codeexecutor.atomic import replacing, write_json
from codeexecutor.errors import ConfigError

MARKER = "tokenized.json"
FIT_OUTCOMES = ("whole", "cut_at_step", "dropped_crash", "dropped_long_step")  # what became of a target
FORMAT = 1  # of the folder (columns and marker)


def tokenizer_fingerprint(tok) -> str:
    """A hash of what the tokenizer does: its whole serialized model and added tokens."""
    backend = (
        tok.backend_tokenizer.to_str()
        if hasattr(tok, "backend_tokenizer")
        else json.dumps(tok.get_vocab(), sort_keys=True)
    )
    return hashlib.sha256(backend.encode("utf-8")).hexdigest()[:16]


def identity(encoder) -> dict:
    """What ids depend on: the tokenizer, the format profile and the length limits."""
    return {
        "tokenizer": tokenizer_fingerprint(encoder.tok),
        "profile": encoder.profile.label,
        "max_code_length": encoder.max_code,
        "max_trace_length": encoder.max_trace,
    }


def is_tokenized(path: str) -> bool:
    return os.path.isfile(os.path.join(path, MARKER))


def write_tokenized(source: str, encoder, out: str, num_proc: int | None = None) -> dict:
    """Tokenize the training rows of the dataset at `source` into `out` (atomically);
    returns the marker (identity, rows, fits, source)."""
    import shutil
    import tempfile

    import datasets

    ds = datasets.load_from_disk(source)
    ds = ds["train"] if isinstance(ds, datasets.DatasetDict) else ds
    small = "int16" if len(encoder.tok) < 2**15 else "int32"
    features = datasets.Features(
        {
            "code_ids": datasets.Sequence(datasets.Value(small)),
            "trace_ids": datasets.Sequence(datasets.Value(small)),
            "code_len": datasets.Value("int32"),
            "trace_len": datasets.Value("int32"),
            "fit": datasets.Value("string"),
        }
    )
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".tokenizing-", dir=parent)  # the ids go to disk batch by batch, never all in memory
    try:
        table, fits = tokenize(ds, encoder, num_proc=num_proc, cache_dir=work, features=features)
        marker = {
            "format": FORMAT,
            **identity(encoder),
            "rows": len(table),
            "fits": fits,
            "source": os.path.abspath(source),
            "source_fingerprint": getattr(ds, "_fingerprint", None),
        }
        with replacing(out) as tmp:
            table.save_to_disk(tmp)
            write_json(os.path.join(tmp, MARKER), marker)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return marker


def finished(source: str, encoder, out: str) -> dict | None:
    """The marker of `out` where it already holds `source`'s ids for this encoder (a
    tokenize stopped after it finished that source), else None."""
    import datasets

    if not is_tokenized(out):
        return None
    with open(os.path.join(out, MARKER)) as f:
        marker = json.load(f)
    ds = datasets.load_from_disk(source)
    ds = ds["train"] if isinstance(ds, datasets.DatasetDict) else ds
    fingerprint = getattr(ds, "_fingerprint", None)
    same = not _differences(marker, encoder) and marker.get("source") == os.path.abspath(source)
    return marker if same and fingerprint is not None and marker.get("source_fingerprint") == fingerprint else None


def _differences(marker: dict, encoder) -> list[str]:
    """What a tokenized folder's marker and this encoder disagree on: `format`, or identity keys."""
    if marker.get("format") != FORMAT:
        return ["format"]
    return [k for k, v in identity(encoder).items() if marker.get(k) != v]


def built_source(path: str) -> str | None:
    """The built dataset a tokenized folder was made from, where it is still there (its
    valid and test splits, which the folder does not keep), else None."""
    with open(os.path.join(path, MARKER)) as f:
        source = json.load(f).get("source")
    return source if source and os.path.isdir(source) else None


def load_tokenized(path: str, encoder):
    """(table, fits) of a tokenized folder, after checking it was made for this encoder. Ids
    that kept a longer code window than the encoder reads are cut to its window here
    (`narrow_code`)."""
    import datasets

    with open(os.path.join(path, MARKER)) as f:
        marker = json.load(f)
    want = identity(encoder)
    differ = _differences(marker, encoder)
    wider = (
        differ == ["max_code_length"]
        and isinstance(marker.get("max_code_length"), int)
        and marker["max_code_length"] > encoder.max_code
    )
    if wider:
        return _narrowed(datasets.load_from_disk(path), encoder), marker["fits"]
    if differ:
        named = (
            ", ".join(f"{k} {marker.get(k)!r} (this run: {want[k]!r})" for k in differ if k in want)
            or f"format {marker.get('format')}"
        )
        raise ConfigError(
            f"{path} was tokenized for another run: {named}; tokenize it again for this run "
            "(codeexecutor tokenize) or point the source at the built dataset"
        )
    return datasets.load_from_disk(path), marker["fits"]


def narrow_code(code_len, code_ids, encoder):
    """(lengths, flat ids) of rows' source ids cut to `encoder`'s code window, from ids that
    kept a longer one (`tokenizer.keep_code_length`): a longer row's body is windowed again
    as `Encoder.code` windows a program (its head, or its head and last lines). A body kept
    whole is cut exactly as tokenizing at the shorter length cuts it; one already cut at
    the kept length (over `keep_code_length` tokens) is windowed from what was kept."""
    import numpy as np

    long = np.nonzero(code_len > encoder.max_code)[0]
    if not len(long):
        return code_len, code_ids
    offsets = np.zeros(len(code_len) + 1, dtype=np.int64)
    np.cumsum(code_len, out=offsets[1:])
    tail = 2 if encoder.profile.official else 1  # [<mask0>] </s> after the body; <s> <encoder-decoder> </s> before it
    lengths, pieces, done = code_len.copy(), [], 0
    for i in long.tolist():
        start, end = int(offsets[i]), int(offsets[i + 1])
        pieces.append(code_ids[done:start])
        new = encoder.code("", ids=code_ids[start + 3 : end - tail].tolist())
        pieces.append(np.asarray(new, dtype=code_ids.dtype))
        lengths[i], done = len(new), end
    pieces.append(code_ids[done:])
    return lengths, np.concatenate(pieces)


def _narrowed(ds, encoder):
    """A tokenized dataset with its code ids cut to the encoder's window (`narrow_code`)."""
    import datasets
    import numpy as np
    import pyarrow as pa

    table = ds.data.table
    col = pa.concat_arrays(table.column("code_ids").chunks) if table.num_rows else None
    if col is None:
        return ds
    offsets = col.offsets.to_numpy()
    ids = col.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
    lengths, ids = narrow_code(np.diff(offsets), ids, encoder)
    if len(ids) == offsets[-1] - offsets[0]:
        return ds
    new_offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=new_offsets[1:])
    table = table.set_column(
        table.column_names.index("code_ids"), "code_ids", pa.ListArray.from_arrays(pa.array(new_offsets), pa.array(ids))
    )
    table = table.set_column(table.column_names.index("code_len"), "code_len", pa.array(lengths.astype(np.int32)))
    return datasets.Dataset(table, info=ds.info)


def _sources(cur) -> list[str]:
    """Each source path of a curriculum once, in order (a source of several stages is one)."""
    seen: dict[str, None] = {}
    for stage in cur.stages:
        for src in stage.sources:
            seen.setdefault(src.path, None)
    return list(seen)


def train_curriculum_tokenizer(cur, base_dir: str, out: str, sample: int = 200_000, seed: int = 0) -> dict:
    """A tokenizer for a curriculum, trained in a step of its own: on at most `sample` rows
    drawn evenly from its distinct sources (a seeded sample; texts deduplicated), so its
    cost is bounded whatever the data's size. Saved to `out` (atomically); returns what it
    read."""
    import random

    import datasets

    from codeexecutor.modeling.profiles import EXAMPLE_COLUMNS
    from codeexecutor.modeling.tokenizer import train_tokenizer

    profile = cur.profile()
    paths = _sources(cur)
    per_source = max(1, sample // max(1, len(paths)))
    texts: dict[str, None] = {}
    read = {}
    for path in paths:
        full = os.path.join(base_dir, path)
        if is_tokenized(full):
            raise ConfigError(f"{path} is already tokenized: train the tokenizer on the built datasets")
        ds = datasets.load_from_disk(full)
        ds = ds["train"] if isinstance(ds, datasets.DatasetDict) else ds
        rows = (
            range(len(ds))
            if len(ds) <= per_source
            else sorted(random.Random(f"{seed}:{path}").sample(range(len(ds)), per_source))
        )
        sample_rows = ds.select(rows).select_columns([c for c in EXAMPLE_COLUMNS if c in ds.column_names])
        for batch in sample_rows.iter(
            batch_size=1000
        ):  # read in Arrow batches of the columns used: half the time of rows
            for pair in profile.examples(batch):
                for text in pair:
                    texts.setdefault(text, None)
        read[path] = len(rows)
    tok = train_tokenizer(
        list(texts), vocab_size=cur.model.vocab_size, split_digits=cur.model.split_digits, delta=profile.delta
    )
    with replacing(out) as tmp:
        tok.save_pretrained(tmp)
        report = {
            "rows_read": read,
            "distinct_texts": len(texts),
            "vocab_size": len(tok),
            "profile": profile.label,
            "fingerprint": tokenizer_fingerprint(tok),
        }
        with open(os.path.join(tmp, "training.json"), "w") as f:
            json.dump(report, f, indent=2)

    return report


def folder_name(path: str) -> str:
    """The name a source's ids go by: its build and dataset (DATA/codenetmut/errors -> codenetmut-errors)."""
    import re

    parts = [p for p in re.split(r"[\\/]+", path) if p][-2:]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))


def tokenize_curriculum(cur, base_dir: str, tokenizer: str, out: str, num_proc: int | None = None) -> dict:
    """Every distinct source of a curriculum tokenized into `out/<source>` for `tokenizer`,
    and `out/curriculum.yaml`: the same curriculum reading them (and that tokenizer)."""
    import dataclasses

    import yaml

    from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer

    profile = cur.profile()  # its callers have checked the action sources (training/setup.py)
    tok = load_tokenizer(tokenizer, exception=profile.exception_step, delta=profile.delta)
    keep = max(cur.model.max_code_length, cur.tokenizer.keep_code_length or 0)  # a longer window the ids keep for later
    encoder = Encoder(tok, keep, cur.model.max_trace_length, profile)
    os.makedirs(out, exist_ok=True)
    where, markers = {}, {}
    sources = _sources(cur)
    for path in sources:
        name = folder_name(path)
        while name in {m["folder"] for m in markers.values()}:
            name += "_"
        target = os.path.join(out, name)
        source = os.path.join(base_dir, path)
        if is_tokenized(source):  # tokenized before (the committed GPU data, unpacked): read as it is
            marker = json.load(open(os.path.join(source, MARKER)))
            markers[path] = {**marker, "folder": name}
            where[path] = os.path.abspath(source)
            continue
        start = time.monotonic()
        marker = finished(source, encoder, target)
        if marker is not None:
            print(f"tokenize: {path}: tokenized before, {marker['rows']} rows kept", file=sys.stderr, flush=True)
        else:
            print(f"tokenize: {path} ({len(markers) + 1} of {len(sources)}) ...", file=sys.stderr, flush=True)
            marker = write_tokenized(source, encoder, target, num_proc)
            print(
                f"tokenize: {path}: {marker['rows']} rows in {time.monotonic() - start:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        markers[path] = {**marker, "folder": name}
        where[path] = os.path.abspath(target)
    raw = dataclasses.asdict(cur)
    raw["model"]["tokenizer"] = os.path.abspath(tokenizer)
    raw["data"]["dir"] = "."  # the paths below are whole
    for stage in raw["stages"]:
        for src in stage["sources"]:
            src["path"] = where[src["path"]]
    with open(os.path.join(out, "curriculum.yaml"), "w") as f:
        yaml.safe_dump(raw, f, sort_keys=False)
    return markers


def tokenize(
    ds, encoder, num_proc: int | None = None, keep_in_memory: bool = False, cache_dir: str | None = None, features=None
):
    """(ids of a dataset in the encoder's format profile, serialized from the structured
    columns; how many targets were kept whole, cut at a step boundary or dropped).
    Dropped examples are left out. Cached by `datasets` beside the data per profile and
    tokenizer; in `cache_dir` instead where given (a read-only data folder, a one-off
    pass), or in memory with `keep_in_memory` (small data only). `features`: the
    columns' types as written, batch by batch (compact id dtypes)."""

    def cache(name: str) -> dict:
        return {"cache_file_name": os.path.join(cache_dir, f"{name}.arrow")} if cache_dir else {}

    table = ds.map(
        encoder.encode_rows,
        batched=True,
        remove_columns=ds.column_names,
        desc="tokenizing",
        load_from_cache_file=not (keep_in_memory or cache_dir),
        keep_in_memory=keep_in_memory,
        num_proc=num_proc,
        features=features,
        **cache("ids"),
    )
    fits = dict.fromkeys(FIT_OUTCOMES, 0)
    for entry in table.data.column("fit").value_counts().to_pylist():  # counted in Arrow: no list of every row's
        fits[entry["values"]] = entry["counts"]
    if fits["dropped_crash"] or fits["dropped_long_step"]:
        table = table.filter(
            lambda fit: fit.startswith(("whole", "cut")),
            input_columns="fit",
            desc="dropping",
            keep_in_memory=keep_in_memory,
            **cache("kept"),
        )
    return table, fits
