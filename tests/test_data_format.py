"""What packed ids are bound to (codeexecutor/training/data_format.py): the id-making code's
digest, recorded at its version, the same on every interpreter (the device runs 3.12)."""

import shutil

from .conftest import ROOT


def test_the_code_that_makes_ids_is_recorded_at_its_version():
    from codeexecutor.training.data_format import DATA_FORMAT, DATA_FORMAT_CODE, code_digest

    assert code_digest() == DATA_FORMAT_CODE, (
        f"the code that turns rows into ids changed (digest {code_digest()}, recorded {DATA_FORMAT_CODE}): if ids "
        f"change, raise DATA_FORMAT ({DATA_FORMAT}); either way record the new digest in training/data_format.py"
    )


def test_the_digest_follows_code_not_docstrings_or_comments(tmp_path):
    from codeexecutor.training.data_format import ID_MODULES, code_digest

    for name in ID_MODULES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    before = code_digest(tmp_path)
    tokenizer = tmp_path / "codeexecutor/modeling/tokenizer.py"
    text = tokenizer.read_text()
    tokenizer.write_text(text.replace('"""Tokenizer (RoBERTa', '"""The tokenizer (RoBERTa', 1) + "\n# a comment\n")
    assert code_digest(tmp_path) == before
    tokenizer.write_text(text.replace("self.max_trace - 2", "self.max_trace - 3", 1))
    assert code_digest(tmp_path) != before


def test_the_fingerprint_is_of_the_tokenizer_profile_lengths_and_format():
    from codeexecutor.training.data_format import fingerprint

    ident = {"tokenizer": "ab12", "profile": "exact+delta+end", "max_code_length": 1024, "max_trace_length": 768}
    assert fingerprint(ident) == fingerprint({**ident, "rows": 5})  # what the ids are of, not how many
    for key, other in (
        ("tokenizer", "cd34"),
        ("profile", "exact"),
        ("max_code_length", 512),
        ("max_trace_length", 512),
    ):
        assert fingerprint({**ident, key: other}) != fingerprint(ident), key
