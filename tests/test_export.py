"""A model cut into pieces on one machine and put back together on another."""

import json

import pytest

from codeexecutor.generation.decoding import Decoding

pytest.importorskip("torch")


def test_pieces_join_back_into_the_model_and_refuse_damage(overfit_model, tmp_path):
    import torch

    from codeexecutor.errors import UsageError
    from codeexecutor.generation import TraceGenerator
    from codeexecutor.training.export import export_pieces, join_pieces

    model, rows = overfit_model
    manifest = export_pieces(str(model), str(tmp_path / "out"), piece_bytes=64 * 1024)
    pieces = sorted((tmp_path / "out").glob("model.safetensors.part*"))
    assert len(pieces) == len(manifest["pieces"]) > 2 and all(p.stat().st_size <= 64 * 1024 for p in pieces)
    join_pieces(str(tmp_path / "out"), str(tmp_path / "joined"))
    original, joined = TraceGenerator(str(model)), TraceGenerator(str(tmp_path / "joined"))
    assert json.loads((tmp_path / "joined" / "pieces.json").read_text())["dtype"] == "bfloat16"
    ids = original.encoder.code(rows[0]["input"])
    with torch.no_grad():
        a = original.model.roberta.embeddings.word_embeddings.weight.float()
        b = joined.model.roberta.embeddings.word_embeddings.weight.float()
    assert torch.allclose(a, b, rtol=1e-2, atol=1e-3) and len(ids) > 0  # bf16 rounding only
    assert joined.generate([rows[0]["input"]], Decoding(beam=1, max_length=40, names=False, values=False))[
        0
    ].text  # it loads and decodes
    stamp = (tmp_path / "joined" / "model.safetensors").stat().st_mtime_ns
    join_pieces(str(tmp_path / "out"), str(tmp_path / "joined"))  # already whole: left as it is
    assert (tmp_path / "joined" / "model.safetensors").stat().st_mtime_ns == stamp

    data = pieces[1].read_bytes()
    pieces[1].write_bytes(data[:-10])
    with pytest.raises(UsageError, match="cut short or changed"):
        join_pieces(str(tmp_path / "out"), str(tmp_path / "again"))
    pieces[1].unlink()
    with pytest.raises(UsageError, match="is missing"):
        join_pieces(str(tmp_path / "out"), str(tmp_path / "again"))
    assert not (tmp_path / "again").exists() and not (tmp_path / "again.tmp").exists()
