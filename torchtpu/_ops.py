"""Registers the op table's kernels with PyTorch's dispatcher.

Each row of runtime/src/lower/ops.def names ATen overloads; for each we
register the row's kernel for that overload and for the in-place (``name_``)
and ``out=`` variants PyTorch defines with the same arguments. The runtime
implements the functional op; the kernel writes its results into self or out.
"""
import torch

from torchtpu import _C


def _args(schema, skip_out=True):
    return [(a.name, str(a.type)) for a in schema.arguments if not (skip_out and a.is_out)]


def _qualified(schema):
    return schema.name + ("." + schema.overload_name if schema.overload_name else "")


def _is_composite_implicit(qualified):
    """A CompositeImplicitAutograd op without its own autograd formula: a
    backend kernel would replace its decomposition, and with it the only way
    autograd differentiates it. Ops that have both (_fused_rms_norm) keep
    their formula, like the CUDA kernels of those ops."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return has(qualified, "CompositeImplicitAutograd") and not has(qualified, "Autograd")


# In-place variants a binding kernel implements instead of the row's generic
# one: addbmm_ resizes self as CPU's does (binding/ops.cpp).
OWN_INPLACE_KERNELS = {"addbmm_"}


def variants(spec):
    """The qualified names a row entry such as 'add.Tensor' registers (none
    where this version of torch does not have it)."""
    base, _, overload = spec.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None or (overload or "default") not in packet.overloads():
        return []
    op = getattr(packet, overload or "default")
    schema = op._schema
    names = [_qualified(schema)]
    signature = _args(schema)
    if not base.endswith("_"):
        inplace = getattr(torch.ops.aten, base + "_", None)
        if (inplace is not None and (overload or "default") in inplace.overloads()
                and base + "_" not in OWN_INPLACE_KERNELS):
            s = getattr(inplace, overload or "default")._schema
            if [n for n, _ in _args(s)] == [n for n, _ in signature]:
                names.append(_qualified(s))
    for name in packet.overloads():
        s = getattr(packet, name)._schema
        q = _qualified(s)
        # (a row may list an out= overload itself: register it once)
        if any(a.is_out for a in s.arguments) and _args(s) == signature and q not in names:
            names.append(q)
    return names


def table():
    """[(row, name, [qualified overloads])] for every op-table row."""
    rows = []
    for row, (name, aten) in enumerate(_C._op_table()):
        names = []
        for spec in aten.split():
            names += variants(spec)
        rows.append((row, name, names))
    return rows


def register_all():
    for row, name, qualified in table():
        for q in qualified:
            if _is_composite_implicit(q):
                raise RuntimeError(
                    f"op table row '{name}' lists {q}, a CompositeImplicitAutograd op: "
                    "a tpu kernel would hide its autograd formula")
            _C._register_kernel(q, row)
    _C._register_fallback()
