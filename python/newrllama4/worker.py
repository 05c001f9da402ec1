"""A context in a Python process of its own, for the ggml settings this process gave up.

ggml reads its tiled-matmul switches once per process (_llama.GGML_SETTINGS). This
process forces the tiled matmul for every batch, which batch invariance needs and which
is slower than ggml's own choice for a batch of a row or two: Gemma's Q6_K matrices,
which ggml does not repack on x86, take it even on the repacked copy of the weights.
The fast lane (`batch_invariant=False`) promises llama.cpp's fastest kernels, so where
this process forces the matmul, its context runs in a worker: a Python process started
with ggml's own switch, holding the model and a Context there, which answers the
parent's calls over its stdin and stdout.

Prompts, arguments and results cross as pickles. The progress callback stays in the
parent: after each report the worker waits for the callback to return, so a callback
that raises stops the call where it would have stopped in-process, and one that asks
the context something (`cached_tokens()`) is answered in between. A worker that dies
fails the call it was in with a ContextError; the next call starts a new one.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, BinaryIO, Optional

from ._llama import ggml_defaults_environment
from .errors import ClosedError, ContextError, IdentityWarning

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Stopped(Exception):
    """The parent's progress callback raised: the worker abandons the call."""


def _send(stream: BinaryIO, message: Any) -> None:
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


class ContextWorker:
    """A Context(**context_args) on `model`'s file in a worker process with ggml's own settings."""

    def __init__(self, model: Any, context_args: dict[str, Any]):
        self._model_args = {"path": model.path, "n_gpu_layers": model.n_gpu_layers, "use_mmap": model.use_mmap}
        self._context_args = context_args
        self._process: Optional[subprocess.Popen] = None
        self._log: Optional[BinaryIO] = None
        self._closed = False
        self._lock = threading.RLock()  # one exchange at a time; re-entrant for the progress callback
        self._start()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pid(self) -> Optional[int]:
        return None if self._process is None else self._process.pid

    def _start(self) -> None:
        # the worker imports this very package, wherever this process found it (a source
        # checkout first; where it is installed, its directory is on the path already)
        start = (f"import sys; {_PACKAGE_DIR!r} in sys.path or sys.path.insert(0, {_PACKAGE_DIR!r}); "
                 "from newrllama4.worker import main; main()")
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [python_executable(), "-c", start],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=ggml_defaults_environment(),
        )
        try:
            self._exchange(("open", self._model_args, self._context_args), None)
        except BaseException:
            self._stop(at_once=True)
            raise

    def call(self, method: str) -> Any:
        """The worker's Context.method() (one without arguments)."""
        return self._run(("call", method), None)

    def generate(self, prompts: list[Any], label_sets: list[Any], constraints: list[Any], sampling: Any,
                 on_progress: Any, cache: Optional[str]) -> Any:
        """The worker's Context._generate() with these arguments."""
        message = ("generate", prompts, label_sets, constraints, sampling, on_progress is not None, cache)
        return self._run(message, on_progress)

    def _run(self, message: tuple, on_progress: Any) -> Any:
        with self._lock:
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
            _send(process.stdin, message)
            while True:
                kind, *body = pickle.load(process.stdout)
                if kind != "progress":
                    break
                try:
                    on_progress(*body)
                except BaseException as error:  # the callback's own, raised below once the worker stopped
                    _send(process.stdin, "stop")
                    pickle.load(process.stdout)  # its "stopped"
                    kind, body = "error", [error]
                    break
                _send(process.stdin, "go")
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

    def close(self) -> None:
        """End the worker, freeing its context and model. Safe to call twice."""
        with self._lock:
            self._closed = True
            self._stop()

    def __del__(self) -> None:
        if getattr(self, "_process", None) is not None:
            self._stop(at_once=True)


# -- the worker process ---------------------------------------------------------


def _serve(requests: BinaryIO, answers: BinaryIO) -> None:
    from .context import Context
    from .model import Model

    def answer(message: Any) -> None:
        if message[0] == "call":
            _send(answers, ("ok", getattr(context, message[1])()))
            return
        prompts, label_sets, constraints, sampling, wants_progress, cache = message[1:]
        on_progress = relay if wants_progress else None
        try:
            result = context._generate(prompts, label_sets, constraints, sampling, on_progress, cache)
        except _Stopped:
            _send(answers, ("stopped", None))
            return
        _send(answers, ("ok", result))

    def relay(done: int, total: int) -> None:
        _send(answers, ("progress", done, total))
        while True:
            message = pickle.load(requests)
            if message == "go":
                return
            if message == "stop":
                raise _Stopped
            answer_or_error(message)  # the callback asked the context something

    def answer_or_error(message: Any) -> None:
        try:
            answer(message)
        except Exception as error:
            _send(answers, ("error", error))

    _, model_args, context_args = pickle.load(requests)
    try:
        model = Model(**model_args)
        context = Context(model, **context_args)
    except Exception as error:
        _send(answers, ("error", error))
        return
    _send(answers, ("ok", None))
    while True:
        try:
            message = pickle.load(requests)
        except EOFError:  # the parent closed the context, or ended
            break
        answer_or_error(message)
    model.close()


def _end_with_parent(parent: int) -> None:
    """Exit once the parent is gone (killed, crashed): mid-call the worker reads no request
    that would tell it, and would run the rest of the call for no one."""
    while os.getppid() == parent:  # an orphan gets another parent
        time.sleep(1)
    os._exit(1)


def main() -> None:
    # the answers have this process's stdout to themselves: whatever else writes there
    # (llama.cpp's C code, a print) goes to stderr, which the parent keeps for errors
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # an interrupt is the parent's to handle (a Ctrl-C in a terminal reaches both processes)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), daemon=True).start()
    # this process gave identity up on purpose: the fast lane never claims it
    warnings.simplefilter("ignore", IdentityWarning)
    _serve(sys.stdin.buffer, answers)

