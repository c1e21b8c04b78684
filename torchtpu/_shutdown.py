"""A clean interpreter exit: after backward passes on the device, and with
programs still running.

PyTorch runs backward ops for the device on its own worker thread, which
destroys a finished backward pass right after waking the caller. The pass
holds Python objects (in its thread-local snapshot); if the program is
finalizing by then, releasing them stops the thread mid-unwind and the
process aborts ("terminate called without an active exception").

At exit, while Python still runs, a backward pass started from a plain C++
thread goes through the same worker, which therefore finishes releasing the
previous pass first; the C++ pass itself holds no Python object.

XLA's CPU plugin frees its JIT-compiled code (oneDNN's GEMM kernels among
it) in static destructors at exit; a program launched without a wait and
still running then jumps into freed code (SIGSEGV). So the exit waits for
what was launched, as tearing down a CUDA context does; what was recorded
but not launched (fused mode) is not run.
"""
import atexit

from torchtpu import _C


def _drain_autograd_worker():
    if _C._is_initialized() and _C._autograd_ran_on_device():
        _C._drain_autograd_worker()


def _wait_for_running_programs():
    if _C._is_initialized():
        _C._quiesce()


atexit.register(_wait_for_running_programs)  # atexit runs in reverse: after the drain
atexit.register(_drain_autograd_worker)
