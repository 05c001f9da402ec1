"""A llama.cpp context: KV cache, token batch and the lock that serialises its callers."""

from __future__ import annotations

import os
import threading
from typing import Any, Optional

import llama_cpp as llama

from ._llama import TokenBatch, ggml_forces_tiled_matmul, identity_guaranteed, llama_errors, set_fields
from .choices import Labels
from .checks import check_bool, check_int, check_real
from .constraints import Constraint
from .engine import StepLoop
from .errors import ClosedError, ContextError, InvalidArgumentError
from .generation import Generator, Progress
from .attention import TILE, batch_capacity
from .memory import check_context_fits, head_sizes
from .model import Model
from .prefix_cache import PrefixCache
from .result_cache import CachedCall, ModelFile
from .results import ParallelResult
from .sampling import SamplingParams
from .scheduler import Scheduler
from .worker import ContextWorker

# The KV cache is llama.cpp's default, F16, whose tiled flash-attention kernel prefills
# fastest. Batch invariance holds the kernel each token gets fixed by the batch
# discipline of attention.py, not by the cache type.
KV_CACHE_TYPE, KV_CACHE_NAME = llama.GGML_TYPE_F16, "f16/f16"


def _default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Context(Generator):
    """Runs prompts against a model, up to `n_seq_max` at once.

    `n_ctx` is the context window of each sequence (prompt plus generated tokens);
    the KV cache holds `n_ctx` cells for each of the `n_seq_max` sequences (and TILE
    more, batch-invariant, for attention.throwaway_rows).
    `batch_invariant=True` (the default) makes every output independent of the other
    prompts in the call and of `n_seq_max`: each token gets the attention kernel its
    own sequence decides (attention.py), which restores a shared prefix only as far as
    its tokens took the kernels the prompt gives them and adds throwaway rows to keep
    tokens on their kernels in few passes;
    `False` trades that for throughput: prompt chunks of any length packed with
    generation tokens into one batch; with `n_seq_max=1` on the model's repacked copy of
    the weights (`Model.handle(repacked=True)`, llama.cpp's fastest CPU kernels for one
    row at a time); and, where this process forces ggml's tiled matmul for identity,
    in a worker process with ggml's own settings (worker.py; `worker_pid` names it).

    With `prefix_cache` (the default), prompts that share a prefix of at least 16
    tokens, in one call or across calls, have it decoded once: its KV cells are
    snapshotted into host memory (at most `prefix_cache_mb`, least recently used
    dropped first) and restored for the others, with outputs identical to decoding it
    afresh. `clear_cache()` empties it.
    """

    def __init__(
        self,
        model: Model,
        n_ctx: int = 4096,
        n_seq_max: int = 8,
        n_batch: int = 512,
        n_threads: Optional[int] = None,
        batch_invariant: bool = True,
        prefix_cache: bool = True,
        prefix_cache_mb: float = 512,
    ):
        if not isinstance(model, Model):
            raise InvalidArgumentError("model", model, "a newrllama4.Model")
        self.n_ctx = check_int("n_ctx", n_ctx, minimum=1)
        self.n_seq_max = check_int("n_seq_max", n_seq_max, minimum=1, maximum=256)
        self.n_batch = check_int("n_batch", n_batch, minimum=self.n_seq_max)
        self.n_threads = _default_threads() if n_threads is None else check_int("n_threads", n_threads, minimum=1)
        self.batch_invariant = check_bool("batch_invariant", batch_invariant)
        prefix_cache = check_bool("prefix_cache", prefix_cache)
        prefix_cache_mb = check_real("prefix_cache_mb", prefix_cache_mb, 0.0)
        self.model = model
        self._handle: Any = None
        self._worker: Optional[ContextWorker] = None
        self._lock = threading.RLock()
        self._running = False
        if not self.batch_invariant and ggml_forces_tiled_matmul():
            # the fast lane's kernels need the ggml settings this process gave up for identity
            self._worker = ContextWorker(model, {
                "n_ctx": self.n_ctx, "n_seq_max": self.n_seq_max, "n_batch": self.n_batch,
                "n_threads": self.n_threads, "batch_invariant": False, "prefix_cache": prefix_cache,
                "prefix_cache_mb": prefix_cache_mb,
            })
            model.register_context(self)
            return
        # the fast lane's decode steps of one row run fastest on repacked weights (bench_prefill:
        # 0.91-0.94x of llama.cpp's decode against 0.82x); batches of several sequences on
        # ggml's tiled matmul (bench_parallel at 32: 3-5% faster; prefill 5-8% faster)
        repacked = not self.batch_invariant and self.n_seq_max == 1
        # a batch-invariant batch holds a tile at least and the throwaway rows of
        # attention.throwaway_rows, fewer than a tile past a sequence's window
        capacity = batch_capacity(self.n_batch, self.n_seq_max) if self.batch_invariant else self.n_batch
        cells = self.n_ctx + TILE if self.batch_invariant else self.n_ctx

        params = set_fields(
            llama.llama_context_default_params(),
            n_ctx=cells * self.n_seq_max,
            n_batch=capacity,
            n_ubatch=capacity,
            n_seq_max=self.n_seq_max,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,
            kv_unified=False,
            # a sliding-window cache sized to the window recycles cells at offsets that
            # depend on how the prompt was chunked; full size keeps offsets fixed
            swa_full=True,
            flash_attn_type=llama.LLAMA_FLASH_ATTN_TYPE_ENABLED,
            type_k=KV_CACHE_TYPE,
            type_v=KV_CACHE_TYPE,
            no_perf=True,
        )
        check_context_fits(model, self.n_ctx, params)
        with llama_errors() as errors:
            handle = llama.llama_init_from_model(model.handle(repacked=repacked), params)
        if not handle:
            raise ContextError(self._failure(errors))
        self._handle = handle
        self._batch = TokenBatch(capacity)
        self._prefix_cache = (
            PrefixCache(int(prefix_cache_mb * 2**20), llama.llama_model_n_swa(model.handle()))
            if prefix_cache else None
        )
        model.register_context(self)

    def _failure(self, errors: list[str]) -> str:
        """Why llama.cpp made no context, as far as its log says; 'smaller' only for a size problem."""
        said = " ".join(line for line in errors if line)
        what = (
            f"llama.cpp could not create a context with n_ctx={self.n_ctx} for each of {self.n_seq_max} "
            f"sequences (KV cache {KV_CACHE_NAME}, head sizes "
            f"{'/'.join(map(str, head_sizes(self.model)))})"
        )
        if "alloc" in said.lower():
            return f"{what}: it could not allocate the memory; try smaller values. llama.cpp said: {said}"
        return f"{what}. llama.cpp said: {said or 'nothing'}"

    # -- lifetime -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._handle is None if self._worker is None else self._worker.closed

    @property
    def worker_pid(self) -> Optional[int]:
        """The process id of the worker this context runs in (worker.py), None if it runs here."""
        return None if self._worker is None else self._worker.pid

    def close(self) -> None:
        """Free the context; waits for a running call to finish. Safe to call twice."""
        with self._lock:
            if self._running:
                raise ContextError("A context cannot be closed from inside its own generate_parallel() call.")
            if self._worker is not None:
                self._worker.close()
            if self._handle is not None:
                if self._prefix_cache is not None:
                    self._prefix_cache.clear()
                self._batch.free()
                llama.llama_free(self._handle)
                self._handle = None

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # a worker ends with its ContextWorker (its own __del__)
        if getattr(self, "_handle", None) is not None and not self.model.closed:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else (
            f"n_ctx={self.n_ctx} per sequence, n_seq_max={self.n_seq_max}, n_threads={self.n_threads}"
            + ("" if self._worker is None else f", in worker process {self._worker.pid}")
        )
        return f"<newrllama4.Context {state}>"

    def cached_tokens(self) -> int:
        """How many tokens the KV cache holds over all slots: 0 whenever no call runs."""
        with self._lock:
            if self._worker is not None:
                return self._worker.call("cached_tokens")
            memory = llama.llama_get_memory(self._live_handle())
            return sum(
                llama.llama_memory_seq_pos_max(memory, slot) + 1 for slot in range(self.n_seq_max)
            )

    def clear_cache(self) -> None:
        """Empty the prefix cache: later calls decode every prompt prefix afresh."""
        with self._lock:
            if self._worker is not None:
                self._worker.call("clear_cache")
            elif self._prefix_cache is not None:
                self._prefix_cache.clear()

    def _live_handle(self) -> Any:
        if self._handle is None or self.model.closed:
            raise ClosedError("context")
        return self._handle

    # -- generation -----------------------------------------------------------------

    def _vocabulary(self) -> Model:
        return self.model

    def _generate(self, prompts: list[Any], label_sets: list[Optional[Labels]],
                  constraints: list[Optional[Constraint]], sampling: SamplingParams,
                  on_progress: Progress, cache: Optional[str]) -> ParallelResult:
        with self._lock:
            if self._running:
                # the lock is re-entrant (close() and cached_tokens() may run from a callback),
                # but a nested call would reuse the batch and clear the cache under the outer one
                raise ContextError("generate_parallel() was called from inside its own on_progress callback.")
            if self._worker is not None:
                self._running = True
                try:
                    return self._worker.generate(prompts, label_sets, constraints, sampling, on_progress, cache)
                finally:
                    self._running = False
            handle = self._live_handle()
            scheduler = Scheduler(self.n_seq_max, self.n_batch, separate_phases=self.batch_invariant)
            # what decides answers beside the model, the prompt and the arguments: llama.cpp's
            # kernels, and whether prompts of different lengths share a batch
            # (the KV cache types follow from these and the model file, which the key names by its hash)
            setup = {"llama_cpp": llama.__version__, "batch_invariant": self.batch_invariant}
            result_cache = None if cache is None else CachedCall(
                cache, ModelFile(self.model.path), setup, sampling, label_sets, constraints, self.n_ctx
            )
            loop = StepLoop(
                self.model, handle, self._batch, scheduler, self.n_ctx, sampling, on_progress, self._prefix_cache,
                result_cache, self.batch_invariant,
            )
            self._running = True
            try:
                result = loop.run(prompts, label_sets, constraints)
                result.stats.batch_invariant = self.batch_invariant
                result.stats.kv_cache = KV_CACHE_NAME
                result.stats.identity_guaranteed = self.batch_invariant and identity_guaranteed()
                return result
            finally:
                self._running = False
                if result_cache is not None:
                    result_cache.close()

