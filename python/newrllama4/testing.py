"""Test helpers: a tiny random-weight llama model, and an OpenAI-compatible server of it.

The model (needs the `gguf` package: the `test` extra) is a real GGUF that llama.cpp
loads and runs in milliseconds, with a SentencePiece-style vocabulary that has byte
fallback, so text outside the vocabulary (accents, CJK, emoji) is spelt out in byte
tokens that split UTF-8 characters. The server is llama-cpp-python's (its `server`
extra, which the `test` extra installs).
"""

from __future__ import annotations

import os
import random
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
    n_layer: int = 2, extra_tokens: int = 0, quantized: bool = False,
) -> str:
    """Write a tiny llama GGUF with random weights to `path`; return the path. With
    `chat_template=False` it is a base model: no template, as the default Gemma.
    `head_dim`, `n_head` (one KV head), `n_layer` and `extra_tokens` (never produced by
    the tokenizer, so only the model writes them) give unusual shapes. `quantized` stores
    the matrices as Q8_0, as real models store most of theirs, instead of F16."""
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
    writer = gguf.GGUFWriter(str(path), "llama")
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
    return str(path)


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
            [sys.executable, "-c", _SERVE_UNTIL_STDIN_CLOSES, "--model", str(model_path), "--host", "127.0.0.1",
             "--port", str(self.port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads), "--verbose", "False"],
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

    def stop(self) -> None:
        """End the server at once, as a crash would (safe to call twice)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "ModelServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
