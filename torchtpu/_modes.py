"""Execution modes: debug (synchronous), strict (asynchronous, op by op) and
fused (ops recorded and compiled together at flush points).

The mode is process-wide (autograd runs backward ops on its own threads,
which must follow the same mode). It starts from ``TORCHTPU_MODE`` (strict
when unset); ``set_mode`` changes it, ``mode(...)`` changes it for a ``with``
block.
"""
import functools

from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                   register_optimizer_step_pre_hook)

from torchtpu import _C

MODES = ("debug", "strict", "fused")


def get_mode() -> str:
    """The current execution mode."""
    _C._init()
    return _C._get_mode()


def set_mode(name: str) -> None:
    """Sets the execution mode; work recorded so far is launched first."""
    if name not in MODES:
        raise ValueError(f"unknown mode {name!r}: expected one of {MODES}")
    _C._init()
    try:
        _C._flush(-1)
    finally:
        # A failed launch (out of memory) is raised, and the mode changes
        # all the same: a block that ends with it must not leave the
        # process in its mode.
        _C._set_mode(name, False)


class mode:
    """Runs a block (``with torchtpu.mode("fused"):``) or a function
    (``@torchtpu.mode("fused")``) in `name` mode, then restores the previous
    mode; work recorded inside is launched when it ends. A class, as
    ``torch.no_grad`` is, so that ``torchtpu.mode("fused").__enter__()`` in a
    notebook stays in effect: a generator's context manager would restore
    the previous mode as soon as it is garbage-collected."""

    def __init__(self, name: str):
        if name not in MODES:
            raise ValueError(f"unknown mode {name!r}: expected one of {MODES}")
        self.name = name
        self._previous = []  # a stack: the same object may be entered again

    def __enter__(self):
        previous = get_mode()
        try:
            set_mode(self.name)
        except BaseException:
            # The block does not run and its __exit__ is not called.
            _C._set_mode(previous, False)
            raise
        self._previous.append(previous)
        return self

    def __exit__(self, *exc):
        set_mode(self._previous.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def run_in_mode(*args, **kwargs):
            with mode(self.name):
                return fn(*args, **kwargs)
        return run_in_mode


def _before_optimizer_step(optimizer, args, kwargs):
    # Fused mode: a step does not start from gradients whose graph failed to
    # launch (out of memory, say; it compiles in the background). It raises
    # that failure instead, before the optimizer's own state (its step
    # counts, on the CPU) changes, as strict mode raises at the failing op.
    if _C._is_initialized() and _C._get_mode() == "fused":
        _C._wait_launches(-1)


def _after_optimizer_step(optimizer, args, kwargs):
    # Steps split compiles into warm-up and recompiles (torchtpu.recompiles).
    _C._mark_step()
    # Fused mode: an optimizer step is a flush point, so a training loop
    # replays the same graphs every step.
    if _C._is_initialized() and _C._get_mode() == "fused":
        _C._flush(-1)


register_optimizer_step_pre_hook(_before_optimizer_step)
register_optimizer_step_post_hook(_after_optimizer_step)
