"""The ladder benchmark of lesson 03 (CUDA C): v1..v6 and F.layer_norm, float32, one plot.

Launchers keep their lesson signatures: LayerNorm f(x, weight, bias, eps) -> (y, mean, rstd), RMSNorm
f(x, weight, eps) -> (y, rstd), softmax f(x) -> y. Each output is checked against its own float64
reference before it is timed. A launcher that refuses a row length (a kernel's register budget) is
left out at that length, not counted as a failure.
"""
from __future__ import annotations

import inspect
from typing import Callable

import torch

from . import bench
from .bench_layernorm import make_inputs, n_bytes  # same x, weight, bias and byte model as lesson 05
from .compare import compare, tolerance_for
from .reference import layernorm_ref, rmsnorm_ref, softmax_ref

LESSON, OP = "03_pycuda_layernorm", "ladder_fwd"
EPS = 1e-5


def kind_of(fn: Callable) -> str:
    """'layernorm', 'rmsnorm' or 'softmax', from the launcher's parameter names."""
    params = list(inspect.signature(fn).parameters)
    if "bias" in params:
        return "layernorm"
    if "weight" in params:
        return "rmsnorm"
    if len(params) >= 1:
        return "softmax"
    raise TypeError(f"cannot tell what {fn!r} computes from its parameters {params}")


def _adapt(fn: Callable, kind: str) -> Callable:
    """fn as f(x, w, b) -> (kind, output), so that the check knows which reference to use."""
    def call(x, w, b):
        try:
            if kind == "layernorm":
                return kind, fn(x, w, b, EPS)
            if kind == "rmsnorm":
                return kind, fn(x, w, EPS)
            return kind, fn(x)
        except ValueError as e:
            if "too large for this" in str(e):
                raise bench.NotApplicable(str(e)) from None
            raise
    return call


def peers() -> dict[str, Callable]:
    return {"F.layer_norm": lambda x, w, b: ("layernorm", torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, EPS))}


def check(tagged, args, rows: int = 64):
    """tagged = (kind, output) from an adapted launcher; compare y with that kind's float64 reference."""
    kind, out = tagged
    x, w, b = args
    y = out[0] if isinstance(out, tuple) else out
    if kind == "layernorm":
        ref = layernorm_ref(x[:rows], w, b, EPS)[0]
    elif kind == "rmsnorm":
        ref = rmsnorm_ref(x[:rows], w, EPS)[0]
    else:
        ref = softmax_ref(x[:rows])
    r = compare(y[:rows], ref, tolerance_for(kind, x.dtype), dtype=x.dtype)
    return r.ok, r.message


def unavailable() -> str | None:
    """Why the ladder cannot run here (no GPU, PyCUDA or nvcc), or None."""
    from .cudac import can_run
    return can_run()


def run(impls: dict[str, Callable], *, with_peers: bool = True, Ns=bench.DEFAULT_NS, dtypes=("float32",),
        plot: bool = True, progress: bool = True) -> dict:
    """Sweep the ladder's launchers (and F.layer_norm) over C at M*C = 64 Mi elements; float32 only."""
    if "float32" not in dtypes:
        raise ValueError(f"lesson 03's kernels take float32 only, asked for {tuple(dtypes)}")
    fns = {name: _adapt(fn, kind_of(fn)) for name, fn in impls.items()}
    if with_peers:
        fns.update(peers())
    return bench.run_and_plot(fns, lesson=LESSON, op=OP, make_inputs=make_inputs, n_bytes=n_bytes, check=check,
                              byte_model="2*M*C*4 + 2*C*4 for every rung", Ns=Ns, dtypes=("float32",),
                              plot_it=plot, progress=progress)


def show_recorded():
    return bench.show_recorded(LESSON, OP)
