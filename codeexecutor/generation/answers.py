"""The one driver that decodes a set of inputs: `trace` (generation/api.py) and `evaluate`
(eval/evaluate.py) both come here. Answers are decoded in batches; an evaluation also
appends them to a JSON Lines file as each batch finishes (a stopped evaluation resumes) and
shares them out over processes (`shard`): each decodes its part into a file of its own,
which the others read."""

from __future__ import annotations

import json
import os

from codeexecutor.atomic import complete_lines, cut_to
from codeexecutor.generation.decoding import Decoding


def generate_answers(
    gen,
    inputs: list[str],
    decoding: Decoding,
    batch_size: int,
    progress: bool,
    journal: Answers | None = None,
    keys: list[str] | None = None,
    shard: tuple[int, int] | None = None,
) -> list:
    """The Generated answers (text, and whether it ended before the length cap), in input
    order, decoded as `decoding` says (generation/decoding.py). With a
    `journal`, answers it holds for these `keys` are taken from it and each new batch is
    appended to it as it finishes (a stopped evaluation resumes where it was). `shard` (i, n):
    only the inputs at positions i, i + n, ... are decoded; the others stay None."""
    outs: list = [journal.get(k) if journal is not None else None for k in (keys or [None] * len(inputs))]
    todo = [i for i, o in enumerate(outs) if o is None and (shard is None or i % shard[1] == shard[0])]
    it = range(0, len(todo), batch_size)
    if progress:
        from codeexecutor.progress import bar

        it = bar(it, desc="generating", unit="batch")
    for start in it:
        batch = todo[start : start + batch_size]
        made = gen.generate([inputs[i] for i in batch], decoding, batch_size=batch_size)
        for i, o in zip(batch, made):
            outs[i] = o
        if journal is not None:
            journal.add([(keys[i], o) for i, o in zip(batch, made)])
    return outs


class Answers:
    """Generated answers appended to a JSON Lines file as each batch finishes, keyed by the
    example and by everything that decides the answer (model, decoding, length cap): an
    evaluation started again with the same settings decodes only what is missing.
    `shard` (i, n): this process decodes the i-th of n shares and appends to
    `PATH.shard-i-of-n` of its own; every process reads the answers of all the files
    beside it, so a run without a shard scores what the shards decoded."""

    def __init__(self, path: str, settings: dict, shard: tuple[int, int] | None = None) -> None:
        import glob
        import hashlib

        self.path = path if shard is None else f"{path}.shard-{shard[0]}-of-{shard[1]}"
        self.tag = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
        self.known: dict[str, dict] = {}
        for other in sorted({path, *glob.glob(glob.escape(path) + ".shard-*-of-*")} - {self.path}):
            self._read(other)  # another shard's file, perhaps still being written: read, never cut
        cut_to(self.path, self._read(self.path))
        self.resumed = len(self.known)

    def _read(self, path: str) -> int:
        """Loads the whole lines of one file; returns the bytes they fill."""
        good = 0
        for end, row in complete_lines(path):
            good = end
            if row.get("tag") == self.tag:
                self.known[row["key"]] = row["answer"]
        return good

    def get(self, key: str):
        from codeexecutor.generation.search import Generated

        row = self.known.get(key)
        return Generated(**row) if row is not None else None

    def add(self, pairs: list) -> None:
        import dataclasses

        with open(self.path, "a", encoding="utf-8") as f:
            for key, answer in pairs:
                f.write(
                    json.dumps({"tag": self.tag, "key": key, "answer": dataclasses.asdict(answer)}, ensure_ascii=False)
                    + "\n"
                )
            f.flush()
            os.fsync(f.fileno())
