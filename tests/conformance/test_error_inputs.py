"""PyTorch's OpInfo error inputs: every call that CPU rejects, tpu rejects
too, with the same exception type (a tpu that accepted it would compute
something PyTorch calls an error, often silently), and with a message that
matches the error input's pattern wherever CPU's does (except the known
differences listed below, each with its reason).

Inputs are moved to tpu keeping their aliasing: tensors that share a CPU
storage share a tpu storage, with the same sizes, strides and offsets (an
out= tensor that overlaps an input must overlap it on tpu too).
"""
import re

import pytest
import torch

import opinfo_harness as H

# Patterns whose CPU message tpu words differently, and why.
KNOWN_WORDING = {
    "only tensors with up to 64 dims are supported":
        "tpu tensors have at most 8 dimensions; that limit is named instead",
    "invalid multinomial distribution":
        "sampling with replacement checks on the device with the wording of "
        "CPU's other sampling path",
    "Trying to create tensor with negative dimension":
        "adaptive pools check output_size before making the output",
    "Expected input\\'s non-batch dimensions to have positive length":
        "max_pool3d's empty-dimension check is PyTorch's shared (non-CPU) one",
}


def _cases():
    return [(key, op) for key, op in H.databases() if op.error_inputs_func is not None]


@pytest.fixture(scope="module", autouse=True)
def _setup():
    H.setup()


def _to_tpu(x, storages):
    if isinstance(x, (list, tuple)):
        return type(x)(_to_tpu(y, storages) for y in x)
    if not isinstance(x, torch.Tensor) or x.layout != torch.strided or x.device.type != "cpu":
        return x
    storage = x.untyped_storage()
    key = storage.data_ptr()
    if key not in storages:
        storages[key] = torch.empty(0, dtype=torch.uint8).set_(storage).to("tpu")
    moved = storages[key].view(x.dtype) if x.dtype != torch.uint8 else storages[key]
    moved = moved.as_strided(x.shape, x.stride(), x.storage_offset())
    return moved.requires_grad_() if x.requires_grad and x.is_leaf else moved


def _outcome(op, sample, device):
    if device == "tpu":
        storages = {}
        sample = (_to_tpu(sample.input, storages), _to_tpu(list(sample.args), storages),
                  {k: _to_tpu(v, storages) for k, v in sample.kwargs.items()})
    else:
        sample = (sample.input, list(sample.args), sample.kwargs)
    try:
        op(sample[0], *sample[1], **sample[2])
        if device == "tpu":
            torch.tpu.synchronize()
    except Exception as e:  # the outcome under test
        return e
    return None


@pytest.mark.parametrize("key,op", _cases(), ids=[k for k, _ in _cases()])
def test_error_inputs_are_refused_as_on_cpu(key, op):
    checked = 0
    for error_input in op.error_inputs(device="cpu"):
        sample = error_input.sample_input
        cpu = _outcome(op, sample, "cpu")
        if cpu is None:  # (an error input CPU accepts: not ours to judge)
            continue
        tpu = _outcome(op, sample, "tpu")
        assert type(tpu) is type(cpu), (
            f"{key}: CPU raised {type(cpu).__name__}: {str(cpu).splitlines()[0]}; "
            f"tpu {'accepted it' if tpu is None else 'raised ' + repr(tpu)}")
        pattern = error_input.error_regex
        if pattern and re.search(pattern, str(cpu)) and pattern not in KNOWN_WORDING:
            assert re.search(pattern, str(tpu)), (
                f"{key}: CPU's message matches {pattern!r}, tpu's does not: {tpu}")
        checked += 1
    if not checked:
        pytest.skip(f"PyTorch's CPU kernels accept every error input of {key}")
