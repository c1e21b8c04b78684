"""torchtpu: a native PyTorch backend for XLA devices (TPU, GPU, CPU) over PJRT.

``import torchtpu`` (or just ``import torch``, through the ``torch.backends``
entry point) makes the device ``tpu`` available: ``torch.ones(3, device="tpu")``,
``model.to("tpu")``, ``torch.tpu.synchronize()``.
"""
import os
import sys

__version__ = "0.1.0"


def _autoload():
    """Entry point of the ``torch.backends`` group: importing is the work."""


# Defined before ``import torch``: when torchtpu is imported first, torch's
# import loads the entry point above from this partly initialized module.
import torch  # noqa: E402


def _plugin_search_path():
    # The runtime finds PJRT plugins (the XLA CPU plugin wheel, libtpu, the
    # JAX CUDA plugin) under Python's import directories.
    dirs = [p for p in sys.path if p and os.path.isdir(p)]
    return os.pathsep.join(dict.fromkeys(dirs))


# Empty counts as unset, as for torchtpu's other variables.
if not os.environ.get("TORCHTPU_PLUGIN_PATH"):
    os.environ["TORCHTPU_PLUGIN_PATH"] = _plugin_search_path()

from torchtpu import _C  # noqa: E402
from torchtpu import _device, _multiprocessing, _ops, _shutdown  # noqa: E402
from torchtpu._metrics import metrics, recompiles, report, reset_metrics  # noqa: E402
from torchtpu._modes import get_mode, mode, set_mode  # noqa: E402


def _warn_beside_cuda():
    """PyTorch keeps one accelerator per process (``at::getAccelerator()``)
    and a registered PrivateUse1 backend takes it: from then on a backward
    pass over cuda tensors fails with PyTorch's internal assert
    "opt_ready_stream && opt_parent_stream" (pytorch/pytorch#161129; seen
    with torch 2.11 on an H200). Said once where a CUDA build of torch
    finds an NVIDIA device, without initializing CUDA."""
    if torch.version.cuda and os.path.exists("/dev/nvidia0"):
        import warnings

        warnings.warn("torchtpu registered the tpu device, which PyTorch now takes as this "
                      "process's only accelerator: a backward pass over cuda tensors fails in "
                      "this process (pytorch/pytorch#161129). Train on cuda in a process "
                      "without torchtpu (TORCH_DEVICE_BACKEND_AUTOLOAD=0 keeps `import torch` "
                      "from loading it).", stacklevel=3)


def _register():
    if torch._C._get_privateuse1_backend_name() != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")
    torch._register_device_module("tpu", _device)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    _ops.register_all()
    # The importing thread's backward passes run on it, as PyTorch runs a
    # lazy device's. Otherwise PyTorch hands each pass to its autograd
    # engine's thread for the device and back, which costs as much as
    # recording the backward of a small model (docs/modes.md).
    torch.autograd.set_multithreading_enabled(False)
    _warn_beside_cuda()


_register()


__all__ = ["metrics", "recompiles", "report", "reset_metrics", "mode", "set_mode", "get_mode"]
