"""Model sources (sources.py): hf:// through a stand-in Hub, http(s) URLs through a file
server, ollama: from a store laid out in a temporary folder. Everything is on 127.0.0.1:
HF_ENDPOINT points huggingface_hub at the stand-in, and the caches are temporary folders."""

import hashlib
import os
from pathlib import Path

import pytest

import newrllama4 as nl
from newrllama4.sources import resolve_model, url_cache_path
from newrllama4.testing import FileServer, StandInHub, write_tiny_model

REPO = "someone/tiny-GGUF"
FILE = "tiny-Q4_K_M.gguf"


def generates(model):
    with nl.Context(model, n_ctx=128, n_seq_max=1) as ctx:
        return ctx.generate("hello how", max_tokens=4, temperature=0).n_tokens == 4


@pytest.fixture(scope="module")
def tiny_bytes(tmp_path_factory):
    return Path(write_tiny_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf")).read_bytes()


@pytest.fixture
def hub(tmp_path, monkeypatch, tiny_bytes):
    """A stand-in Hub holding REPO (FILE and a Q8_0 file) and HF's cache in a temporary folder."""
    with StandInHub() as server:
        server.add_to_repo(REPO, FILE, tiny_bytes)
        server.add_to_repo(REPO, "tiny-Q8_0.gguf", tiny_bytes + b"\0" * 64)
        server.add_to_repo(REPO, "README.md", b"# tiny\n")
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield server


def gets(server):
    return [request for request in server.requests if request[0] == "GET"]


# -- hf:// -----------------------------------------------------------------------------------


def test_a_hub_file_is_downloaded_announced_loaded_and_recorded(hub, tiny_bytes, caplog):
    reports = []
    with caplog.at_level("INFO", logger="newrllama4.sources"):
        model = nl.Model(f"hf://{REPO}/{FILE}", progress=reports.append)
    with model:
        assert generates(model)
        assert Path(model.path).read_bytes() == tiny_bytes
        assert model.source == {"source": f"hf://{REPO}/{FILE}", "hub_repo": REPO, "hub_file": FILE,
                                "hub_revision": hub.commits[REPO]}
        record = nl.model_record(model)
    assert record["hub_revision"] == hub.commits[REPO] and record["sha256"] == hashlib.sha256(tiny_bytes).hexdigest()
    # said before the first byte: the file, its size and where it goes; then bytes up to the whole
    assert reports[0].done == 0 and reports[0].total == len(tiny_bytes) and reports[0].file == FILE
    assert reports[0].destination.startswith(os.environ["HF_HUB_CACHE"])
    assert reports[-1].done == len(tiny_bytes)
    assert f"Downloading {FILE} ({len(tiny_bytes) / 1e6:.1f} MB) into {reports[0].destination}" in caplog.text


def test_a_second_load_from_the_hub_cache_downloads_nothing(hub):
    nl.Model(f"hf://{REPO}/{FILE}").close()
    n_gets = len(gets(hub))
    reports = []
    with nl.Model(f"hf://{REPO}/{FILE}", progress=reports.append):
        pass
    assert len(gets(hub)) == n_gets and reports == []


def test_a_reload_offline_or_with_the_network_gone_is_served_from_the_cache(hub, monkeypatch):
    nl.Model(f"hf://{REPO}/{FILE}").close()
    nl.Model(f"hf://{REPO}/*Q8_0.gguf").close()
    n_requests = len(hub.requests)
    # offline on purpose: no request at all, and a glob is matched against the cached files
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with nl.Model(f"hf://{REPO}/*Q4_K_M.gguf") as model:
        assert model.source["hub_file"] == FILE and model.source["hub_revision"] == hub.commits[REPO]
        assert generates(model)
    assert len(hub.requests) == n_requests
    with pytest.raises(nl.DownloadError, match="cannot be reached .* not in the Hub's cache"):
        nl.Model(f"hf://{REPO}/never-downloaded.gguf")
    # the server gone: huggingface_hub's requests fail, and the cached files serve
    monkeypatch.delenv("HF_HUB_OFFLINE")
    hub.stop()
    for spec in (f"hf://{REPO}/{FILE}", f"hf://{REPO}/*Q8_0.gguf"):
        with nl.Model(spec) as model:
            assert generates(model) and model.source["hub_revision"] == hub.commits[REPO]


def test_a_glob_must_match_one_model_else_the_error_lists_the_candidates(hub):
    with nl.Model(f"hf://{REPO}/*Q4_K_M.gguf") as model:
        assert model.source["hub_file"] == FILE
    with pytest.raises(nl.AmbiguousModelError, match="matches 2 model files") as ambiguous:
        nl.Model(f"hf://{REPO}/*.gguf")
    assert ambiguous.value.candidates == ["tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"]
    with pytest.raises(nl.ModelNotFoundError, match="No file of .* matches '\\*Q5_K_M.gguf'") as missing:
        nl.Model(f"hf://{REPO}/*Q5_K_M.gguf")
    assert missing.value.candidates == ["tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"]


def test_a_split_model_brings_every_part(hub, tmp_path):
    first = write_tiny_model(tmp_path / "split-Q4_K_M.gguf", split_max_tensors=8)
    parts = sorted(Path(first).parent.glob("split-Q4_K_M-*-of-*.gguf"))
    assert len(parts) == 3
    for part in parts:
        hub.add_to_repo(REPO, f"split/{part.name}", part.read_bytes())
    with nl.Model(f"hf://{REPO}/split/*split-Q4_K_M*.gguf") as model:
        assert model.source["hub_file"] == "split/split-Q4_K_M-00001-of-00003.gguf"
        assert generates(model)
    assert sorted(p.name for p in Path(model.path).parent.iterdir()) == [p.name for p in parts]


def test_no_such_repository_or_file_is_a_classed_error(hub):
    with pytest.raises(nl.ModelNotFoundError, match="no repository someone/missing"):
        nl.Model(f"hf://someone/missing/{FILE}")
    with pytest.raises(nl.ModelNotFoundError, match=f"{REPO} has no file tiny-Q5_K_M.gguf") as missing:
        nl.Model(f"hf://{REPO}/tiny-Q5_K_M.gguf")
    assert missing.value.candidates == ["tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"]
    assert isinstance(missing.value, nl.ModelLoadError) and missing.value.source == f"hf://{REPO}/tiny-Q5_K_M.gguf"
    with pytest.raises(nl.InvalidArgumentError, match="hf://OWNER/REPO/FILE.gguf"):
        nl.Model(f"hf://{REPO}")


def test_a_gated_repository_needs_a_token(hub, monkeypatch, tiny_bytes):
    hub.add_to_repo("someone/gated", FILE, tiny_bytes)
    hub.gated.add("someone/gated")
    with pytest.raises(nl.GatedModelError, match="gated or private and no token was sent"):
        nl.Model(f"hf://someone/gated/{FILE}")
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    with nl.Model(f"hf://someone/gated/{FILE}") as model:
        assert generates(model)


def test_a_connection_dropped_mid_file_is_resumed_with_a_range_request(hub, tiny_bytes):
    # huggingface_hub writes 10 MiB at a time, and resumes after the last whole block
    big = tiny_bytes + b"\0" * (11 << 20)
    hub.add_to_repo(REPO, "big.gguf", big)
    hub.drop_after[f"{REPO}/big.gguf"] = [(10 << 20) + 1000]
    resolved = resolve_model(f"hf://{REPO}/big.gguf")
    assert Path(resolved.path).read_bytes() == big
    assert [r[2] for r in gets(hub)] == [None, f"bytes={10 << 20}-"]


def test_a_hub_file_that_is_not_a_gguf_is_refused(hub):
    hub.add_to_repo(REPO, "model.safetensors", b"{}" + b"\0" * 100)
    with pytest.raises(nl.NotGgufError, match=f"\\(from hf://{REPO}/model.safetensors\\) is not a GGUF file"):
        nl.Model(f"hf://{REPO}/model.safetensors")


def test_a_corrupt_hub_download_is_not_kept(hub, monkeypatch):
    # the Hub names an LFS file by its SHA-256; a download that does not hash to it is dropped
    real_answer = hub.answer

    def corrupting(handler, path):
        if handler.command == "GET":
            hub.files["corrupt"] = b"GGUF" + b"\1" * 500
            return hub.send_file(handler, "corrupt", hub.files["corrupt"])
        return real_answer(handler, path)

    hub.add_to_repo(REPO, "corrupt.gguf", b"GGUF" + b"\0" * 500)
    monkeypatch.setattr(hub, "answer", corrupting)
    with pytest.raises(nl.ChecksumMismatchError) as mismatch:
        nl.Model(f"hf://{REPO}/corrupt.gguf")
    assert mismatch.value.expected == hashlib.sha256(b"GGUF" + b"\0" * 500).hexdigest()
    assert not list(Path(os.environ["HF_HUB_CACHE"]).rglob("corrupt.gguf"))


# -- http(s) URLs -------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setenv("NEWRLLAMA4_CACHE", str(tmp_path / "cache"))
    with FileServer() as server:
        yield server


def test_a_url_is_downloaded_once_then_served_from_the_cache_with_no_request(files, tiny_bytes):
    url = files.add("tiny.gguf", tiny_bytes)
    reports = []
    with nl.Model(url, progress=reports.append) as model:
        assert generates(model)
        assert model.source == {"source": url, "url": url}
        assert model.path == str(url_cache_path(url)) and Path(model.path).read_bytes() == tiny_bytes
    assert (reports[0].done, reports[0].total, reports[-1].done) == (0, len(tiny_bytes), len(tiny_bytes))
    files.stop()
    n_requests = len(files.requests)
    with nl.Model(url) as model:
        assert generates(model)
    assert len(files.requests) == n_requests == 1


def test_a_url_download_interrupted_mid_file_resumes_with_range(files, tiny_bytes):
    url = files.add("tiny.gguf", tiny_bytes)
    files.drop_after["tiny.gguf"] = [50_000]  # once: the same call resumes
    with nl.Model(url) as model:
        assert Path(model.path).read_bytes() == tiny_bytes
    assert [r[2] for r in files.requests] == [None, "bytes=50000-"]


def test_a_url_download_that_keeps_failing_keeps_its_part_and_the_next_load_resumes(files, tiny_bytes):
    url = files.add("tiny.gguf", tiny_bytes)
    files.drop_after["tiny.gguf"] = [40_000, 40_000, 40_000]
    with pytest.raises(nl.DownloadError, match="loading the model again resumes") as failed:
        nl.Model(url)
    target = url_cache_path(url)
    assert failed.value.bytes_done == 120_000 and failed.value.path == str(target) + ".part"
    assert not target.exists()  # a half file never has the model's name
    with nl.Model(url) as model:
        assert Path(model.path).read_bytes() == tiny_bytes
    assert files.requests[-1][2] == "bytes=120000-"
    assert not Path(failed.value.path).exists()


def test_a_url_download_is_checked_against_sha256(files, tiny_bytes):
    url = files.add("tiny.gguf", tiny_bytes)
    with pytest.raises(nl.ChecksumMismatchError) as mismatch:
        nl.Model(url, sha256="0" * 64)
    assert mismatch.value.actual == hashlib.sha256(tiny_bytes).hexdigest()
    assert not any(url_cache_path(url).parent.iterdir())  # neither the file nor its part is kept
    digest = hashlib.sha256(tiny_bytes).hexdigest()
    with nl.Model(url, sha256=digest.upper()) as model:
        assert model.sha256 == digest
    # the cached copy is checked too: another digest for the same URL fetches it again
    files.add("tiny.gguf", tiny_bytes + b"\0")
    new_digest = hashlib.sha256(tiny_bytes + b"\0").hexdigest()
    with nl.Model(url, sha256=new_digest) as model:
        assert model.sha256 == new_digest


def test_a_url_that_is_missing_or_not_a_gguf_is_a_classed_error(files):
    with pytest.raises(nl.ModelNotFoundError, match="HTTP 404"):
        nl.Model(files.url_of("missing.gguf"))
    url = files.add("page.gguf", b"<html>sign in first</html>")
    with pytest.raises(nl.NotGgufError, match="is not a GGUF file") as not_gguf:
        nl.Model(url)
    assert not_gguf.value.origin == url
    assert not any(url_cache_path(url).parent.iterdir())


def test_sha256_is_only_for_urls_and_must_be_a_digest(files, tiny_model_path):
    with pytest.raises(nl.InvalidArgumentError, match="`sha256` must be None unless"):
        nl.Model(tiny_model_path, sha256="0" * 64)
    with pytest.raises(nl.InvalidArgumentError, match="64 hexadecimal digits"):
        nl.Model(files.url_of("x.gguf"), sha256="abc")
