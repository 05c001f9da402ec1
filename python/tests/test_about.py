"""The reproducibility record: a model's record without reading the file, and its SHA-256 later."""

import os
import shutil

import newrllama4 as nl
from newrllama4.about import file_sha256_if_unchanged
from newrllama4.files import file_sha256


def test_a_record_without_the_hash_is_hashed_later_while_the_file_stays(tmp_path, tiny_model_path):
    path = str(tmp_path / "model.gguf")
    shutil.copyfile(tiny_model_path, path)
    with nl.Model(path) as model:
        record = nl.model_record(model, hash_file=False)
        assert record["sha256"] is None
        assert nl.model_record(model)["sha256"] == file_sha256(path)
    assert file_sha256_if_unchanged(path, record["file_state"]) == file_sha256(path)

    with open(path, "ab") as file:  # the file that answered is gone: no SHA-256 to give
        file.write(b"\0")
    assert file_sha256_if_unchanged(path, record["file_state"]) is None
    os.remove(path)
    assert file_sha256_if_unchanged(path, record["file_state"]) is None
