"""Test helpers: a tiny random-weight llama model, an OpenAI-compatible server of it, and
stand-ins for where models come from (a file server, the Hugging Face Hub, an Ollama store).

The model (needs the `gguf` package: the `test` extra) is a real GGUF that llama.cpp
loads and runs in milliseconds, with a SentencePiece-style vocabulary that has byte
fallback, so text outside the vocabulary (accents, CJK, emoji) is spelt out in byte
tokens that split UTF-8 characters. The servers are llama-cpp-python's (its `server`
extra, in the `test` extra) and llama.cpp's llama-server (`make setup-test` builds it from
the engine's own llama.cpp into the virtual environment's bin; else the PATH's).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

_WORDS = (
    "the of and to in is was for on that with as by at from his her it an were are which this "
    "be or has had not but its also their after first one two new who they been more other "
    "when time during there some into only most over city year years school world about people "
    "hello how are you today tell me a story once upon king queen river mountain small large "
    "red green blue answer question yes no good bad happy sad positive negative neutral text"
).split()
_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"()-éà"
_CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)

# llama.cpp token types
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6


def _vocabulary() -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [_UNKNOWN, _CONTROL, _CONTROL, _CONTROL, _CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [_BYTE] * 256
    pieces: list[str] = ["\u2581"] + list(_CHARS)
    for word in _WORDS:
        # SentencePiece merges pairwise, so every prefix of a word must be a token too
        spelled = "\u2581" + word
        pieces += [spelled[:i] for i in range(2, len(spelled) + 1)]
    seen = set(tokens)
    normal = [p for p in dict.fromkeys(pieces) if p not in seen]
    tokens += normal
    types += [_NORMAL] * len(normal)
    # longer pieces merge first
    scores = [0.0] * (len(tokens) - len(normal)) + [float(len(p)) for p in normal]
    return tokens, scores, types


def write_tiny_model(
    path: str | os.PathLike, seed: int = 0, chat_template: bool = True, head_dim: int = 32, n_head: int = 2,
    n_layer: int = 2, extra_tokens: int = 0, quantized: bool = True, split_max_tensors: int = 0,
) -> str:
    """Write a tiny llama GGUF with random weights to `path`; return the path. With
    `chat_template=False` it is a base model: no template, as the default Gemma.
    `head_dim`, `n_head` (one KV head), `n_layer` and `extra_tokens` (never produced by
    the tokenizer, so only the model writes them) give unusual shapes. The matrices are
    Q8_0, as real models store most of theirs; `quantized=False` makes them F16, whose
    products ggml rounds by batch shape (identity is not kept for them). With
    `split_max_tensors`, a split model of parts named as llama.cpp names them (path's
    stem + "-00001-of-0000N.gguf"); the path of the first is returned."""
    import gguf  # the `test` extra

    tokens, scores, types = _vocabulary()
    tokens += [f"<extra_{i}>" for i in range(extra_tokens)]
    scores += [0.0] * extra_tokens
    types += [_NORMAL] * extra_tokens
    n_vocab, n_embd, n_head_kv, n_ff = len(tokens), head_dim * n_head, 1, 128
    rng = np.random.default_rng(seed)

    def weight(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale / np.sqrt(shape[-1])).astype(np.float16)

    def matrix(*shape: int, scale: float = 0.3) -> dict:
        """add_tensor's arguments for a weight matrix, in the file's type."""
        values = weight(*shape, scale=scale)
        if not quantized:
            return {"tensor": values}
        q8_0 = gguf.GGMLQuantizationType.Q8_0
        return {"tensor": gguf.quants.quantize(values.astype(np.float32), q8_0), "raw_dtype": q8_0}

    path = Path(path)
    writer = gguf.GGUFWriter(str(path), "llama", split_max_tensors=split_max_tensors)
    writer.add_name("newrllama4-tiny")
    writer.add_context_length(4096)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_eot_token_id(4)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    if chat_template:
        writer.add_chat_template(_CHAT_TEMPLATE)

    writer.add_tensor("token_embd.weight", **matrix(n_vocab, n_embd, scale=8.0))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", **matrix(n_vocab, n_embd, scale=8.0))
    for i in range(n_layer):
        blk = f"blk.{i}"
        writer.add_tensor(f"{blk}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"{blk}.attn_q.weight", **matrix(n_embd, n_embd))
        writer.add_tensor(f"{blk}.attn_k.weight", **matrix(n_head_kv * head_dim, n_embd))
        writer.add_tensor(f"{blk}.attn_v.weight", **matrix(n_head_kv * head_dim, n_embd))
        writer.add_tensor(f"{blk}.attn_output.weight", **matrix(n_embd, n_embd))
        writer.add_tensor(f"{blk}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"{blk}.ffn_gate.weight", **matrix(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_up.weight", **matrix(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_down.weight", **matrix(n_embd, n_ff))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(writer.format_shard_names(path)[0])


def call_emitting(
    context: Any, text: str, max_tokens: int = 32, temperature: float = 1.0, n_prompts: int = 32, tries: int = 100
) -> tuple[list[str], int]:
    """Prompts and a seed for which the model's answers hold `text`, found by trying seeds.

    `context.generate_parallel(prompts, max_tokens=max_tokens, temperature=temperature,
    seed=seed)` then emits `text` in at least one answer. Greedy answers of the tiny model
    rarely contain a NUL byte; sampled ones often do, since its byte tokens spell out
    arbitrary bytes, so `text="\\x00"` finds a call whose answers hold NUL.
    """
    rng = random.Random(0)
    prompts = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 12))) for _ in range(n_prompts)]
    for seed in range(tries):
        result = context.generate_parallel(prompts, max_tokens=max_tokens, temperature=temperature, seed=seed)
        if any(text in c.text for c in result):
            return prompts, seed
    raise LookupError(f"no answer held {text!r} in {tries} seeds")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# llama_cpp.server's command line, ending the server when its stdin closes: when the
# test process ends, however it ends, so that no server outlives its tests
_SERVE_UNTIL_STDIN_CLOSES = """
import os, sys, threading
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
from llama_cpp.server.__main__ import main
main()
"""


def _same_libpython_env() -> dict[str, str]:
    """This process's environment, with the directory of this Python's shared library
    first on the library path: R puts the system's lib directory there, whose libpython
    may be another release's, and a child Python would load it instead of its own."""
    env = dict(os.environ)
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            filter(None, [sysconfig.get_config_var("LIBDIR"), env.get("LD_LIBRARY_PATH")])
        )
    return env


class ModelServer:
    """llama-cpp-python's OpenAI-compatible server of one model, on 127.0.0.1, in a
    process of its own; `url` is its API root. Started on creation, ready once the
    constructor returns; `stop()` ends it (also on leaving a `with` block)."""

    def __init__(self, model_path: str | os.PathLike, port: Optional[int] = None, n_ctx: int = 512,
                 n_threads: int = 1, startup_seconds: float = 60.0):
        import httpx

        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-c", *self._command(str(model_path), n_ctx, n_threads)],
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT, env=_same_libpython_env(),
        )
        deadline = time.monotonic() + startup_seconds
        while self.process.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/models", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        self._log.seek(0)
        raise RuntimeError(f"the test server did not start:\n{self._log.read().decode(errors='replace')[-3000:]}")

    def _command(self, model_path: str, n_ctx: int, n_threads: int) -> list[str]:
        """What follows `python -c`: a program that serves until its stdin closes, and its arguments."""
        return [_SERVE_UNTIL_STDIN_CLOSES, "--model", model_path, "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", str(n_ctx), "--n_threads", str(n_threads), "--verbose", "False"]

    def stop(self) -> None:
        """End the server at once, as a crash would (safe to call twice)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "ModelServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class FileServer:
    """Files over HTTP on 127.0.0.1, in a thread, for the download paths: `url_of(name)` is
    the URL of a file added with `add(name, data)`. GETs honour `Range` (206 and
    Content-Range); `drop_after[name] = [n, ...]` makes each of the next GETs of `name` send
    its headers and the next n bytes, then close the connection (a network failing
    mid-file). `requests` records (method, path, Range header) of every request. `stop()`
    ends it (safe to call twice; also on leaving a `with` block)."""

    def __init__(self) -> None:
        import threading
        from http.server import ThreadingHTTPServer

        self.files: dict[str, bytes] = {}
        self.drop_after: dict[str, list[int]] = {}
        self.requests: list[tuple[str, str, Optional[str]]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def add(self, name: str, data: bytes) -> str:
        self.files[name] = data
        return self.url_of(name)

    def url_of(self, name: str) -> str:
        return f"{self.url}/files/{name}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FileServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def answer(self, handler: Any, path: str) -> None:
        """Answer one request for `path` (without its query string)."""
        name = path[len("/files/"):] if path.startswith("/files/") else None
        if name not in self.files:
            return self.send(handler, 404, b"not found")
        self.send_file(handler, name, self.files[name])

    def send_file(self, handler: Any, name: str, data: bytes, headers: Optional[dict[str, str]] = None) -> None:
        start = 0
        range_header = handler.headers.get("Range")
        if range_header and range_header.startswith("bytes=") and range_header.endswith("-"):
            start = int(range_header[len("bytes="):-1])
            if start >= len(data):
                return self.send(handler, 416, b"", {"Content-Range": f"bytes */{len(data)}"})
        body = data[start:]
        headers = dict(headers or {}, **{"Accept-Ranges": "bytes"})
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        drops = self.drop_after.get(name) if handler.command == "GET" else None
        drop = drops.pop(0) if drops else None
        self.send(handler, 206 if start else 200, body, headers, sent_bytes=drop)

    @staticmethod
    def send(handler: Any, status: int, body: bytes, headers: Optional[dict[str, str]] = None,
             sent_bytes: Optional[int] = None) -> None:
        handler.send_response(status)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body if sent_bytes is None else body[:sent_bytes])
        handler.close_connection = True

    def _handler_class(self) -> type:
        from http.server import BaseHTTPRequestHandler

        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append((self.command, self.path, self.headers.get("Range")))
                server.answer(self, self.path.split("?", 1)[0])

            do_HEAD = do_GET

            def log_message(self, *args: Any) -> None:  # quiet: tests read `requests` instead
                pass

        return Handler


class StandInHub(FileServer):
    """A stand-in for the Hugging Face Hub, on 127.0.0.1, for huggingface_hub pointed at it
    with HF_ENDPOINT=`url`: model repositories of files added with `add_to_repo`, each at one
    commit, answering as the Hub does where huggingface_hub reads it: file metadata on HEAD
    /{repo}/resolve/{revision}/{file} (ETag, X-Linked-Etag, X-Linked-Size, X-Repo-Commit), the
    file on GET (with Range), the file list at /api/models/{repo}/tree/{revision}, and 404s and
    401s with the X-Error-Code that names the error (RepoNotFound, EntryNotFound, GatedRepo).
    A repository in `gated` answers only requests with an Authorization header."""

    def __init__(self) -> None:
        super().__init__()
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: dict[str, str] = {}
        self.gated: set[str] = set()

    def add_to_repo(self, repo: str, name: str, data: bytes) -> None:
        import hashlib

        self.repos.setdefault(repo, {})[name] = data
        self.commits[repo] = hashlib.sha1(repo.encode()).hexdigest()

    def answer(self, handler: Any, path: str) -> None:
        import hashlib
        import json
        from urllib.parse import unquote

        path = unquote(path)
        api = path.startswith("/api/models/")
        parts = path[len("/api/models/"):].split("/", 4) if api else path.lstrip("/").split("/", 4)
        repo = "/".join(parts[:2])
        if repo not in self.repos:
            return self.send(handler, 404, b"", {"X-Error-Code": "RepoNotFound"})
        if repo in self.gated and "Authorization" not in handler.headers:
            return self.send(handler, 401, b"", {"X-Error-Code": "GatedRepo"})
        commit, files = self.commits[repo], self.repos[repo]
        if api:  # /api/models/{repo}/tree/{revision}
            listing = [{"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest(),
                        "lfs": {"size": len(data), "oid": hashlib.sha256(data).hexdigest(), "pointerSize": 134}}
                       for name, data in files.items()]
            return self.send(handler, 200, json.dumps(listing).encode(), {"Content-Type": "application/json"})
        name = parts[4] if len(parts) == 5 and parts[2] == "resolve" else None
        if name not in files:
            return self.send(handler, 404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit})
        data, sha256 = files[name], hashlib.sha256(files[name]).hexdigest()
        self.send_file(handler, f"{repo}/{name}", data, {
            "ETag": f'"{sha256}"', "X-Linked-Etag": f'"{sha256}"', "X-Linked-Size": str(len(data)),
            "X-Repo-Commit": commit,
        })


def write_ollama_model(store: str | os.PathLike, name: str, tag: str, gguf_path: str | os.PathLike) -> str:
    """Lay out a model in an Ollama store as `ollama pull` does: the GGUF as a blob named by
    its digest, beside a config blob, and a manifest (registry.ollama.ai, namespace library)
    whose layer of media type application/vnd.ollama.image.model names it. Returns the digest."""
    import hashlib
    import json
    import shutil

    store = Path(store)
    (store / "blobs").mkdir(parents=True, exist_ok=True)
    data = Path(gguf_path).read_bytes()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    shutil.copyfile(gguf_path, store / "blobs" / digest.replace(":", "-"))
    config = b'{"model_format": "gguf"}'
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    (store / "blobs" / config_digest.replace(":", "-")).write_bytes(config)
    manifest = {
        "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": config_digest,
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": len(data)}],
    }
    folder = store / "manifests" / "registry.ollama.ai" / "library" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / tag).write_text(json.dumps(manifest))
    return digest


# runs llama-server and kills it when this program's stdin closes or it is killed itself
# (SIGKILL cannot be caught, so the server is also told to die with its parent, on Linux)
_RUN_UNTIL_STDIN_CLOSES = """
import ctypes, signal, subprocess, sys
def die_with_parent():
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
server = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
sys.stdin.read()
server.kill()
server.wait()
"""


def llama_server_path() -> str:
    """The llama-server binary: the virtual environment's first (`make setup-test` links
    the one it builds from the engine's llama.cpp there), then the PATH's."""
    search = os.pathsep.join([str(Path(sys.prefix, "bin")), os.environ.get("PATH", "")])
    path = shutil.which("llama-server", path=search)
    if path is None:
        raise FileNotFoundError("no llama-server in the virtual environment's bin or on the PATH: "
                                "`make setup-test` builds it")
    return path


class LlamaCppServer(ModelServer):
    """llama.cpp's own llama-server of one model (the virtual environment's, which
    `make setup-test` builds, or else the PATH's), on 127.0.0.1, with `n_parallel`
    slots of `n_ctx` tokens each. Its KV cache is the local engine's (F16, flash
    attention: see context.py), so that its numbers differ from the engine's only by
    how the server batches. With `pooling` ("mean", "last", "none", ...) it serves
    embeddings so pooled (`--embeddings --pooling`)."""

    def __init__(self, model_path: str | os.PathLike, port: Optional[int] = None, n_ctx: int = 512,
                 n_threads: int = 1, n_parallel: int = 4, startup_seconds: float = 120.0,
                 pooling: Optional[str] = None):
        self.n_parallel = n_parallel
        self.pooling = pooling
        super().__init__(model_path, port, n_ctx, n_threads, startup_seconds)

    def _command(self, model_path: str, n_ctx: int, n_threads: int) -> list[str]:
        return [_RUN_UNTIL_STDIN_CLOSES, llama_server_path(), "--model", model_path,
                "--host", "127.0.0.1", "--port", str(self.port), "--ctx-size", str(n_ctx * self.n_parallel),
                "--parallel", str(self.n_parallel), "--threads", str(n_threads), "--threads-batch", str(n_threads),
                "--flash-attn", "on", "--cache-type-k", "f16", "--cache-type-v", "f16",
                *([] if self.pooling is None else ["--embeddings", "--pooling", self.pooling])]

    def stop(self) -> None:
        """End the server at once (safe to call twice)."""
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()
