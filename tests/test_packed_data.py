"""The committed training data (training/packed.py, codeexecutor/packed_cli.py): ids bound
to what makes them, added in parts, unpacked by `pretrain --until tokenize` without
building, read back as rows, a part dropped."""

import json
import lzma
import pathlib
import subprocess
import sys

import pytest

from codeexecutor.errors import UsageError

from .conftest import ROOT

pytest.importorskip("torch")


def test_a_longer_kept_code_window_is_cut_as_tokenizing_at_the_shorter_one():
    import numpy as np

    from codeexecutor.modeling.profiles import Profile
    from codeexecutor.modeling.tokenizer import Encoder, train_tokenizer
    from codeexecutor.training.tokenized import narrow_code

    lines = [f"x{i} = {i} * {i + 1}" for i in range(60)]
    program = "<codenet> " + " ".join(f"<{i}> {line}" for i, line in enumerate(lines))
    short = "<codenet> <0> y = 1 <1> print(y)"
    tok = train_tokenizer([program, short], vocab_size=400, min_frequency=1)
    for window in ("head", "ends"):
        wide = Encoder(tok, 1024, 256, Profile(window=window))
        narrow = Encoder(tok, 64, 256, Profile(window=window))
        rows = [wide.code(program), wide.code(short)]
        assert len(rows[0]) > 64 >= len(rows[1])  # one row to cut, one kept whole
        lengths, ids = narrow_code(np.array([len(r) for r in rows]), np.array(sum(rows, []), dtype=np.int16), narrow)
        assert lengths.tolist() == [len(narrow.code(program)), len(narrow.code(short))]
        assert ids.tolist() == narrow.code(program) + narrow.code(short)


def _pretrain(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "codeexecutor", "pretrain", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def _demo_recipe(where: pathlib.Path) -> pathlib.Path:
    """curricula/demo.yaml with its sources under data.dir (BUILD/NAME)."""
    import yaml

    raw = yaml.safe_load((ROOT / "curricula" / "demo.yaml").read_text())
    for stage in raw["stages"]:
        for src in stage["sources"]:
            src["path"] = "/".join(src["path"].split("/")[-2:])
    where.mkdir(parents=True, exist_ok=True)
    (where / "recipe.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return where / "recipe.yaml"


@pytest.fixture(scope="module")
def prep(demo_data, tmp_path_factory) -> pathlib.Path:
    """The demo data prepared (a tokenizer, tokenized) by `pretrain --until tokenize`."""
    where = tmp_path_factory.mktemp("release") / "prep"
    out = _pretrain(
        "--recipe",
        str(_demo_recipe(where.parent)),
        "--out",
        str(where),
        "--until",
        "tokenize",
        "--set",
        f"data.dir={demo_data}",
        "--set",
        "stages.tutorial.sources.0.hardest=4",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return where


def _recipe(tmp_path: pathlib.Path, rel: pathlib.Path, data: pathlib.Path) -> list[str]:
    """`pretrain` arguments of the demo recipe reading the committed data `rel` into `data`."""
    return [
        "--recipe",
        str(_demo_recipe(tmp_path)),
        "--out",
        str(tmp_path / "pt"),
        "--until",
        "tokenize",
        "--set",
        f"data.dir={data}",
        "--set",
        f"data.packed={rel}",
        "--set",
        f"model.tokenizer={rel / 'tokenizer'}",
        "--set",
        "stages.tutorial.sources.0.hardest=4",
    ]


def test_committed_parts_unpack_without_building_and_read_back_as_their_rows(prep, tmp_path):
    import datasets

    from codeexecutor import packed_cli
    from codeexecutor.training import packed
    from codeexecutor.training.ids import read_arrays
    from codeexecutor.training.tokenized import MARKER

    rel = tmp_path / "packed"
    first = packed_cli.add(prep, "s0of2", rel)
    second = packed_cli.add(prep, "s1of2", rel)  # the same rows again: a second shard's part
    assert set(first["sources"]) == set(second["sources"]) and (rel / "tokenizer").is_dir()
    assert (rel / "test.tar.xz").is_file() and list((rel / "builds").glob("codenetmut.s0of2.stats.json"))
    name = "codenetmut-codenetmut"
    once = json.loads((prep / "tokenized" / name / MARKER).read_text())["rows"]
    data = tmp_path / "data"
    run = _pretrain(*_recipe(tmp_path, rel, data))
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads((tmp_path / "pt" / "pretrain.json").read_text())
    assert record["phases"]["build"]["unpacked"][str(data / "codenetmut" / "codenetmut")] == 2 * once
    joined = datasets.load_from_disk(str(data / "codenetmut" / "codenetmut"))
    assert len(joined) == 2 * once and joined[once]["code_ids"] == joined[0]["code_ids"]  # part after part
    header, arrays = read_arrays(str(rel / first["sources"][name]["parts"]["s0of2"]["file"]))
    assert sum(len(r) for r in joined[:once]["trace_ids"]) == len(arrays["trace_ids"])
    assert (data / "test" / "codenetmut" / "codenetmut").is_dir()  # the fixed test samples beside
    tokenized = yaml_sources(tmp_path / "pt" / "tokenized" / "curriculum.yaml")
    assert str(data / "codenetmut" / "codenetmut") in tokenized  # read as it is, not tokenized again

    written = packed.rows(rel, tmp_path / "rows", [name], limit=40)
    assert written == {name: 40}
    enc = packed._manifest_encoder(rel, first)
    rows = [json.loads(x) for x in (tmp_path / "rows" / f"{name}.jsonl").read_text().splitlines()]
    assert {r["fit"] for r in rows} <= {"whole", "cut_at_step"} and rows[0]["part"] == "s0of2"
    for i, row in enumerate(rows):  # in the ids' order: tokenized again, each row gives the ids it was read from
        assert enc.code(row["code"]) == joined[i]["code_ids"], i
        assert [enc.mask0] + enc.ids(row["trace"]) + [enc.eos] == joined[i]["trace_ids"], i

    other = _pretrain(*_recipe(tmp_path / "o", rel, tmp_path / "o-data"), "--set", "model.max_trace_length=300")
    lines = [x for x in other.stderr.splitlines() if x.strip() and "pretrain:" not in x[:10]]
    assert other.returncode == 2 and "fingerprint" in other.stderr and "Traceback" not in other.stderr, lines

    dropped = packed_cli.drop("s1of2", None, rel)
    assert all(list(e["parts"]) == ["s0of2"] for e in dropped["sources"].values())
    assert dropped["tokens"] == first["tokens"] and not list((rel / "ids").glob("*.s1of2.ids.xz"))
    with pytest.raises(UsageError, match="only part"):
        packed_cli.drop("s0of2", None, rel)


def yaml_sources(path: pathlib.Path) -> set[str]:
    import yaml

    return {s["path"] for st in yaml.safe_load(path.read_text())["stages"] for s in st["sources"]}


def test_committed_ids_of_another_data_format_are_refused_in_one_line(prep, tmp_path):
    from codeexecutor import packed_cli
    from codeexecutor.training.ids import unpack_tokenized

    rel = tmp_path / "packed"
    manifest = packed_cli.add(prep, "s0of1", rel)
    (rel / "manifest.json").write_text(json.dumps({**manifest, "data_format": 0}))
    run = _pretrain(*_recipe(tmp_path, rel, tmp_path / "data"))
    lines = [x for x in run.stderr.splitlines() if x.strip() and not x.startswith("pretrain: ")]
    assert run.returncode == 2 and len(lines) == 1 and "data format 0" in lines[0], run.stderr
    with pytest.raises(ValueError, match="not an ids file"):
        (tmp_path / "other.ids.xz").write_bytes(lzma.compress(b"not ids"))
        unpack_tokenized(str(tmp_path / "other.ids.xz"), str(tmp_path / "never"))
    assert not (tmp_path / "never").exists()
