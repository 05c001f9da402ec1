"""A context's KV cache size, checked against the model and the machine before llama.cpp allocates it.

llama.cpp allocates the whole KV cache when the context is created; one too large for
the machine holds gigabytes for many seconds and can end in the OOM killer, so the
estimate refuses it first.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any, Optional

import llama_cpp as llama

from ._llama import GGML_TYPE_BF16
from .errors import ContextTooLargeError, InvalidArgumentError

# Bytes per element of the cache types llama.cpp accepts for K and V: a quantised type
# stores blocks of 32 elements (bytes per block / 32). A type missing here counts as
# f32, the largest, so that the estimate errs on the side of refusing.
_KV_TYPE_BYTES = {
    llama.GGML_TYPE_F32: 4.0,
    llama.GGML_TYPE_F16: 2.0,
    GGML_TYPE_BF16: 2.0,
    llama.GGML_TYPE_Q8_0: 34 / 32,
    llama.GGML_TYPE_Q5_1: 24 / 32,
    llama.GGML_TYPE_Q5_0: 22 / 32,
    llama.GGML_TYPE_Q4_1: 20 / 32,
    llama.GGML_TYPE_Q4_0: 18 / 32,
    llama.GGML_TYPE_IQ4_NL: 18 / 32,
}
# llama.cpp rounds each stream's cell count up to a multiple of this
_CELL_PADDING = 256


def check_context_fits(model: Any, n_ctx: int, params: Any) -> None:
    """Refuse a context the model was not trained for, or whose KV cache the memory cannot hold.

    `n_ctx` is the window of one sequence; `params` are the llama_context_params about
    to be passed to llama.cpp, which say the cache's layout and types.
    """
    if n_ctx > model.n_ctx_train:
        # positions past the trained length give garbage without RoPE scaling, which the
        # engine does not set; clamping instead would move a limit the caller chose
        raise InvalidArgumentError(
            "n_ctx", n_ctx, f"at most {model.n_ctx_train}, the context length the model was trained for"
        )
    if model.n_gpu_layers != 0:
        return  # the cache goes to the GPU with the layers, whose memory is not ours to read
    needed = kv_cache_bytes(model, params)
    available = available_memory_bytes()
    if available is not None and needed > available:
        raise ContextTooLargeError(n_ctx, params.n_seq_max, needed, available)


def kv_cache_bytes(model: Any, params: Any) -> int:
    """Bytes of the KV cache llama.cpp allocates for a context with `params`.

    With `kv_unified=False` each of the `n_seq_max` sequences has a stream of its own.
    Sliding-window layers are counted at full size, as `swa_full=True` allocates them
    (an upper bound otherwise).
    """
    streams = 1 if params.kv_unified else params.n_seq_max
    cells = -(-(params.n_ctx // streams) // _CELL_PADDING) * _CELL_PADDING
    k_dim, v_dim = (n * llama.llama_model_n_head_kv(model.handle()) for n in head_sizes(model))
    per_cell = llama.llama_model_n_layer(model.handle()) * (
        k_dim * _type_bytes(params.type_k) + v_dim * _type_bytes(params.type_v)
    )
    return int(cells * streams * per_cell)


def head_sizes(model: Any) -> tuple[int, int]:
    """Elements of one attention head's key and of its value."""
    handle = model.handle()
    default_head = llama.llama_model_n_embd(handle) // max(llama.llama_model_n_head(handle), 1)
    return (
        _metadata_int(handle, "attention.key_length", default_head),
        _metadata_int(handle, "attention.value_length", default_head),
    )


def _metadata_int(handle: Any, key: str, default: int) -> int:
    """An integer of the model's GGUF metadata under its architecture, e.g. gemma3.attention.key_length."""
    buf = ctypes.create_string_buffer(128)
    if llama.llama_model_meta_val_str(handle, b"general.architecture", buf, len(buf)) < 0:
        return default
    architecture = buf.value.decode()
    if llama.llama_model_meta_val_str(handle, f"{architecture}.{key}".encode(), buf, len(buf)) < 0:
        return default
    try:
        return int(buf.value)
    except ValueError:
        return default


def _type_bytes(ggml_type: int) -> float:
    return _KV_TYPE_BYTES.get(ggml_type, _KV_TYPE_BYTES[llama.GGML_TYPE_F32])


def available_memory_bytes(
    meminfo: str = "/proc/meminfo", cgroup: str = "/sys/fs/cgroup"
) -> Optional[int]:
    """Memory the process can still take: the system's MemAvailable, capped by a cgroup limit.

    None where neither can be read (not Linux): then nothing is refused.
    """
    limits = [_meminfo_available(Path(meminfo)), _cgroup_headroom(Path(cgroup))]
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def _meminfo_available(path: Path) -> Optional[int]:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_headroom(root: Path) -> Optional[int]:
    """What a cgroup v2 memory limit leaves (memory.max minus memory.current); None without a limit."""
    try:
        limit = (root / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int((root / "memory.current").read_text()))
    except (OSError, ValueError):
        return None
