"""The LayerNorm forward benchmark of lesson 05, shared by the notebook cell and `make bench`.

Peers: torch.nn.functional.layer_norm, torch.compile of the PyTorch composite, and Liger's Triton
LayerNorm where it is installed.
"""
from __future__ import annotations

from typing import Callable

import torch

from . import bench
from .compare import compare, tolerance_for
from .reference import layernorm_ref

LESSON, OP = "05_triton_layernorm", "layernorm_fwd"
EPS = 1e-5


def composite(x, w, b, eps=EPS):
    """Unfused: mean, centre, square, mean, rsqrt, scale, shift, each op a pass over HBM."""
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    xc = xf - mean
    return (xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + eps) * w.float() + b.float()).to(x.dtype)


def peers() -> dict[str, Callable]:
    bench.lift_recompile_limit()
    out = {
        "F.layer_norm": lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, EPS),
        "torch.compile": torch.compile(composite, dynamic=False),
    }
    try:
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction

        out["Liger"] = lambda x, w, b: LigerLayerNormFunction.apply(x, w, b, EPS)
    except Exception:  # Liger is optional: benchmarked where installed
        pass
    return out


def make_inputs(M, N, dtype):
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    w = (torch.randn(N, device="cuda") * 0.5 + 1).to(dtype)
    b = (torch.randn(N, device="cuda") * 0.5).to(dtype)
    return x, w, b


def n_bytes(M, N, args):
    x, w, _ = args
    return 2 * M * N * x.element_size() + 2 * N * w.element_size()


def check(out, args, rows: int = 64):
    y = out[0] if isinstance(out, tuple) else out
    x, w, b = args
    ref, _, _ = layernorm_ref(x[:rows], w, b, EPS)
    r = compare(y[:rows], ref, tolerance_for("layernorm", x.dtype), dtype=x.dtype)
    return r.ok, r.message


def run(impls: dict[str, Callable], *, with_peers: bool = True, Ns=bench.DEFAULT_NS,
        dtypes=bench.DEFAULT_DTYPES, plot: bool = True, progress: bool = True) -> dict:
    """Sweep the given implementations (fn(x, w, b, eps) -> y or (y, mean, rstd)) and the peers."""
    fns = {name: (lambda f: (lambda x, w, b: f(x, w, b, EPS)))(f) for name, f in impls.items()}
    if with_peers:
        fns.update(peers())
    return bench.run_and_plot(fns, lesson=LESSON, op=OP, make_inputs=make_inputs, n_bytes=n_bytes, check=check,
                              byte_model="2*M*N*sizeof(x) + 2*N*sizeof(w)", Ns=Ns, dtypes=dtypes, plot_it=plot,
                              progress=progress)


def show_recorded():
    return bench.show_recorded(LESSON, OP)
