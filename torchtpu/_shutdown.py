"""A clean interpreter exit after backward passes on the device.

PyTorch runs backward ops for the device on its own worker thread, which
releases a finished backward pass's graph right after waking the caller. If
the program ends at that moment, the worker releases Python objects while the
interpreter is finalizing, and Python 3.11 stops the thread mid-unwind, which
aborts the process ("terminate called without an active exception").

At exit, one tiny backward pass through the same worker waits until the
previous pass is fully released; the tiny pass's own tensors stay alive
(module globals), so releasing it touches no Python object.
"""
import atexit

import torch

from torchtpu import _C

_keep = []


def _drain_autograd_worker():
    if not (_C._is_initialized() and _C._autograd_ran_on_device()):
        return
    try:
        x = torch.zeros(1, device="tpu", requires_grad=True)
        y = x.sum()
        _keep.extend((x, y))
        y.backward()
    except Exception:  # exiting anyway; never mask the program's own status
        pass


atexit.register(_drain_autograd_worker)
