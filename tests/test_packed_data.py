"""The draw's committed data (codeexecutor/campaign/release.py): ids bound to what makes
them, added in parts, packed without building, read back as rows."""

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

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


@pytest.fixture(scope="module")
def prep(demo_data, tmp_path_factory) -> pathlib.Path:
    """The demo data prepared (built, a tokenizer, tokenized) as `draw pack --build` prepares it."""
    where = tmp_path_factory.mktemp("release")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "draw",
            "pack",
            "--smoke",
            "--data",
            str(demo_data),
            "--out",
            str(where / "pack0"),
            "--prep",
            str(where / "prep"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return where / "prep"


def test_committed_parts_pack_without_building_and_read_back_as_their_rows(prep, tmp_path):
    from codeexecutor.campaign import release
    from codeexecutor.campaign.ids import read_arrays, unpack_tokenized
    from codeexecutor.campaign.pack import pack, part_paths, verify
    from codeexecutor.errors import UsageError
    from codeexecutor.training.tokenized import MARKER

    rel = tmp_path / "packed"
    first = release.add(prep, "s0of2", rel)
    second = release.add(prep, "s1of2", rel)  # the same rows again: a second shard's part
    assert set(first["sources"]) == set(second["sources"]) and (rel / "tokenizer").is_dir()
    assert (rel / "test.tar.xz").is_file() and list((rel / "builds").glob("codenetmut.s0of2.stats.json"))
    recipe = prep / "recipe.yaml"
    manifest = pack(str(recipe), str(tmp_path / "pack"), wheels=False, committed=rel)
    assert manifest["committed"] == str(rel) and manifest["fingerprint"] == first["fingerprint"]
    assert not (tmp_path / "pack" / "ids").exists()  # the ids stay where they are committed
    assert verify(manifest, tmp_path / "pack") > 0
    name = "codenetmut-codenetmut"
    tokenized = prep / "tokenized" / name
    once = json.loads((tokenized / MARKER).read_text())["rows"]
    assert manifest["sources"][name]["rows"] == 2 * once
    back = unpack_tokenized([str(p) for p in part_paths(manifest, name, tmp_path / "pack")], str(tmp_path / "back"))
    assert back["rows"] == 2 * once
    header, arrays = read_arrays(str(rel / first["sources"][name]["parts"]["s0of2"]["file"]))
    import datasets

    joined = datasets.load_from_disk(str(tmp_path / "back"))
    assert joined[once]["code_ids"] == joined[0]["code_ids"]  # the second part follows the first, row for row
    assert sum(len(r) for r in joined[:once]["trace_ids"]) == len(arrays["trace_ids"])

    written = release.rows(rel, tmp_path / "rows", [name], limit=40)
    assert written == {name: 40}
    enc = release._manifest_encoder(rel, first)
    rows = [json.loads(x) for x in (tmp_path / "rows" / f"{name}.jsonl").read_text().splitlines()]
    assert {r["fit"] for r in rows} <= {"whole", "cut_at_step"} and rows[0]["part"] == "s0of2"
    for i, row in enumerate(rows):  # in the ids' order: tokenized again, each row gives the ids it was read from
        assert enc.code(row["code"]) == joined[i]["code_ids"], i
        assert [enc.mask0] + enc.ids(row["trace"]) + [enc.eos] == joined[i]["trace_ids"], i

    with pytest.raises(UsageError, match="fingerprint"):
        pack(
            str(recipe), str(tmp_path / "other"), wheels=False, committed=rel, overrides=["model.max_trace_length=300"]
        )
    stale = json.loads((rel / "manifest.json").read_text())
    (rel / "manifest.json").write_text(json.dumps({**stale, "fingerprint": "0123456789abcdef"}))
    with pytest.raises(UsageError, match="packed for data"):
        verify(manifest, tmp_path / "pack")
    (rel / "manifest.json").write_text(json.dumps(stale))


def test_draw_plan_refuses_a_pack_of_another_data_format_in_one_line(prep, tmp_path):
    pack = prep.parent / "pack0"
    manifest = json.loads((pack / "manifest.json").read_text())
    copy = tmp_path / "pack"
    shutil.copytree(pack, copy)
    (copy / "manifest.json").write_text(json.dumps({**manifest, "data_format": 0}))
    run = subprocess.run(
        [sys.executable, "-m", "codeexecutor", "draw", "plan", "--pack", str(copy)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [x for x in run.stderr.splitlines() if x.strip()]
    assert run.returncode == 2 and len(lines) == 1 and "data format 0" in lines[0], run.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "codeexecutor", "draw", "plan", "--pack", str(pack)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0 and "ready" in ok.stdout and "MiB of 64 left" in ok.stdout, ok.stderr
