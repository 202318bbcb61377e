"""The committed data's ids (training/ids.py): tokenized sources as compact id streams that
come back whole; and the wheels a GPU lease carries, slimmed without breaking their record."""

import json
import sys
import zipfile

import pytest

from .conftest import ROOT

datasets = pytest.importorskip("datasets")
np = pytest.importorskip("numpy")


def _tokenized(folder, rows: int, seed: int = 0, vocab: int = 8000):
    """A tokenized folder as training/tokenized.py writes it: mutant-like rows (each a
    near-copy of one of a few programs), int16 ids, lengths, fits and the marker."""
    from codeexecutor.training.tokenized import MARKER

    rng = np.random.default_rng(seed)
    bases = [rng.integers(5, vocab, size=rng.integers(20, 200)) for _ in range(5)]
    code, trace, fits = [], [], []
    for i in range(rows):
        c = bases[i % 5].copy()
        c[rng.integers(0, len(c))] = rng.integers(5, vocab)  # one token changed: a mutant
        code.append(c.tolist())
        trace.append(rng.integers(5, vocab, size=rng.integers(0, 700)).tolist())
        fits.append(["whole", "cut_at_step"][i % 3 == 0])
    features = datasets.Features(
        {
            "code_ids": datasets.Sequence(datasets.Value("int16")),
            "trace_ids": datasets.Sequence(datasets.Value("int16")),
            "code_len": datasets.Value("int32"),
            "trace_len": datasets.Value("int32"),
            "fit": datasets.Value("string"),
        }
    )
    ds = datasets.Dataset.from_dict(
        {
            "code_ids": code,
            "trace_ids": trace,
            "code_len": [len(c) for c in code],
            "trace_len": [len(t) for t in trace],
            "fit": fits,
        },
        features=features,
    )
    ds.save_to_disk(str(folder))
    marker = {"format": 1, "tokenizer": "abc", "profile": "p", "rows": rows, "fits": {"whole": rows}, "source": "x"}
    (folder / MARKER).write_text(json.dumps(marker))
    return ds, marker


def test_an_ids_file_gives_back_the_same_tokenized_folder(tmp_path):
    from codeexecutor.training.ids import pack_tokenized, read_header, unpack_tokenized
    from codeexecutor.training.tokenized import MARKER

    ds, marker = _tokenized(tmp_path / "src", 300)
    figures = pack_tokenized(str(tmp_path / "src"), str(tmp_path / "src.ids.xz"))
    tokens = sum(ds["code_len"]) + sum(ds["trace_len"])
    assert figures["rows"] == 300 and figures["tokens"] == tokens and figures["bytes"] < 2 * tokens
    assert read_header(str(tmp_path / "src.ids.xz"))["marker"] == marker
    unpack_tokenized(str(tmp_path / "src.ids.xz"), str(tmp_path / "back"))
    back = datasets.load_from_disk(str(tmp_path / "back"))
    assert back.features == ds.features and back.num_rows == ds.num_rows
    for column in ds.column_names:
        assert back[column] == ds[column], column
    assert json.loads((tmp_path / "back" / MARKER).read_text()) == marker
    assert not list(tmp_path.glob("*.tmp"))


def test_an_empty_source_and_a_foreign_file(tmp_path):
    from codeexecutor.training.ids import pack_tokenized, unpack_tokenized

    _tokenized(tmp_path / "empty", 0)
    pack_tokenized(str(tmp_path / "empty"), str(tmp_path / "empty.ids.xz"))
    assert unpack_tokenized(str(tmp_path / "empty.ids.xz"), str(tmp_path / "back"))["rows"] == 0
    import lzma

    with lzma.open(tmp_path / "other.ids.xz", "wb") as f:
        f.write(b"not ids at all")
    with pytest.raises(ValueError, match="not an ids file"):
        unpack_tokenized(str(tmp_path / "other.ids.xz"), str(tmp_path / "never"))
    assert not (tmp_path / "never").exists()


def test_a_slimmed_wheel_keeps_what_it_names_and_a_matching_record(tmp_path):
    sys.path.insert(0, str(ROOT / "gpu_run"))
    from wheels import slim

    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    files = {
        "pkg/__init__.py": "x = 1\n",
        "pkg/models/__init__.py": "",
        "pkg/models/keep/a.py": "a = 1\n",
        "pkg/models/drop/b.py": "b = 2\n" * 1000,
        "pkg/utils.py": "u = 1\n",
    }
    record = "".join(f"{name},sha256=x,1\n" for name in files) + "pkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr("pkg-1.0.dist-info/RECORD", record)
    sizes = slim(wheel, "pkg/models/", ("keep", "__init__.py"))
    assert sizes["after"] < sizes["before"]
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        listed = {line.split(",")[0] for line in z.read("pkg-1.0.dist-info/RECORD").decode().splitlines()}
    assert names == set(files) - {"pkg/models/drop/b.py"} | {"pkg-1.0.dist-info/RECORD"}
    assert listed == names


def test_a_cut_ids_file_holds_its_first_rows(tmp_path):
    from codeexecutor.training.ids import pack_tokenized, unpack_tokenized

    ds, _ = _tokenized(tmp_path / "src", 50)
    figures = pack_tokenized(str(tmp_path / "src"), str(tmp_path / "cut.ids.xz"), max_rows=20)
    assert figures["rows"] == 20 and figures["tokens"] == sum(ds["code_len"][:20]) + sum(ds["trace_len"][:20])
    back = unpack_tokenized(str(tmp_path / "cut.ids.xz"), str(tmp_path / "back"))
    assert back["marker"]["rows"] == 20 and back["marker"]["cut_from_rows"] == 50
    again = datasets.load_from_disk(str(tmp_path / "back"))
    assert again["trace_ids"] == ds["trace_ids"][:20] and again["fit"] == ds["fit"][:20]
