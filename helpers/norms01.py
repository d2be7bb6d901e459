"""Lesson 01 (PyTorch's norm layers): tolerances, the reduce-set picture, and op/kernel counting.

- `TOL[dtype]`: the tolerance a re-implementation of a PyTorch norm must meet against torch's own
  function run in float64 on the same (already rounded) inputs. Chosen from measurement: a correct
  version that computes in float32 (float64 for float64 inputs) passes every hidden case; one that
  normalizes with the unbiased variance, puts eps outside the sqrt, or computes bf16 in bf16 fails.
- `reduce_set_mask` / `reduce_sets_figure`: the set S_i of BN, LN, IN and GN on an N x C x (H*W)
  block, drawn like Fig. 2 of the Group Norm paper (Wu & He, 2018).
- `aten_ops` / `unfused_vs_fused`: the aten ops (CPU) or CUDA kernels (GPU) a manual LayerNorm
  launches, with the bytes each moves, against the fused `F.layer_norm`.
"""
from __future__ import annotations

import torch

from .compare import Tolerance

TOL = {
    torch.float64: Tolerance(atol=1e-9, rtol=1e-9),
    torch.float32: Tolerance(atol=1e-5, rtol=1e-5),
    torch.float16: Tolerance(atol=2e-3, rtol=2e-3),
    torch.bfloat16: Tolerance(atol=1.6e-2, rtol=1.6e-2),
}
# Gradients (dx, dweight, dbias) are sums over the reduce set: compared in float64 only.
GRAD_TOL = Tolerance(atol=1e-8, rtol=1e-7)

KINDS = ("batch", "layer", "instance", "group")


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype PyTorch's norms compute in ("opmath"): float64 for float64, float32 otherwise."""
    return torch.float64 if dtype == torch.float64 else torch.float32


# ----------------------------------------------------------------------------------------- figure
def reduce_set_mask(kind: str, N: int = 4, C: int = 6, HW: int = 5, groups: int = 2,
                    i: tuple[int, int] = (1, 2)) -> torch.Tensor:
    """Boolean (N, C, HW) mask of S_i, the elements whose statistics normalize element i.

    i = (n, c) picks the sample and channel of element i (S_i does not depend on its pixel).
    BN: same channel; LN: same sample; IN: same sample and channel; GN: same sample and group.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if min(N, C, HW, groups) < 1:
        raise ValueError(f"N, C, HW and groups must be >= 1, got {(N, C, HW, groups)}")
    if kind == "group" and C % groups:
        raise ValueError(f"C ({C}) must be divisible by groups ({groups})")
    n_i, c_i = i
    if not (0 <= n_i < N and 0 <= c_i < C):
        raise ValueError(f"i = {i} is outside N={N}, C={C}")
    n = torch.arange(N).view(N, 1, 1)
    c = torch.arange(C).view(1, C, 1)
    same_n, same_c = n == n_i, c == c_i
    if kind == "batch":
        m = same_c & (n >= 0)
    elif kind == "layer":
        m = same_n & (c >= 0)
    elif kind == "instance":
        m = same_n & same_c
    else:
        size = C // groups
        m = same_n & (c // size == c_i // size)
    return m.expand(N, C, HW).clone()


def reduce_sets_figure(N: int = 4, C: int = 6, HW: int = 5, groups: int = 2, i: tuple[int, int] = (0, 2)):
    """Four cubes N x C x (H*W), S_i shaded for BatchNorm, LayerNorm, InstanceNorm, GroupNorm."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Polygon

    titles = {"batch": "Batch Norm", "layer": "Layer Norm", "instance": "Instance Norm",
              "group": f"Group Norm ({groups} groups)"}
    dx, dy = 0.45, 0.35  # oblique projection of the depth (N) axis
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.6))
    for ax, kind in zip(axes, KINDS):
        mask = reduce_set_mask(kind, N, C, HW, groups, i)
        # Painter's order: far samples first, then bottom to top, left to right.
        for n in reversed(range(N)):
            ox, oy = n * dx, n * dy
            for h in range(HW):
                for c in range(C):
                    on = bool(mask[n, c, h])
                    face = "#4c8bf5" if on else "white"
                    side = "#2f5fb3" if on else "#e6e6e6"
                    top = "#7aa8f7" if on else "#f3f3f3"
                    x0, y0 = c + ox, h + oy
                    kw = dict(edgecolor="#555555", lw=0.5)
                    ax.add_patch(Polygon([(x0, y0), (x0 + 1, y0), (x0 + 1, y0 + 1), (x0, y0 + 1)],
                                         facecolor=face, **kw))
                    ax.add_patch(Polygon([(x0, y0 + 1), (x0 + 1, y0 + 1), (x0 + 1 + dx, y0 + 1 + dy),
                                          (x0 + dx, y0 + 1 + dy)], facecolor=top, **kw))
                    ax.add_patch(Polygon([(x0 + 1, y0), (x0 + 1 + dx, y0 + dy), (x0 + 1 + dx, y0 + 1 + dy),
                                          (x0 + 1, y0 + 1)], facecolor=side, **kw))
        n_i, c_i = i     # element i itself, at position 0 of its (sample, channel): on the front face when n_i = 0
        ax.plot(c_i + 0.5 + n_i * dx, 0.5 + n_i * dy, marker="o", color="#d62728", ms=7, zorder=5)
        ax.annotate("i", (c_i + 0.5 + n_i * dx, 0.5 + n_i * dy), xytext=(c_i + 0.15 + n_i * dx, -0.5), ha="center",
                    color="#d62728", fontsize=10, fontweight="bold")
        ax.annotate("C", (C / 2, -0.9), ha="center", fontsize=10)
        ax.annotate("H, W", (-0.9, HW / 2), ha="center", va="center", rotation=90, fontsize=10)
        ax.annotate("N", (C + 0.3 + N * dx / 2 + 0.4, N * dy / 2 - 0.2), fontsize=10)
        ax.set_xlim(-1.5, C + N * dx + 1.5)
        ax.set_ylim(-1.5, HW + N * dy + 1.0)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(f"{titles[kind]}\n|S_i| = {int(mask.sum())} elements", fontsize=10)
    fig.suptitle("Every norm: statistics over a set S_i (shaded) of element i (red dot), then normalize each "
                 "element with them (front face: sample n = 0)", fontsize=10)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------ unfused vs fused
def manual_layer_norm(x, weight, bias, eps: float = 1e-5):
    """LayerNorm over the last dim as a PyTorch composite: each line is one (or two) kernels."""
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias


_NO_TRAFFIC = ("view", "_unsafe_view", "expand", "unsqueeze", "squeeze", "reshape", "alias", "detach",
               "t", "transpose", "permute", "as_strided", "slice", "select", "_to_copy_noop")


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def aten_ops(fn, *args, **kwargs) -> list[dict]:
    """The aten ops `fn(*args)` runs (below autograd), each with the bytes it reads and writes.

    Bytes are the sizes of the tensors going in and out of each op (a lower bound on its traffic:
    one pass over each operand). Views move nothing and are left out.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    ops: list[dict] = []

    class _Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if name not in _NO_TRAFFIC:
                ins = list(_tensors(args)) + list(_tensors(kwargs or {}))
                outs = list(_tensors(out))
                ops.append(dict(op=str(func), read=sum(t.numel() * t.element_size() for t in ins),
                                written=sum(t.numel() * t.element_size() for t in outs)))
            return out

    with torch.no_grad(), _Count():
        fn(*args, **kwargs)
    return ops


def cuda_kernels(fn, *args, **kwargs) -> list[str]:
    """Names of the CUDA kernels one call of fn launches (torch.profiler, after a warm-up call)."""
    from torch.profiler import ProfilerActivity, profile

    fn(*args, **kwargs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args, **kwargs)
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        dev = getattr(e, "device_type", None)
        if dev is not None and "CUDA" in str(dev):
            names.append(e.name)
    return names


def unfused_vs_fused(M: int = 4096, N: int = 4096, dtype=torch.float32, eps: float = 1e-5,
                     quiet: bool = False) -> dict:
    """Manual LayerNorm vs F.layer_norm: ops (or kernels), bytes moved, and on a GPU GB/s.

    Prints a table; returns {'manual': {...}, 'fused': {...}} with ops, bytes and passes
    (bytes moved / bytes of x), plus kernels and GB/s on a GPU.
    """
    import torch.nn.functional as F

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(M, N, generator=g).to(dtype).to(dev)
    w = torch.randn(N, generator=g).to(dtype).to(dev)
    b = torch.randn(N, generator=g).to(dtype).to(dev)
    impls = {"manual": lambda: manual_layer_norm(x, w, b, eps),
             "fused": lambda: F.layer_norm(x, (N,), w, b, eps)}
    x_bytes = x.numel() * x.element_size()
    compulsory = 2 * x_bytes + 2 * N * w.element_size()
    out: dict = {}
    for name, fn in impls.items():
        ops = aten_ops(fn)
        moved = sum(o["read"] + o["written"] for o in ops)
        row = dict(ops=ops, n_ops=len(ops), bytes=moved, passes=moved / x_bytes)
        if dev == "cuda":
            from .bench import time_ms

            row["kernels"] = cuda_kernels(fn)
            ms = time_ms(fn)
            row["ms"] = ms
            row["gbs"] = compulsory / ms * 1e-6
        out[name] = row
    if dev == "cuda":
        from .bench import copy_gbs

        out["copy_gbs"] = copy_gbs(x.numel(), dtype)
    if not quiet:
        _print_table(out, M, N, dtype, dev)
    return out


def _print_table(out: dict, M: int, N: int, dtype, dev: str) -> None:
    dt = str(dtype).replace("torch.", "")
    print(f"LayerNorm of a {M} x {N} {dt} tensor on {dev}: what each version asks of memory")
    print(f"  {'op':<34}{'reads MB':>10}{'writes MB':>11}")
    for name in ("manual", "fused"):
        print(f"  -- {name}")
        for o in out[name]["ops"]:
            print(f"  {o['op']:<34}{o['read'] / 1e6:>10.1f}{o['written'] / 1e6:>11.1f}")
    print()
    head = f"  {'version':<10}{'aten ops':>9}{'MB moved':>10}{'passes over x':>15}"
    if dev == "cuda":
        head += f"{'kernels':>9}{'time ms':>9}{'GB/s':>8}{'% copy':>8}"
    print(head)
    for name in ("manual", "fused"):
        r = out[name]
        line = f"  {name:<10}{r['n_ops']:>9}{r['bytes'] / 1e6:>10.1f}{r['passes']:>15.1f}"
        if dev == "cuda":
            line += (f"{len(r['kernels']):>9}{r['ms']:>9.3f}{r['gbs']:>8.0f}"
                     f"{100 * r['gbs'] / out['copy_gbs']:>7.0f}%")
        print(line)
    if dev == "cuda":
        print(f"  (GB/s counts the compulsory bytes, read x + write y; copy = {out['copy_gbs']:.0f} GB/s)")
