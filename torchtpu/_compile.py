"""``torch.compile(model, backend="tpu")``.

Dynamo captures the graphs, AOTAutograd splits each into a forward and a
backward graph of ATen ops, and each of those is recorded in fused mode
through the same op table as eager ops: one program per graph, or part of
the graph being recorded when the process is in fused mode
(docs/compile.md). The programs go through the same compile cache, in
memory and on disk, as eager mode's.
Dynamo finds this backend through the ``torch_dynamo_backends`` entry point,
so ``import torch._dynamo`` is paid only by programs that compile.
"""
from torchtpu import _modes


def _fused(gm, example_inputs):
    """AOTAutograd's compiler for forward, backward and inference graphs."""

    def run(args):
        # In fused mode the graph's ops join the graph being recorded, as
        # eager ops do, and are cut at the same flush points. In the other
        # modes entering and leaving the block are flush points: what was
        # recorded before is launched first, and the graph's ops become
        # one program.
        if _modes.get_mode() == "fused":
            return gm(*args)
        with _modes.mode("fused"):
            return gm(*args)

    run._boxed_call = True  # AOTAutograd passes the arguments as one list
    return run


def backend(gm, example_inputs, mode=None, options=None):
    """The ``"tpu"`` backend of ``torch.compile``. Inductor's modes and
    options mean nothing to it, so it refuses them rather than ignore them."""
    from torch._dynamo.backends.common import aot_autograd

    if mode not in (None, "default"):
        raise ValueError(f"torch.compile(backend='tpu') has no mode {mode!r}: use the default")
    if options:
        raise ValueError(f"torch.compile(backend='tpu') takes no options, got {sorted(options)}")
    return aot_autograd(fw_compiler=_fused, bw_compiler=_fused)(gm, example_inputs)
