"""A clean interpreter exit after backward passes on the device.

PyTorch runs backward ops for the device on its own worker thread, which
destroys a finished backward pass right after waking the caller. The pass
holds Python objects (in its thread-local snapshot); if the program is
finalizing by then, releasing them stops the thread mid-unwind and the
process aborts ("terminate called without an active exception").

At exit, while Python still runs, a backward pass started from a plain C++
thread goes through the same worker, which therefore finishes releasing the
previous pass first; the C++ pass itself holds no Python object.
"""
import atexit

from torchtpu import _C


def _drain_autograd_worker():
    if _C._is_initialized() and _C._autograd_ran_on_device():
        _C._drain_autograd_worker()


atexit.register(_drain_autograd_worker)
