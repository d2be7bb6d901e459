"""The RMSNorm forward benchmark of lesson 04, shared by the notebook cell and `make bench`.

Peers: the unfused PyTorch composite (the seed's "native" version), torch.nn.functional.rms_norm,
torch.compile of the composite, and Liger's Triton RMSNorm where it is installed.
"""
from __future__ import annotations

from typing import Callable

import torch

from . import bench
from .compare import compare, tolerance_for
from .reference import rmsnorm_ref

LESSON, OP = "04_triton_rmsnorm", "rmsnorm_fwd"
EPS = 1e-6


def composite(x, w, eps=EPS):
    """Unfused: each op reads and writes HBM (upcast, square, mean, rsqrt, two multiplies, downcast)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def peers() -> dict[str, Callable]:
    bench.lift_recompile_limit()
    out = {
        "torch composite": lambda x, w: composite(x, w),
        "F.rms_norm": lambda x, w: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, EPS),
        "torch.compile": torch.compile(composite, dynamic=False),
    }
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction

        out["Liger"] = lambda x, w: LigerRMSNormFunction.apply(x, w, EPS)
    except Exception:  # Liger is optional: benchmarked where installed
        pass
    return out


def make_inputs(M, N, dtype):
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    w = (torch.randn(N, device="cuda") * 0.5 + 1).to(dtype)
    return x, w


def n_bytes(M, N, args):
    x, w = args
    return bench.rmsnorm_fwd_bytes(M, N, x.element_size(), w.element_size())


def check(out, args, rows: int = 64):
    y = out[0] if isinstance(out, tuple) else out
    x, w = args
    ref, _ = rmsnorm_ref(x[:rows], w, EPS)
    r = compare(y[:rows], ref, tolerance_for("rmsnorm", x.dtype), dtype=x.dtype)
    return r.ok, r.message


def run(impls: dict[str, Callable], *, with_peers: bool = True, Ns=bench.DEFAULT_NS,
        dtypes=bench.DEFAULT_DTYPES, plot: bool = True, progress: bool = True) -> dict:
    """Sweep the given implementations (fn(x, w) -> y or (y, rstd)) and the peers; plot; return results."""
    fns = {name: (lambda f: (lambda x, w: f(x, w, EPS)))(f) for name, f in impls.items()}
    if with_peers:
        fns.update(peers())
    return bench.run_and_plot(fns, lesson=LESSON, op=OP, make_inputs=make_inputs, n_bytes=n_bytes, check=check,
                              byte_model="2*M*N*sizeof(x) + N*sizeof(w)", Ns=Ns, dtypes=dtypes, plot_it=plot,
                              progress=progress)


def show_recorded():
    return bench.show_recorded(LESSON, OP)
