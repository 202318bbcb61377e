"""Tokenized sources as compact id streams: how the committed GPU data (curricula/packed/) is kept.

A tokenized folder (training/tokenized.py) is an Arrow dataset of `code_ids`,
`trace_ids` (int16 lists), their lengths and each row's `fit`, with `tokenized.json`.
Compressed as it is, the Arrow files cost about a third of a byte a token. Written as
plain columns instead (every row's code ids back to back, then every row's trace ids,
then the lengths and fits), rows kept in the build's order, where the mutants of one
program sit together, a long-window LZMA finds each mutant's near-copy a few hundred
bytes back; the 2-byte settings (`lp=1`, `pb=1`) align its literals to the
2-byte ids. `pack_tokenized` writes one `.ids.xz` file a source and `unpack_tokenized`
writes the same folder back (same columns, same rows, same marker), which the training
reads as it reads any tokenized folder.

The file: MAGIC, a 4-byte length, the header JSON (marker, rows, dtype, fit names,
array sizes), then the arrays in the header's order, all in one LZMA stream.
"""

from __future__ import annotations

import json
import lzma
import os
import struct

from codeexecutor.atomic import replacing, write_json

MAGIC = b"CEIDS\x00\x01\x00"  # format 1
ARRAYS = ("code_len", "trace_len", "fit", "code_ids", "trace_ids")  # in the file's order
DICT_SIZE = 192 * 2**20  # the LZMA window: a whole source's code ids of a million-row build, and more


def filters(dict_size: int = DICT_SIZE) -> list[dict]:
    """LZMA2 at preset 9 extreme, tuned for 2-byte symbols."""
    return [
        {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": dict_size, "lc": 1, "lp": 1, "pb": 1}
    ]


def _columns(folder: str):
    """(marker, dict of numpy arrays) of a tokenized folder."""
    import numpy as np
    import pyarrow as pa

    from codeexecutor.training.tokenized import MARKER

    with open(os.path.join(folder, MARKER)) as f:
        marker = json.load(f)
    table = _read_arrow(folder)
    out = {}
    for name in ("code_ids", "trace_ids"):
        col = pa.concat_arrays(table.column(name).chunks) if table.num_rows else pa.array([], pa.list_(pa.int16()))
        offsets = col.offsets.to_numpy()
        values = col.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
        out[name] = values.astype(np.uint16 if values.dtype.itemsize == 2 else np.uint32)
        out[name.replace("ids", "len")] = np.diff(offsets).astype(np.uint16)
    fits = table.column("fit").to_pylist()
    names = sorted(set(fits))
    index = {n: i for i, n in enumerate(names)}
    out["fit"] = np.array([index[f] for f in fits], dtype=np.uint8)
    return marker, names, out


def _read_arrow(folder: str):
    """The rows of a dataset folder (`save_to_disk`'s layout: state.json naming its Arrow
    stream files), as one pyarrow table; an empty one where it has no files."""
    import pyarrow as pa

    with open(os.path.join(folder, "state.json")) as f:
        files = [d["filename"] for d in json.load(f)["_data_files"]]
    tables = []
    for name in files:
        with pa.OSFile(os.path.join(folder, name)) as source:  # read into memory: the table outlives the file
            tables.append(pa.ipc.open_stream(source).read_all())
    tables = [t for t in tables if t.num_rows]
    return (
        pa.concat_tables(tables)
        if tables
        else pa.table({"code_ids": [], "trace_ids": [], "fit": pa.array([], pa.string())})
    )


def pack_tokenized(
    folder: str, dest: str, dict_size: int = DICT_SIZE, max_rows: int | None = None, drop: tuple[str, ...] = ()
) -> dict:
    """`folder` (a tokenized source) as one `.ids.xz` file at `dest`, written atomically;
    returns its figures (rows, tokens, bytes, bytes a token). `max_rows`: only the first
    rows (whole programs' mutants, in the build's order), where the whole does not fit.
    `drop`: keys of the folder's marker left out of the file (this machine's paths)."""
    marker, fit_names, arrays = _columns(folder)
    marker = {k: v for k, v in marker.items() if k not in drop}
    if max_rows is not None and max_rows < len(arrays["fit"]):
        import numpy as np

        code = int(np.sum(arrays["code_len"][:max_rows], dtype=np.int64))
        trace = int(np.sum(arrays["trace_len"][:max_rows], dtype=np.int64))
        arrays = {
            "code_len": arrays["code_len"][:max_rows],
            "trace_len": arrays["trace_len"][:max_rows],
            "fit": arrays["fit"][:max_rows],
            "code_ids": arrays["code_ids"][:code],
            "trace_ids": arrays["trace_ids"][:trace],
        }
        marker = {**marker, "rows": max_rows, "cut_from_rows": marker.get("rows")}
    header = {
        "marker": marker,
        "rows": int(len(arrays["fit"])),
        "fit_names": fit_names,
        "arrays": {k: [str(arrays[k].dtype), int(arrays[k].size)] for k in ARRAYS},
    }
    blob = json.dumps(header).encode()
    with replacing(dest) as tmp, lzma.open(tmp, "wb", format=lzma.FORMAT_XZ, filters=filters(dict_size)) as f:
        f.write(MAGIC + struct.pack("<I", len(blob)) + blob)
        for k in ARRAYS:
            f.write(arrays[k].astype(arrays[k].dtype.newbyteorder("<")).tobytes())
    tokens = int(arrays["code_ids"].size + arrays["trace_ids"].size)
    size = os.path.getsize(dest)
    return {
        "rows": header["rows"],
        "tokens": tokens,
        "trace_tokens": int(arrays["trace_ids"].size),
        "bytes": size,
        "bytes_per_token": round(size / max(tokens, 1), 4),
    }


def _header(f, path: str) -> dict:
    """The header of an open ids file, which is left at its first array."""
    head = f.read(len(MAGIC) + 4)
    if head[: len(MAGIC)] != MAGIC:
        raise ValueError(f"{path} is not an ids file of this format")
    return json.loads(f.read(struct.unpack("<I", head[len(MAGIC) :])[0]))


def read_header(path: str) -> dict:
    with lzma.open(path, "rb") as f:
        return _header(f, path)


def read_arrays(path: str) -> tuple[dict, dict]:
    """(header, arrays) of one ids file: the lengths, fits (indices into the header's
    `fit_names`) and the flat code and trace ids."""
    import numpy as np

    with lzma.open(path, "rb") as f:
        header = _header(f, path)
        arrays = {}
        for k in ARRAYS:
            dtype, size = header["arrays"][k]
            dt = np.dtype(dtype).newbyteorder("<")
            arrays[k] = np.frombuffer(f.read(dt.itemsize * size), dtype=dt).astype(dtype)
    return header, arrays


def joined(paths: list[str]) -> tuple[dict, dict, list[str]]:
    """(header, arrays, fit names) of several ids files of one source read as one, their
    rows in the order given (the parts of a source built in shards)."""
    import numpy as np

    read = [read_arrays(p) for p in paths]
    names = sorted({n for header, _ in read for n in header["fit_names"]})
    index = {n: i for i, n in enumerate(names)}
    arrays = {}
    for k in ARRAYS:
        if k == "fit":
            parts = [
                np.array([index[n] for n in h["fit_names"]], dtype=np.uint8)[a["fit"]] if len(a["fit"]) else a["fit"]
                for h, a in read
            ]
        else:
            parts = [a[k] for _, a in read]
        arrays[k] = np.concatenate(parts) if len(parts) > 1 else parts[0]
    header = dict(read[0][0])
    rows = sum(h["rows"] for h, _ in read)
    header.update(rows=rows, fit_names=names, marker={**header["marker"], "rows": rows})
    if len(paths) > 1:  # what became of every part's targets, the dropped ones included
        fits: dict[str, int] = {}
        for h, _ in read:
            for outcome, n in (h["marker"].get("fits") or {}).items():
                fits[outcome] = fits.get(outcome, 0) + n
        header["marker"]["fits"] = fits
    return header, arrays, names


def unpack_tokenized(path: str | list[str], folder: str) -> dict:
    """The tokenized folder `path` was packed from, written to `folder` (atomically):
    the same rows, ids, lengths, fits and marker. Several paths (a source's parts) make one
    folder of all their rows. Returns the header."""
    import datasets
    import numpy as np
    import pyarrow as pa

    from codeexecutor.training.tokenized import MARKER

    header, arrays, _ = joined([path] if isinstance(path, str) else list(path))
    small = "int16" if arrays["code_ids"].dtype.itemsize == 2 else "int32"
    columns = {}
    for name in ("code", "trace"):
        offsets = np.zeros(header["rows"] + 1, dtype=np.int32)
        np.cumsum(arrays[f"{name}_len"], out=offsets[1:])
        values = pa.array(arrays[f"{name}_ids"].astype(small))
        columns[f"{name}_ids"] = pa.ListArray.from_arrays(pa.array(offsets), values)
        columns[f"{name}_len"] = pa.array(arrays[f"{name}_len"].astype(np.int32))
    names = np.array(header["fit_names"], dtype=object)
    columns["fit"] = pa.array(names[arrays["fit"]].tolist() if header["rows"] else [], pa.string())
    table = pa.table({k: columns[k] for k in ("code_ids", "trace_ids", "code_len", "trace_len", "fit")})
    features = datasets.Features(
        {
            "code_ids": datasets.Sequence(datasets.Value(small)),
            "trace_ids": datasets.Sequence(datasets.Value(small)),
            "code_len": datasets.Value("int32"),
            "trace_len": datasets.Value("int32"),
            "fit": datasets.Value("string"),
        }
    )
    if os.path.lexists(folder) and not os.path.isdir(folder):
        os.remove(folder)
    with replacing(folder) as tmp:
        datasets.Dataset(table).cast(features).save_to_disk(tmp)
        write_json(os.path.join(tmp, MARKER), header["marker"], indent=2)
    return header
