"""Interrupts that stay in Python while an engine call from R runs.

reticulate (before 1.36) answers SIGINT with a C handler that marks the interrupt
pending for R as well as for Python, and with a Python handler that asks R, by running
R code, whether it is still pending. R checks pending interrupts while it evaluates and
then unwinds its own stack with a long jump, straight through the Python frames below
it: the interpreter is left corrupt, and the R process crashes later (reticulate issue
1601). Whether the check lands inside that handler is a matter of timing.

While an engine call runs, Python alone takes SIGINT: the C handler is Python's, the
Python handler raises KeyboardInterrupt, and R learns of the interrupt only from the
call's exception (the R package turns it into an R interrupt). Both handlers are put
back afterwards exactly as they were, reticulate's C handler included, which Python's
signal module cannot restore by itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import threading
from typing import Iterator, Optional

# larger than struct sigaction on every Unix: it is saved and restored, never read
_SIGACTION_BYTES = 1024


def _libc() -> Optional[ctypes.CDLL]:
    if os.name == "nt":  # reticulate takes Ctrl-C by a console handler there, not a signal
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


@contextlib.contextmanager
def python_takes_interrupts() -> Iterator[None]:
    """Within the block, SIGINT raises KeyboardInterrupt in Python and touches nothing else."""
    if _LIBC is None or threading.current_thread() is not threading.main_thread():
        yield  # only the main thread can take signals in Python
        return
    c_handler = ctypes.create_string_buffer(_SIGACTION_BYTES)
    if _LIBC.sigaction(signal.SIGINT, None, c_handler) != 0:
        yield
        return
    python_handler = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if python_handler is not None:  # None: not set from Python, nothing to put back
            signal.signal(signal.SIGINT, python_handler)
        _LIBC.sigaction(signal.SIGINT, c_handler, None)
