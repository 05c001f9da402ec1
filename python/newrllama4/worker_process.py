"""What runs in a WorkerContext's worker process: a Context answering the parent's calls.

The parent (worker.py) starts this process with ggml's own tiled-matmul switch and
sends pickled requests on its stdin: first the model and the context to open, then
calls. Answers, and the progress reports of a call, go back pickled on its stdout.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
import warnings
from typing import Any, BinaryIO

from .context import Context
from .errors import IdentityWarning
from .model import Model
from .worker import send


class _Stopped(Exception):
    """The parent's progress callback raised: the worker abandons the call."""


def _serve(requests: BinaryIO, answers: BinaryIO) -> None:
    def answer(message: Any) -> None:
        if message[0] == "call":
            send(answers, ("ok", getattr(context, message[1])()))
            return
        prompts, labels, constraints, sampling, wants_progress, cache, features = message[1:]
        on_progress = relay if wants_progress else None
        try:
            result = context._generate(prompts, labels, constraints, sampling, on_progress, cache, features)
        except _Stopped:
            send(answers, ("stopped", None))
            return
        send(answers, ("ok", result))

    def relay(done: int, total: int) -> None:
        send(answers, ("progress", done, total))
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
            send(answers, ("error", error))

    _, model_args, context_args = pickle.load(requests)
    try:
        model = Model(**model_args)
        context = Context(model, **context_args)
    except Exception as error:
        send(answers, ("error", error))
        return
    send(answers, ("ok", None))
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
