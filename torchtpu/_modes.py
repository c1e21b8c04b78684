"""Execution modes: debug (synchronous), strict (asynchronous, op by op) and
fused (ops recorded and compiled together at flush points).

The process default comes from ``TORCHTPU_MODE`` (strict when unset);
``set_mode`` changes it, ``mode(...)`` changes it for a ``with`` block on the
current thread.
"""
import contextlib

from torchtpu import _C

MODES = ("debug", "strict", "fused")


def get_mode() -> str:
    """The mode of the calling thread."""
    return _C._get_mode()


def set_mode(name: str) -> None:
    """Sets the process-wide default mode (threads without their own)."""
    if name not in MODES:
        raise ValueError(f"unknown mode {name!r}: expected one of {MODES}")
    _C._init()
    _C._set_mode(name, False)


@contextlib.contextmanager
def mode(name: str):
    """Runs the block in `name` mode on this thread; flushes recorded work on
    exit so that the block's results are launched in the mode it chose."""
    if name not in MODES:
        raise ValueError(f"unknown mode {name!r}: expected one of {MODES}")
    _C._init()
    previous = _C._thread_mode()
    _C._set_mode(name, True)
    try:
        yield
    finally:
        _C._flush(-1)
        _C._restore_thread_mode(previous)
