"""Benchmark: bytes a token of the committed data, id streams against the Arrow folders in tar.xz.

    .venv/bin/python benchmarks/bench_pack.py --tokenized runs/draw-prep/tokenized

For each tokenized source (`codeexecutor pretrain --until tokenize`, or `codeexecutor
tokenize`), the `.ids.xz` file the committed data is kept in (codeexecutor/training/ids.py) against
the baseline of the same folder as a tar.xz at preset 6 (how packs were made before), in
the same run: bytes, bytes a token, seconds to write, and a check that the file gives the
folder back. Writes results/bench_pack.json.
"""

from __future__ import annotations

import argparse
import io
import os
import tarfile
import tempfile
import time

from _common import ROOT, write_report  # noqa: F401  (puts ROOT on sys.path)


def tar_xz_bytes(folder: str) -> int:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=6) as tar:
        tar.add(folder, arcname=os.path.basename(folder))
    return len(buf.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenized", required=True, help="a folder of tokenized sources (with their curriculum.yaml)")
    args = ap.parse_args()
    import datasets

    from codeexecutor.training.ids import pack_tokenized, unpack_tokenized
    from codeexecutor.training.tokenized import is_tokenized

    folders = sorted(f for f in os.listdir(args.tokenized) if is_tokenized(os.path.join(args.tokenized, f)))
    if not folders:
        raise SystemExit(
            f"bench_pack: no tokenized sources in {args.tokenized} (codeexecutor tokenize, or pretrain "
            "--until tokenize)"
        )
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in folders:
            src = os.path.join(args.tokenized, name)
            t = time.perf_counter()
            ids = pack_tokenized(src, os.path.join(tmp, name + ".ids.xz"))
            seconds = time.perf_counter() - t
            unpack_tokenized(os.path.join(tmp, name + ".ids.xz"), os.path.join(tmp, name))
            a, b = datasets.load_from_disk(src), datasets.load_from_disk(os.path.join(tmp, name))
            same = a.num_rows == b.num_rows and all(a[c] == b[c] for c in ("code_ids", "trace_ids", "fit"))
            baseline = tar_xz_bytes(src)
            rows[name] = {
                "rows": ids["rows"],
                "tokens": ids["tokens"],
                "ids_bytes": ids["bytes"],
                "ids_bytes_per_token": ids["bytes_per_token"],
                "ids_seconds": round(seconds, 1),
                "tar_xz_bytes": baseline,
                "tar_xz_bytes_per_token": round(baseline / max(ids["tokens"], 1), 4),
                "ratio": round(ids["bytes"] / baseline, 3),
                "round_trip_identical": same,
            }
            print(
                f"{name:<28} {ids['tokens']:>12,} tokens  ids {ids['bytes_per_token']:.3f} B/token  "
                f"tar.xz {rows[name]['tar_xz_bytes_per_token']:.3f}  ({rows[name]['ratio']:.2f}x)  same: {same}"
            )
    tokens = sum(r["tokens"] for r in rows.values())
    total = {
        "tokens": tokens,
        "ids_bytes": sum(r["ids_bytes"] for r in rows.values()),
        "tar_xz_bytes": sum(r["tar_xz_bytes"] for r in rows.values()),
    }
    total.update(
        ids_bytes_per_token=round(total["ids_bytes"] / tokens, 4),
        tar_xz_bytes_per_token=round(total["tar_xz_bytes"] / tokens, 4),
        ratio=round(total["ids_bytes"] / total["tar_xz_bytes"], 3),
    )
    print(
        f"all: {tokens:,} tokens, ids {total['ids_bytes_per_token']} B/token, tar.xz {total['tar_xz_bytes_per_token']} "
        f"({total['ratio']}x)"
    )
    report = {
        "command": "benchmarks/bench_pack.py --tokenized " + os.path.relpath(args.tokenized, ROOT),
        "date": time.strftime("%Y-%m-%d"),
        "sources": rows,
        "total": total,
    }
    print(f"wrote {write_report('bench_pack', report)}")


if __name__ == "__main__":
    main()
