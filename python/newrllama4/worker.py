"""WorkerContext: a context in a Python process of its own, for the ggml settings this process gave up.

ggml reads its tiled-matmul switches once per process (_llama.GGML_SETTINGS). This
process forces the tiled matmul for every batch, which batch invariance needs and which
is slower than ggml's own choice for a batch of a row or two: Gemma's Q6_K matrices,
which ggml does not repack on x86, take it even on the repacked copy of the weights.
The fast lane (`batch_invariant=False`) promises llama.cpp's fastest kernels, so where
this process forces the matmul, `Context(...)` makes a WorkerContext instead: a worker,
a Python process started with ggml's own switch (worker_process.py), holds the model
and a Context there and answers this process's calls over its stdin and stdout.

Prompts, arguments and results cross as pickles. The progress callback stays in the
parent: after each report the worker waits for the callback to return, so a callback
that raises stops the call where it would have stopped in-process, and one that asks
the context something (`cached_tokens()`) is answered in between. A worker that dies
fails the call it was in with a ContextError; the next call starts a new one.

The worker is a subprocess with pickles over its pipes rather than a multiprocessing
"spawn" process with a Connection: a spawned child imports the parent's `__main__`
script again (its unguarded top-level code would run twice), multiprocessing offers no
environment for the child, so ggml's switch would have to be set in this process's own
environment around the start, and its interpreter is `sys.executable`, which is R's
binary where Python is embedded in R. A subprocess gets its environment and its
interpreter (`python_executable()`) explicitly, and pickle frames the messages.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
from typing import Any, BinaryIO, Optional

from ._llama import ggml_defaults_environment
from .constraints import Constraint
from .context_settings import ContextSettings
from .errors import ClosedError, ContextError
from .call_driver import Progress
from .generation import Generator, OneCallAtATime
from .labels import Labels
from .model import Model
from .results import ParallelResult
from .sampling import SamplingParams

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def send(stream: BinaryIO, message: Any) -> None:
    """Write one message, pickled, to the other process (either side)."""
    try:
        data = pickle.dumps(message)
    except Exception as error:  # an answer holding something pickle refuses: say what, not crash
        data = pickle.dumps(("error", ContextError(f"The worker process could not send its answer back: {error!r}")))
    stream.write(data)
    stream.flush()


def python_executable() -> str:
    """The Python of this process (under reticulate, sys.executable is that Python too)."""
    if sys.executable and os.path.basename(sys.executable).lower().startswith("python"):
        return sys.executable
    # embedded where sys.executable is the host program: the interpreter of this prefix
    return os.path.join(sys.exec_prefix, "python.exe") if os.name == "nt" else \
        os.path.join(sys.exec_prefix, "bin", "python3")


class WorkerContext(Generator):
    """A fast-lane Context on `model`'s file in a worker process with ggml's own settings;
    made by `Context(...)` (see Context for what it does), it takes the same calls."""

    def __init__(self, model: Model, settings: ContextSettings):
        model.handle()  # ClosedError for a closed model, as Context raises
        self.model = model
        self.n_ctx, self.n_seq_max, self.n_batch = settings.n_ctx, settings.n_seq_max, settings.n_batch
        self.n_threads, self.batch_invariant = settings.n_threads, settings.batch_invariant
        self._model_args = {"path": model.path, "n_gpu_layers": model.n_gpu_layers, "use_mmap": model.use_mmap}
        self._settings = settings
        self._process: Optional[subprocess.Popen] = None
        self._log: Optional[BinaryIO] = None
        self._closed = False
        # one exchange at a time; the progress callback may ask the worker between reports
        self._calls = OneCallAtATime()
        self._start()
        model.register_context(self)

    # -- lifetime -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def worker_pid(self) -> Optional[int]:
        """The process id of the worker this context runs in; None between a worker that
        died and the call that starts the next."""
        return None if self._process is None else self._process.pid

    def close(self) -> None:
        """End the worker, freeing its context and model; waits for a running call to
        finish. Safe to call twice."""
        with self._calls.closing():
            self._closed = True
            self._stop()

    def __del__(self) -> None:
        if getattr(self, "_process", None) is not None:
            self._stop(at_once=True)

    def __repr__(self) -> str:
        state = "closed" if self.closed else (
            f"n_ctx={self.n_ctx} per sequence, n_seq_max={self.n_seq_max}, n_threads={self.n_threads}, "
            f"in worker process {self.worker_pid}"
        )
        return f"<newrllama4.Context {state}>"

    def cached_tokens(self) -> int:
        """How many tokens the worker's KV cache holds over all slots: 0 whenever no call runs."""
        return self._run(("call", "cached_tokens"), None)

    def clear_cache(self) -> None:
        """Empty the worker's prefix cache: later calls decode every prompt prefix afresh."""
        self._run(("call", "clear_cache"), None)

    # -- generation -----------------------------------------------------------------

    def _vocabulary(self) -> Model:
        return self.model

    def _generate(self, prompts: list[Any], labels: list[Optional[Labels]],
                  constraints: list[Optional[Constraint]], sampling: SamplingParams,
                  on_progress: Progress, cache: Optional[str], features: Any = None) -> ParallelResult:
        message = ("generate", prompts, labels, constraints, sampling, on_progress is not None, cache, features)
        with self._calls.call():
            return self._run(message, on_progress)

    # -- the worker -----------------------------------------------------------------

    def _start(self) -> None:
        # the worker imports this very package, wherever this process found it (a source
        # checkout first; where it is installed, its directory is on the path already)
        start = (f"import sys; {_PACKAGE_DIR!r} in sys.path or sys.path.insert(0, {_PACKAGE_DIR!r}); "
                 "from newrllama4.worker_process import main; main()")
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [python_executable(), "-c", start],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=ggml_defaults_environment(),
        )
        try:
            self._exchange(("open", self._model_args, dataclasses.asdict(self._settings)), None)
        except BaseException:
            self._stop(at_once=True)
            raise

    def _run(self, message: tuple, on_progress: Progress) -> Any:
        with self._calls.lock:
            if self._closed:
                raise ClosedError("context")
            if self._process is None:  # the last one died
                self._start()
            return self._exchange(message, on_progress)

    def _exchange(self, message: tuple, on_progress: Any) -> Any:
        """Send one request and serve the worker's progress reports until its answer."""
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
            send(process.stdin, message)
            while True:
                kind, *body = pickle.load(process.stdout)
                if kind != "progress":
                    break
                try:
                    on_progress(*body)
                except BaseException as error:  # the callback's own, raised below once the worker stopped
                    send(process.stdin, "stop")
                    pickle.load(process.stdout)  # its "stopped"
                    kind, body = "error", [error]
                    break
                send(process.stdin, "go")
        except (EOFError, OSError, pickle.UnpicklingError):
            said = self._said()
            self._stop(at_once=True)
            raise ContextError(f"The fast lane's worker process ended unexpectedly. It said: {said or 'nothing'}") \
                from None
        except BaseException:  # an interrupt mid-exchange: the pipe is out of step, the call abandoned
            self._stop(at_once=True)
            raise
        if kind == "error":
            raise body[0]
        return body[0]

    def _said(self) -> str:
        """The end of what the worker wrote to stderr."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", errors="replace").strip()[-2000:]

    def _stop(self, at_once: bool = False) -> None:
        """End the worker: `at_once` (killed) when it may be mid-call, else once it has
        freed its model (it exits when its stdin closes)."""
        process, self._process = self._process, None
        if process is not None:
            if at_once:
                process.kill()
            for stream in (process.stdin, process.stdout):
                try:
                    stream.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

