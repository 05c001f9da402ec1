"""python_takes_interrupts(): SIGINT is Python's KeyboardInterrupt within, both handlers as before after."""

import ctypes
import os
import signal
import threading

import pytest

from newrllama4 import interrupts
from newrllama4.interrupts import python_takes_interrupts

pytestmark = pytest.mark.skipif(interrupts._LIBC is None, reason="no sigaction here")


def c_handler() -> bytes:
    """The C handler's address: the first member of struct sigaction (glibc, musl, macOS)."""
    buffer = ctypes.create_string_buffer(interrupts._SIGACTION_BYTES)
    assert interrupts._LIBC.sigaction(signal.SIGINT, None, buffer) == 0
    return buffer.raw[:ctypes.sizeof(ctypes.c_void_p)]


@pytest.fixture
def restore_sigint():
    saved = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, saved)


def test_an_interrupt_within_is_keyboard_interrupt_whatever_handler_was_set(restore_sigint):
    seen = []
    signal.signal(signal.SIGINT, lambda *_: seen.append("theirs"))  # as reticulate's asks R first
    with pytest.raises(KeyboardInterrupt):
        with python_takes_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes
                pass
    assert seen == []
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):
        pass
    assert seen == ["theirs"]


def test_both_handlers_are_put_back_exactly(restore_sigint):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a C handler other than Python's own
    before = c_handler()
    with python_takes_interrupts():
        assert c_handler() != before
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert c_handler() == before
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_handlers_are_put_back_when_the_block_raises(restore_sigint):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    before = c_handler()
    with pytest.raises(ValueError):
        with python_takes_interrupts():
            raise ValueError("the call failed")
    assert c_handler() == before


def test_another_thread_leaves_the_handlers_alone(restore_sigint):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    before = c_handler()
    during = []

    def in_thread():
        with python_takes_interrupts():
            during.append(c_handler())

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert during == [before]
