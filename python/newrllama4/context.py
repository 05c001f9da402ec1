"""A llama.cpp context: KV cache, token batch and the lock that serialises its callers."""

from __future__ import annotations

import functools
from typing import Any, Optional

import llama_cpp as llama

from . import call_driver
from ._llama import TokenBatch, ggml_forces_tiled_matmul, identity_guaranteed, llama_errors, set_fields
from .attention import TILE, batch_capacity
from .call_driver import CallDriver, Progress, windows
from .constraints import Constraint
from .context_settings import ContextSettings
from .engine import StepLoop
from .errors import ClosedError, ContextError, InvalidArgumentError
from .features import FeatureRequest, HiddenStates
from .field_probs import run_rounds, writing
from .generation import Generator, OneCallAtATime
from .labels import Labels
from .memory import check_context_fits, head_sizes
from .model import Model
from .prefix_cache import PrefixCache
from .result_cache import CachedCall, ModelFile
from .results import ParallelResult
from .sampling import SamplingParams
from .scheduler import Scheduler
from .worker import WorkerContext

# The KV cache is llama.cpp's default, F16, whose tiled flash-attention kernel prefills
# fastest. Batch invariance holds the kernel each token gets fixed by the batch
# discipline of attention.py, not by the cache type.
KV_CACHE_TYPE, KV_CACHE_NAME = llama.GGML_TYPE_F16, "f16/f16"


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
    in a worker process with ggml's own settings: `Context(...)` then makes a
    worker.WorkerContext, which takes the same calls (`worker_pid` names its process).

    With `prefix_cache` (the default), prompts that share a prefix of at least 16
    tokens, in one call or across calls, have it decoded once: its KV cells are
    snapshotted into host memory (at most `prefix_cache_mb`, least recently used
    dropped first) and restored for the others, with outputs identical to decoding it
    afresh. `clear_cache()` empties it.
    """

    def __new__(cls, model: Model, *args: Any, **kwargs: Any) -> Any:
        # the one place that decides where a context runs
        if not isinstance(model, Model):
            raise InvalidArgumentError("model", model, "a newrllama4.Model")
        if cls is Context:
            settings = ContextSettings(*args, **kwargs)
            if not settings.batch_invariant and ggml_forces_tiled_matmul():
                # the fast lane's kernels need the ggml settings this process gave up for identity
                return WorkerContext(model, settings)
        return super().__new__(cls)

    def __init__(
        self,
        model: Model,
        n_ctx: int = ContextSettings.n_ctx,
        n_seq_max: int = ContextSettings.n_seq_max,
        n_batch: int = ContextSettings.n_batch,
        n_threads: Optional[int] = ContextSettings.n_threads,
        batch_invariant: bool = ContextSettings.batch_invariant,
        prefix_cache: bool = ContextSettings.prefix_cache,
        prefix_cache_mb: float = ContextSettings.prefix_cache_mb,
    ):
        settings = ContextSettings(n_ctx, n_seq_max, n_batch, n_threads, batch_invariant, prefix_cache,
                                   prefix_cache_mb)
        self.model = model
        self.n_ctx, self.n_seq_max, self.n_batch = settings.n_ctx, settings.n_seq_max, settings.n_batch
        self.n_threads, self.batch_invariant = settings.n_threads, settings.batch_invariant
        self._handle: Any = None
        self._calls = OneCallAtATime()
        # the fast lane's decode steps of one row run fastest on repacked weights (their
        # kernels skip the tiled matmul); batches of several sequences, on ggml's tiled matmul
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
        self._params, self._repacked = params, repacked
        self._handle = self._llama_context()
        self._states: Optional[HiddenStates] = None
        self._batch = TokenBatch(capacity)
        self._prefix_cache = (
            PrefixCache(int(settings.prefix_cache_mb * 2**20), llama.llama_model_n_swa(model.handle()))
            if settings.prefix_cache else None
        )
        model.register_context(self)

    def _llama_context(self) -> Any:
        with llama_errors() as errors:
            handle = llama.llama_init_from_model(self.model.handle(repacked=self._repacked), self._params)
        if not handle:
            raise ContextError(self._failure(errors))
        return handle

    def _hidden_states(self) -> HiddenStates:
        """The hidden states of the context's decodes (features.py). The first call that
        wants them remakes the llama.cpp context with the eval callback that reads them,
        which a decode then pays for whether it keeps states or not (a Python call for
        each node of the graph); a context whose calls never want them never pays."""
        if self._states is None:
            states = HiddenStates(self.model.n_embd)
            states.install(self._params)
            handle = self._llama_context()
            llama.llama_free(self._handle)
            self._handle, self._states = handle, states
        return self._states

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
        return self._handle is None

    @property
    def worker_pid(self) -> None:
        """None: this context runs in this process (see worker.WorkerContext)."""
        return None

    def close(self) -> None:
        """Free the context; waits for a running call to finish. Safe to call twice."""
        with self._calls.closing():
            if self._handle is not None:
                if self._prefix_cache is not None:
                    self._prefix_cache.clear()
                self._batch.free()
                llama.llama_free(self._handle)
                self._handle = None

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None and not self.model.closed:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else (
            f"n_ctx={self.n_ctx} per sequence, n_seq_max={self.n_seq_max}, n_threads={self.n_threads}"
        )
        return f"<newrllama4.Context {state}>"

    def cached_tokens(self) -> int:
        """How many tokens the KV cache holds over all slots: 0 whenever no call runs."""
        with self._calls.lock:
            memory = llama.llama_get_memory(self._live_handle())
            return sum(
                llama.llama_memory_seq_pos_max(memory, slot) + 1 for slot in range(self.n_seq_max)
            )

    def clear_cache(self) -> None:
        """Empty the prefix cache: later calls decode every prompt prefix afresh."""
        with self._calls.lock:
            if self._prefix_cache is not None:
                self._prefix_cache.clear()

    def _live_handle(self) -> Any:
        if self._handle is None or self.model.closed:
            raise ClosedError("context")
        return self._handle

    # -- generation -----------------------------------------------------------------

    def _vocabulary(self) -> Model:
        return self.model

    def _generate(self, prompts: list[Any], labels: list[Optional[Labels]],
                  constraints: list[Optional[Constraint]], sampling: SamplingParams,
                  on_progress: Progress, cache: Optional[str],
                  features: Optional[FeatureRequest] = None) -> ParallelResult:
        with self._calls.call():
            self._live_handle()
            if features is not None:
                self._hidden_states()
            handle = self._handle
            # what decides answers beside the model, the prompt and the arguments: llama.cpp's
            # kernels, and whether prompts of different lengths share a batch
            # (the KV cache types follow from these and the model file, which the key names by its hash)
            setup = {"llama_cpp": llama.__version__, "batch_invariant": self.batch_invariant}
            result_cache = None if cache is None else CachedCall(
                cache, ModelFile(self.model.path), setup, sampling, labels, constraints, self.n_ctx, features
            )
            with CallDriver(len(prompts), on_progress, result_cache) as driver:
                if any(c is not None and c.fields is not None for c in constraints):
                    result = run_rounds(
                        functools.partial(self._step_loop, handle), driver, prompts, labels, constraints, sampling,
                        self.model.prompt_tokens,
                        lambda text: writing(text, lambda t: self.model.tokenize(t, add_special=False),
                                             self.model.token_piece),
                        call_driver.ROUND_WINDOW * self.n_seq_max,
                    )
                else:
                    result = self._step_loop(handle, prompts, labels, constraints, sampling, driver=driver,
                                             features=features)
            result.stats.batch_invariant = self.batch_invariant
            result.stats.kv_cache = KV_CACHE_NAME
            result.stats.identity_guaranteed = self.batch_invariant and identity_guaranteed()
            return result

    def _step_loop(self, handle: Any, prompts: list[Any], labels: list[Optional[Labels]],
                   constraints: list[Optional[Constraint]], sampling: SamplingParams, generators: Any = None,
                   to_continue: bool = False, continuing: bool = False,
                   driver: Optional[CallDriver] = None, features: Optional[FeatureRequest] = None) -> ParallelResult:
        """The prompts through one step loop, a window at a time (call_driver.WINDOW_PER_SLOT
        per slot), each window looked up in the result cache as it starts; without a `driver`
        (a round of field_probs' calls), with no result cache and no progress of their own."""
        driver = CallDriver(len(prompts)) if driver is None else driver
        scheduler = Scheduler(self.n_seq_max, self.n_batch, separate_phases=self.batch_invariant)
        loop = StepLoop(self.model, handle, self._batch, scheduler, self.n_ctx, sampling, self._prefix_cache,
                        self.batch_invariant, driver.finish, to_continue, continuing, self._states)
        for window in windows(range(len(prompts)), call_driver.WINDOW_PER_SLOT * self.n_seq_max):
            tokens = {i: self.model.prompt_tokens(prompts[i]) for i in window}
            loop.run(driver.look_up(window, lambda i: tokens[i] or None), tokens, labels, constraints, generators,
                     features)
        if self._prefix_cache is not None:
            loop.stats.prefix_cache_bytes = self._prefix_cache.nbytes
            loop.stats.prefix_cache_snapshots = len(self._prefix_cache)
        return driver.result(loop.stats)
