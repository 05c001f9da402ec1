"""Where a model file comes from: one resolver for every way of naming a model.

`resolve_model(spec)` turns what `Model()` (and R's model_load()) is given into a GGUF
file on this machine, and a record of where it came from for the manifest:

- a name ("gemma3-270m", "smollm2-135m-instruct"): a file an installed package carries (models.py);
- "hf://OWNER/REPO/FILE.gguf": a file of a Hugging Face Hub repository, fetched by huggingface_hub
  into the Hub's shared cache (so a model another tool downloaded is not fetched again). FILE may be
  a glob ("*Q4_K_M.gguf") that must match one model; a split GGUF ("-00001-of-00003.gguf") brings
  every part. HF_TOKEN, HF_ENDPOINT, HF_HUB_CACHE and HF_HUB_OFFLINE apply;
- "https://..." or "http://...": a GGUF file streamed into this engine's cache folder, resumed
  after an interruption, renamed into place only once complete (and checked against `sha256`);
  a second load reads the cached file without a request;
- "ollama:NAME[:TAG]": the model blob of a model pulled with Ollama, read in place;
- anything else: the path of a GGUF file.

Downloads say their size and destination before they start (the `newrllama4.sources` logger,
and `progress`, a callable given a `DownloadProgress` as bytes arrive).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional
from urllib.parse import unquote, urlsplit

import httpx

from .errors import (
    AmbiguousModelError,
    ChecksumMismatchError,
    DownloadError,
    GatedModelError,
    InvalidArgumentError,
    ModelLoadError,
    ModelNotFoundError,
    NotGgufError,
)
from .files import file_sha256, format_bytes
from .models import DEFAULT_MODEL, cache_dir, is_model_name, make_cache_folder, model_path
from .ollama import OLLAMA_MODEL_LAYER, OLLAMA_PREFIX, ollama_display, ollama_models, ollama_name, ollama_stores

logger = logging.getLogger(__name__)

HUB_PREFIX = "hf://"
_URL_PREFIXES = ("https://", "http://")
_GGUF_MAGIC = b"GGUF"
_SHA256 = re.compile(r"[0-9a-f]{64}")
# llama.cpp's names for the parts of a split model; it loads the others beside the first
_SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
_REPORT_EVERY = 1 << 20  # bytes between two progress reports of a URL download
_URL_ATTEMPTS = 3  # a connection that breaks mid-file is resumed this many times before giving up


@dataclass(frozen=True)
class DownloadProgress:
    """One report on a download: `file` (its name) going to `destination` (a folder),
    `done` of `total` bytes (`total` None when the server does not say). The first
    report of a file comes before its first byte; the last has done == total."""

    file: str
    destination: str
    done: int
    total: Optional[int]


ProgressCallback = Callable[[DownloadProgress], None]


@dataclass(frozen=True)
class ResolvedModel:
    """A model's GGUF file on this machine (the first part of a split model), and where it
    came from: `source` is what was asked for; the other keys say what it resolved to."""

    path: str
    source: dict[str, Any]


def resolve_model(spec: Any = None, sha256: Optional[str] = None,
                  progress: Optional[ProgressCallback] = None) -> ResolvedModel:
    """The GGUF file `spec` names (see the module's docstring), fetched first if need be."""
    spec = DEFAULT_MODEL if spec is None else spec
    if sha256 is not None:
        if not (isinstance(spec, str) and spec.startswith(_URL_PREFIXES)):
            raise InvalidArgumentError("sha256", sha256, "None unless the model is an http(s) URL "
                                       "(the Hub and Ollama name their files' digests themselves)")
        if not (isinstance(sha256, str) and _SHA256.fullmatch(sha256.lower())):
            raise InvalidArgumentError("sha256", sha256, "a SHA-256 digest: 64 hexadecimal digits")
        sha256 = sha256.lower()
    if isinstance(spec, str) and spec.startswith(HUB_PREFIX):
        return _from_hub(spec, progress)
    if isinstance(spec, str) and spec.startswith(_URL_PREFIXES):
        return _from_url(spec, sha256, progress)
    if isinstance(spec, str) and spec.startswith(OLLAMA_PREFIX):
        return _from_ollama(spec)
    if is_model_name(spec):
        return ResolvedModel(check_gguf_file(model_path(spec)), {"source": spec})
    return ResolvedModel(check_gguf_file(spec), {"source": os.fspath(spec) if isinstance(spec, os.PathLike) else spec})


def check_gguf_file(path: Any) -> str:
    """`path`, expanded, once it is known to be an existing file that starts as a GGUF does."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError("path", path, "a path to a GGUF file, a model name, or hf://, http(s):// "
                                                 "or ollama: source")
    path = os.fspath(Path(path).expanduser())
    if not os.path.exists(path):
        raise ModelLoadError(f"`path` {path!r} does not exist.", path)
    if os.path.isdir(path):
        raise ModelLoadError(f"`path` {path!r} is a directory, not a GGUF file.", path)
    with open(path, "rb") as handle:
        if handle.read(4) != _GGUF_MAGIC:
            raise NotGgufError(path)
    return path


def _check_fetched_gguf(path: Any, source: str) -> str:
    """check_gguf_file, for a file a source gave: its error names the source."""
    try:
        return check_gguf_file(path)
    except NotGgufError:
        raise NotGgufError(os.fspath(path), source) from None


def _announce(file: str, destination: str, total: Optional[int], done: int,
              progress: Optional[ProgressCallback]) -> None:
    resuming = f", resuming at {format_bytes(done)}" if done else ""
    logger.info("Downloading %s (%s%s) into %s", file, format_bytes(total), resuming, destination)
    if progress is not None:
        progress(DownloadProgress(file, destination, done, total))


# -- hf://OWNER/REPO/FILE ---------------------------------------------------------------


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _from_hub(spec: str, progress: Optional[ProgressCallback]) -> ResolvedModel:
    parts = spec[len(HUB_PREFIX):].split("/", 2)
    if len(parts) < 3 or not all(parts):
        raise InvalidArgumentError("path", spec, "an hf:// source of the form hf://OWNER/REPO/FILE.gguf")
    repo, pattern = "/".join(parts[:2]), parts[2]
    # huggingface_hub reads its environment once, when imported; read here, when the call is
    # made, these settings also apply when set in a session that has loaded the engine already
    hub = dict(endpoint=os.environ.get("HF_ENDPOINT") or None, cache_dir=os.environ.get("HF_HUB_CACHE") or None,
               local_files_only=_env_flag("HF_HUB_OFFLINE"))
    with _hub_errors(spec, repo, hub):
        files = _hub_model_files(spec, repo, pattern, hub)
        downloaded = [_hub_download(spec, repo, file, hub, progress) for file in files]
    path, revision = downloaded[0]
    _check_fetched_gguf(path, spec)
    return ResolvedModel(path, {"source": spec, "hub_repo": repo, "hub_file": files[0], "hub_revision": revision})


def _hub_model_files(spec: str, repo: str, pattern: str, hub: dict[str, Any]) -> list[str]:
    """The files of the one model `pattern` names in the repository: one file, or every part
    of a split model (the first first). A glob is matched against the repository's files."""
    if not any(c in pattern for c in "*?["):
        return _split_parts(pattern)
    files = _hub_file_list(repo, hub)
    models: dict[str, list[str]] = {}  # one entry per model: a file, or a split model's parts
    for file in fnmatch.filter(files, pattern):
        models.setdefault(_SPLIT_PART.sub("", file), []).append(file)
    if not models:
        raise ModelNotFoundError(spec, f"No file of {repo} matches {pattern!r}.",
                                 [f for f in files if f.lower().endswith(".gguf")])
    if len(models) > 1:
        raise AmbiguousModelError(spec, sorted(min(group) for group in models.values()))
    return _split_parts(min(next(iter(models.values()))))


def _split_parts(file: str) -> list[str]:
    match = _SPLIT_PART.search(file)
    if not match:
        return [file]
    n_parts = int(match.group(2))
    return [_SPLIT_PART.sub(f"-{i:05d}-of-{n_parts:05d}.gguf", file) for i in range(1, n_parts + 1)]


def _hub_file_list(repo: str, hub: dict[str, Any]) -> list[str]:
    """The repository's files: listed by the Hub, or, offline, those of its cached snapshot."""
    import huggingface_hub
    from huggingface_hub.errors import OfflineModeIsEnabled

    if not hub["local_files_only"]:
        try:
            return huggingface_hub.HfApi(endpoint=hub["endpoint"]).list_repo_files(repo)
        except (OfflineModeIsEnabled, _hub_transport_error()) as exc:
            logger.info("The Hub cannot be reached (%s); matching the cached files of %s", exc, repo)
    snapshot = Path(huggingface_hub.snapshot_download(repo, cache_dir=hub["cache_dir"], local_files_only=True))
    return sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if not p.is_dir())


def _hub_download(spec: str, repo: str, file: str, hub: dict[str, Any],
                  progress: Optional[ProgressCallback]) -> tuple[str, str]:
    """One file of the repository in the Hub's cache, and the commit it is from."""
    import huggingface_hub

    planned = huggingface_hub.hf_hub_download(repo, file, dry_run=True, **hub)
    if not planned.will_download:
        return planned.local_path, planned.commit_hash
    # the cache keeps a repository's files in blobs/, linked from snapshots/COMMIT/FILE
    snapshot = Path(planned.local_path).parents[file.count("/")]
    destination = str(snapshot.parents[1] / "blobs")
    _announce(file, destination, planned.file_size, 0, progress)
    path = huggingface_hub.hf_hub_download(
        repo, file, tqdm_class=_hub_progress_bar(file, destination, progress), **hub,
    )
    # a file stored with Git LFS is named in the cache by its SHA-256, which huggingface_hub
    # does not check for plain HTTP downloads: a corrupt download must not pass as the model
    expected = Path(path).resolve().name
    if _SHA256.fullmatch(expected) and file_sha256(path) != expected:
        actual = file_sha256(path)
        for copy in (Path(path).resolve(), Path(path)):  # the blob, and the snapshot's link to it
            copy.unlink(missing_ok=True)
        raise ChecksumMismatchError(spec, expected, actual)
    return path, Path(path).parents[file.count("/")].name


def _hub_progress_bar(file: str, destination: str, progress: Optional[ProgressCallback]) -> Any:
    """huggingface_hub reports progress to a tqdm class: one that forwards it to `progress`
    (and draws nothing), or None for huggingface_hub's own bars."""
    if progress is None:
        return None
    from huggingface_hub.utils import tqdm as hub_tqdm

    class Reporter(hub_tqdm):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **{**kwargs, "disable": True})

        def update(self, n: float = 1) -> None:
            self.n += n
            progress(DownloadProgress(file, destination, int(self.n), self.total))

    return Reporter


def _hub_transport_error() -> type[Exception]:
    """What huggingface_hub's client raises when the network fails: huggingface_hub 2 sends
    its requests with httpx2 (Python 3.11 and later), and 1.x with httpx."""
    import huggingface_hub

    if int(huggingface_hub.__version__.split(".")[0]) < 2:
        return httpx.TransportError
    import httpx2

    return httpx2.TransportError


@contextmanager
def _hub_errors(spec: str, repo: str, hub: dict[str, Any]) -> Iterator[None]:
    """huggingface_hub's exceptions for a failed fetch, as the engine's classed errors."""
    from huggingface_hub import errors

    where = hub["endpoint"] or "the Hugging Face Hub"
    try:
        yield
    except errors.GatedRepoError as exc:
        token = "the token in HF_TOKEN has no access to it" if os.environ.get("HF_TOKEN") else "no token was sent"
        raise GatedModelError(spec, f"{repo} on {where} is gated or private and {token}: accept its terms "
                                    "on the Hub, then set HF_TOKEN to a token of that account.") from exc
    except errors.RepositoryNotFoundError as exc:
        raise ModelNotFoundError(spec, f"There is no repository {repo} on {where} (or it is private and "
                                       "HF_TOKEN is not a token with access to it).") from exc
    except errors.LocalEntryNotFoundError as exc:
        raise DownloadError(spec, f"{where} cannot be reached (or HF_HUB_OFFLINE is set) and {spec} is not "
                                  "in the Hub's cache on this machine.") from exc
    except errors.RemoteEntryNotFoundError as exc:
        try:
            candidates = [f for f in _hub_file_list(repo, hub) if f.lower().endswith(".gguf")]
        except (errors.HfHubHTTPError, _hub_transport_error()):  # the listing only adds detail to the error
            candidates = []
        raise ModelNotFoundError(spec, f"{repo} has no file {spec[len(HUB_PREFIX) + len(repo) + 1:]}.",
                                 candidates) from exc
    except (errors.HfHubHTTPError, _hub_transport_error(), OSError) as exc:
        raise DownloadError(spec, f"Could not download {spec}: {exc}. Loading it again resumes.") from exc


# -- http(s) URLs ---------------------------------------------------------------------------


def url_cache_path(url: str) -> Path:
    """Where the file a URL names is kept: a folder per URL (named by its hash) in the
    engine's cache folder, holding the file under its own name."""
    name = unquote(Path(urlsplit(url).path).name) or "model.gguf"
    return cache_dir() / "downloads" / hashlib.sha256(url.encode("utf-8")).hexdigest()[:16] / name


def _from_url(url: str, sha256: Optional[str], progress: Optional[ProgressCallback]) -> ResolvedModel:
    target = url_cache_path(url)
    if target.exists() and sha256 is not None and file_sha256(str(target)) != sha256:
        logger.info("The cached %s does not have the SHA-256 asked for; downloading it again", target)
        target.unlink()
    if not target.exists():
        _download(url, target, sha256, progress)
    return ResolvedModel(check_gguf_file(target), {"source": url, "url": url})


def _download(url: str, target: Path, sha256: Optional[str], progress: Optional[ProgressCallback]) -> None:
    """Stream `url` into `target`: into target.part first (resumed with an HTTP Range request
    when a former attempt left one), renamed once complete and checked, so that a half file
    never has the model's name."""
    make_cache_folder(target.parent)
    partial = target.with_name(target.name + ".part")
    for attempt in range(1, _URL_ATTEMPTS + 1):
        try:
            _fetch_into(url, target.name, partial, progress)
            break
        except httpx.TransportError as exc:
            done = partial.stat().st_size if partial.exists() else 0
            if attempt == _URL_ATTEMPTS:
                kept = (f"{format_bytes(done)} arrived and are kept in {partial}; loading the model again resumes from there"
                        if done else "loading the model again tries again")
                raise DownloadError(url, f"The download of {url} failed {attempt} times ({exc or type(exc).__name__}); "
                                         f"{kept}.", str(partial), done) from exc
            logger.info("The download of %s broke after %s (%s); resuming", url, format_bytes(done), exc)
            time.sleep(0.5 * attempt)
    try:
        _check_fetched_gguf(partial, url)
    except NotGgufError:
        partial.unlink()  # not kept: the next load asks again
        raise
    if sha256 is not None:
        actual = file_sha256(str(partial))
        if actual != sha256:
            partial.unlink()
            raise ChecksumMismatchError(url, sha256, actual)
    os.replace(partial, target)


def _fetch_into(url: str, name: str, partial: Path, progress: Optional[ProgressCallback]) -> None:
    """One request for what `partial` lacks of the file, appended to it."""
    done = partial.stat().st_size if partial.exists() else 0
    headers = {"Range": f"bytes={done}-", "Accept-Encoding": "identity"} if done else {"Accept-Encoding": "identity"}
    with httpx.stream("GET", url, headers=headers, follow_redirects=True,
                      timeout=httpx.Timeout(30.0, read=120.0)) as response:
        if response.status_code == 416:  # the part is already whole (or longer than the file): start again
            partial.unlink()
            return _fetch_into(url, name, partial, progress)
        if response.status_code == 404:
            raise ModelNotFoundError(url, f"{url} does not exist (HTTP 404).")
        if response.status_code >= 400:
            raise DownloadError(url, f"{url} answered HTTP {response.status_code}.")
        if response.status_code != 206:  # the server ignored the range: the whole file comes
            done = 0
        total = _total_size(response, done)
        _announce(name, str(partial.parent), total, done, progress)
        reported = done
        with open(partial, "ab" if done else "wb") as file:
            # chunks as they arrive: a chunk size would hold back what came before a broken connection
            for chunk in response.iter_bytes():
                file.write(chunk)
                done += len(chunk)
                if progress is not None and (done - reported >= _REPORT_EVERY or done == total):
                    progress(DownloadProgress(name, str(partial.parent), done, total))
                    reported = done
        if total is not None and done < total:
            raise httpx.RemoteProtocolError(f"the connection closed after {done} of {total} bytes")


def _total_size(response: httpx.Response, done: int) -> Optional[int]:
    content_range = response.headers.get("Content-Range", "")
    if response.status_code == 206 and "/" in content_range and not content_range.endswith("*"):
        return int(content_range.rsplit("/", 1)[1])
    length = response.headers.get("Content-Length")
    return done + int(length) if length is not None else None


# -- ollama:NAME[:TAG] ------------------------------------------------------------------------


def _from_ollama(spec: str) -> ResolvedModel:
    registry, namespace, model, tag = ollama_name(spec)
    stores = ollama_stores()
    for store in stores:
        manifest_path = store / "manifests" / registry / namespace / model / tag
        if manifest_path.is_file():
            return _ollama_blob(spec, store, manifest_path, ollama_display(registry, namespace, model, tag))
    pulled = sorted({name for store in stores for name in ollama_models(store)})
    raise ModelNotFoundError(spec, f"No Ollama model {ollama_display(registry, namespace, model, tag)} "
                                   f"was pulled into {', '.join(str(s) for s in stores)}.", pulled)


def _ollama_blob(spec: str, store: Path, manifest_path: Path, name: str) -> ResolvedModel:
    """The model layer of an Ollama manifest: its blob, read in place."""
    try:
        layers = json.loads(manifest_path.read_text(encoding="utf-8")).get("layers", [])
        digest = next(layer["digest"] for layer in layers if layer.get("mediaType") == OLLAMA_MODEL_LAYER)
    except (ValueError, KeyError, AttributeError, TypeError, StopIteration) as exc:
        raise ModelLoadError(f"The Ollama manifest {manifest_path} names no model layer "
                             f"({OLLAMA_MODEL_LAYER}).", str(manifest_path)) from exc
    blob = store / "blobs" / digest.replace(":", "-")
    if not blob.is_file():
        raise ModelNotFoundError(spec, f"The Ollama manifest of {name} names the blob {blob}, which is missing: "
                                       f"pull the model again (`ollama pull {name}`).")
    return ResolvedModel(_check_fetched_gguf(blob, spec), {"source": spec, "ollama_model": name, "ollama_digest": digest})
