"""torch.multiprocessing and tpu tensors: a clear refusal.

torch.cuda shares a tensor with another process through a CUDA IPC handle;
PJRT has no such handle. torch's reducers take any other storage for a CPU
one and fail with "_share_fd_: only available on CPU"; these say what to do.
"""
from multiprocessing import reduction

import torch
import torch.multiprocessing  # registers torch's reducers, which these wrap
from torch.multiprocessing import reductions


def _refusing_tpu(reduce):
    def reducer(obj):
        if obj.device.type == "tpu":
            raise RuntimeError("a tpu tensor cannot be sent to another process "
                               "(torch.multiprocessing shares CPU and CUDA memory only): "
                               "send t.cpu() and move it to tpu there")
        return reduce(obj)
    return reducer


for _t in (torch.Tensor, torch.nn.parameter.Parameter):
    reduction.register(_t, _refusing_tpu(reductions.reduce_tensor))
reduction.register(torch.UntypedStorage, _refusing_tpu(reductions.reduce_storage))
