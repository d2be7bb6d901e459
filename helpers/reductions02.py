"""Lesson 02 (stable reductions): given helpers, experiments and pictures.

- Given helpers the exercises use: input checks, the accumulation dtype, the identity states of
  the online-softmax and Welford reductions, and the lane map of the warp simulation.
- Experiments: where `exp` overflows in each float type; the relative error of four variance
  algorithms against the mean/std ratio of the data, in float32.
- Pictures (matplotlib, drawn by the course): the variance-error plot and the butterfly of a warp.

The experiments are written in NumPy on purpose, one value at a time where the algorithm is
sequential: they show the numerics, not the vectorised PyTorch the exercises ask for.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from .compare import Tolerance

WARP = 32                            # lanes in a warp: the butterfly below runs over exactly this many
OFFSETS = (16, 8, 4, 2, 1)           # the xor distances of its five rounds
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# --------------------------------------------------------------------------- given helpers

def check_float_tensor(x, name: str = "x") -> None:
    """TypeError unless x is a torch.Tensor of a floating dtype (fp16, bf16, fp32, fp64)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float16, bfloat16, float32 or float64, got {x.dtype}")


def check_rows(x, chunk: int, name: str = "x") -> int:
    """Validate a row-wise streaming reduction's input; return N, the length of the last dimension.

    x: a float tensor with at least one dimension and a non-empty last dimension.
    chunk: a positive int, the number of columns processed per step (it may exceed N).
    """
    check_float_tensor(x, name)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"{name} needs a non-empty last dimension to reduce over, got shape {tuple(x.shape)}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive int, got {chunk!r}")
    return x.shape[-1]


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype to compute in: float64 for float64 inputs, float32 for everything else."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def softmax_identity(shape, dtype=torch.float32, device="cpu"):
    """The empty online-softmax state (m, l) = (-inf, 0): merging it changes nothing."""
    return (torch.full(tuple(shape), -math.inf, dtype=dtype, device=device),
            torch.zeros(tuple(shape), dtype=dtype, device=device))


def welford_empty(shape, dtype=torch.float32, device="cpu"):
    """The empty Welford state (count, mean, M2) = (0, 0, 0), all three of one float dtype."""
    return tuple(torch.zeros(tuple(shape), dtype=dtype, device=device) for _ in range(3))


def lanes_map(fn: Callable, state):
    """Apply fn to every tensor of a state: a tensor, or a tuple/list of tensors (same structure back)."""
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, (tuple, list)):
        return type(state)(lanes_map(fn, s) for s in state)
    raise TypeError(f"a lane state is a tensor or a tuple of tensors, got {type(state).__name__}")


def check_lanes(values) -> int:
    """ValueError/TypeError unless every tensor of the state has a leading lane dimension of WARP."""
    tensors = []
    lanes_map(tensors.append, values)
    if not tensors:
        raise ValueError("the lane state holds no tensors")
    for t in tensors:
        if t.ndim == 0 or t.shape[0] != WARP:
            raise ValueError(f"every tensor of the state needs a leading lane dimension of {WARP}, "
                             f"got shape {tuple(t.shape)}")
    return WARP


# --------------------------------------------------------------------------- tolerances and references
# What the hidden cases allow (the grader imports these; the visible checks print verdicts with them). From
# measurement: a correct fp32 (fp64 for fp64) computation passes every case with room to spare; exp/sum in fp16,
# a missing max subtraction, an unrescaled l or the one-pass variance formula on data of mean 1e4 do not.
_F16, _BF16, _F32, _F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
PROB_TOL = {_F64: Tolerance(1e-15, 1e-12), _F32: Tolerance(1e-7, 1e-5), _F16: Tolerance(1e-7, 6e-4),
            _BF16: Tolerance(1e-9, 4.5e-3)}                       # softmax outputs
STATE_TOL = {_F64: Tolerance(0.0, 1e-12), _F32: Tolerance(0.0, 1e-5)}  # online-softmax states (m, l)
VAR_TOL = {_F64: Tolerance(1e-13, 1e-9), _F32: Tolerance(1e-6, 1e-4), _F16: Tolerance(1e-3, 2e-3),
           _BF16: Tolerance(1e-2, 1e-2)}
MEAN_TOL = {_F64: Tolerance(1e-13, 1e-13), _F32: Tolerance(1e-6, 2e-6), _F16: Tolerance(1e-3, 1e-3),
            _BF16: Tolerance(1e-2, 8e-3)}
EXACT = Tolerance(0.0, 0.0)                                           # counts, maxima


def welford_ref(data: torch.Tensor):
    """(count, mean, M2) of the values along the last dim, in float64; (0, 0, 0) for none."""
    d = data.double()
    n = d.shape[-1]
    count = torch.full(d.shape[:-1], float(n), dtype=_F64)
    if n == 0:
        return count, torch.zeros_like(count), torch.zeros_like(count)
    mean = d.mean(dim=-1)
    return count, mean, ((d - mean.unsqueeze(-1)) ** 2).sum(dim=-1)


def welford_tol(dtype: torch.dtype, data: torch.Tensor) -> tuple[Tolerance, Tolerance]:
    """(mean, M2) tolerances of a Welford state over data like this: relative, plus an absolute floor at its scale."""
    d = data.double()
    scale = float(d.abs().max()) if d.numel() else 1.0
    spread = float(d.std()) if d.numel() > 1 else 1.0
    n = max(d.shape[-1], 1)
    if dtype == _F64:
        return Tolerance(1e-13 * scale, 1e-12), Tolerance(1e-10 * n * spread ** 2, 1e-10)
    return Tolerance(4e-7 * scale, 1e-5), Tolerance(1e-4 * n * spread ** 2 + 1e-6, 1e-3)


# --------------------------------------------------------------------------- where exp overflows

def naive_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The textbook formula exp(x) / sum(exp(x)), with no max subtraction: the version that breaks."""
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
         torch.float64: torch.int64}


def first_overflowing_logit(dtype: torch.dtype) -> float:
    """The smallest value x of `dtype` with exp(x) = inf when exp is computed in `dtype`.

    Positive floats are ordered like their bit patterns, so a binary search over the bits finds it.
    """
    int_dtype = _BITS[dtype]

    def as_float(bits: int) -> torch.Tensor:
        return torch.tensor([bits], dtype=int_dtype).view(dtype)

    lo = int(torch.tensor([1.0], dtype=dtype).view(int_dtype))                    # exp(1) is finite
    hi = int(torch.tensor([torch.finfo(dtype).max], dtype=dtype).view(int_dtype))  # exp(max) is inf
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if torch.isinf(torch.exp(as_float(mid))).item():
            hi = mid
        else:
            lo = mid
    return float(as_float(hi).double())


def overflow_table() -> list[dict]:
    """Per dtype: the largest finite value, ln of it, the first overflowing logit and integer."""
    rows = []
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        fmax = float(torch.finfo(dt).max)
        first = first_overflowing_logit(dt)
        rows.append({"dtype": str(dt).replace("torch.", ""), "max": fmax, "ln_max": math.log(fmax),
                     "first_logit": first, "first_integer": math.ceil(first)})
    return rows


def print_overflow_table() -> None:
    print(f"{'dtype':<9} {'largest finite':>15} {'ln(largest)':>12} {'first x with exp(x)=inf':>24} "
          f"{'first integer':>14}")
    for r in overflow_table():
        print(f"{r['dtype']:<9} {r['max']:>15.6g} {r['ln_max']:>12.4f} {r['first_logit']:>24.7g} "
              f"{r['first_integer']:>14d}")


# --------------------------------------------------------------------------- variance, four ways

def _two_pass(x: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, dtype=x.dtype)
    d = x - mean[..., None]
    return (d * d).sum(axis=-1, dtype=x.dtype) / x.shape[-1]


def _one_pass(x: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, dtype=x.dtype)
    return (x * x).mean(axis=-1, dtype=x.dtype) - mean * mean


def _welford_sequential(x: np.ndarray) -> np.ndarray:
    # One value at a time, as one GPU thread folds the elements it owns.
    n = np.zeros(x.shape[:-1], x.dtype)
    mean = np.zeros(x.shape[:-1], x.dtype)
    m2 = np.zeros(x.shape[:-1], x.dtype)
    for j in range(x.shape[-1]):
        v = x[..., j]
        n += 1
        delta = v - mean
        mean += delta / n
        m2 += delta * (v - mean)
    return m2 / n


def _chunked_chan(x: np.ndarray, chunk: int = 256) -> np.ndarray:
    # Exact (two-pass) statistics per chunk, combined with Chan's pairwise formula.
    n = np.zeros(x.shape[:-1], x.dtype)
    mean = np.zeros(x.shape[:-1], x.dtype)
    m2 = np.zeros(x.shape[:-1], x.dtype)
    for s in range(0, x.shape[-1], chunk):
        c = x[..., s:s + chunk]
        nb = x.dtype.type(c.shape[-1])
        mb = c.mean(axis=-1, dtype=x.dtype)
        d = c - mb[..., None]
        m2b = (d * d).sum(axis=-1, dtype=x.dtype)
        tot = n + nb
        delta = mb - mean
        mean = mean + delta * (nb / tot)
        m2 = m2 + m2b + delta * delta * (n * nb / tot)
        n = tot
    return m2 / n


VARIANCE_METHODS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "two-pass": _two_pass,
    "one-pass E[x²]-E[x]²": _one_pass,
    "Welford (one value at a time)": _welford_sequential,
    "chunks of 256 + Chan merge": _chunked_chan,
}


def variance_error_experiment(ratios=None, n: int = 4096, trials: int = 6, seed: int = 0) -> dict:
    """Relative error of each variance method in float32 against the exact variance.

    For each ratio r = mean/std: `trials` rows of x = r + N(0, 1), rounded to float32; the exact
    (biased) variance of those rounded values is computed in float64. A variance of 0 or less is no estimate at all
    and counts as an infinite error (at mean/std = 1e5 one-pass returns 0 for most rows: its error of exactly 1 would
    make the median look like a recovery). Returns
    {'ratios': array, 'eps': float32 eps, 'errors': {method: median relative error per ratio}}.
    """
    ratios = np.logspace(0, 5, 11) if ratios is None else np.asarray(ratios, dtype=np.float64)
    rng = np.random.default_rng(seed)
    errors = {name: [] for name in VARIANCE_METHODS}
    with np.errstate(all="ignore"):
        for r in ratios:
            x = (r + rng.standard_normal((trials, n))).astype(np.float32)
            exact = x.astype(np.float64).var(axis=-1)
            for name, method in VARIANCE_METHODS.items():
                got = method(x).astype(np.float64)
                errors[name].append(float(np.median(np.where(got > 0, np.abs(got - exact) / exact, np.inf))))
    return {"ratios": ratios, "eps": float(np.finfo(np.float32).eps), "n": n,
            "errors": {k: np.array(v) for k, v in errors.items()}}


def plot_variance_error(result: dict | None = None):
    """Log-log plot of the relative error of each variance method against mean/std (float32)."""
    import matplotlib.pyplot as plt

    result = variance_error_experiment() if result is None else result
    r, eps = result["ratios"], result["eps"]
    floor, ceil = 1e-9, 10.0
    fig, ax = plt.subplots(figsize=(10.5, 5))
    markers = ["o", "s", "^", "D"]
    for (name, err), mk in zip(result["errors"].items(), markers):
        ax.plot(r, np.clip(err, floor, ceil), marker=mk, label=name)
    ax.plot(r, np.clip(eps * r ** 2, floor, ceil), "k--", lw=1, label="eps·(mean/std)²  (the one-pass prediction)")
    ax.axhline(eps, color="gray", lw=1, ls=":", label=f"float32 eps = {eps:.1e}")
    ax.axhline(1.0, color="red", lw=0.8, alpha=0.5)
    ax.text(r[0], 1.4, "100 % error: the answer is noise (often negative)", color="red", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(floor * 0.5, ceil * 2)
    ax.set_xlabel("mean / std of the data")
    ax.set_ylabel("relative error of the variance")
    ax.set_title(f"Variance of N = {result['n']} float32 values, std = 1 (median of several rows)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- the butterfly

def butterfly_partners(offsets=OFFSETS, lanes: int = WARP) -> list[list[int]]:
    """partners[r][lane]: the lane whose state `lane` receives in round r (lane ^ offset)."""
    return [[lane ^ off for lane in range(lanes)] for off in offsets]


def plot_butterfly(lanes: int = WARP, highlight: int = 0):
    """Which lane talks to which in each round of a xor butterfly; the tree that feeds one lane in colour."""
    import matplotlib.pyplot as plt

    offsets = [o for o in OFFSETS if o < lanes]
    rounds = len(offsets)
    # feeds[r]: the lanes whose round-r state flows into `highlight`'s final state
    feeds = [set() for _ in range(rounds + 1)]
    feeds[rounds] = {highlight}
    for r in range(rounds - 1, -1, -1):
        feeds[r] = {p for lane in feeds[r + 1] for p in (lane, lane ^ offsets[r])}
    fig, ax = plt.subplots(figsize=(13, 4.8))
    for r, off in enumerate(offsets):
        y0, y1 = rounds - r, rounds - r - 1
        for lane in range(lanes):
            partner = lane ^ off
            hot = lane in feeds[r + 1]
            ax.plot([lane, lane], [y0, y1], color="tab:red" if hot else "0.8", lw=1.6 if hot else 0.6, zorder=1)
            ax.plot([partner, lane], [y0, y1], color="tab:red" if hot else "0.7", lw=1.6 if hot else 0.6, zorder=1)
        ax.text(-1.2, y0 - 0.5, f"offset {off}\nlane ^ {off}", ha="right", va="center", fontsize=8)
    for r in range(rounds + 1):
        y = rounds - r
        ax.scatter(range(lanes), [y] * lanes, s=28, zorder=2,
                   c=["tab:red" if lane in feeds[r] else "tab:blue" for lane in range(lanes)])
    for lane in range(lanes):
        ax.text(lane, rounds + 0.25, str(lane), ha="center", fontsize=7)
    ax.text(lanes / 2 - 0.5, -0.55, f"after {rounds} rounds every lane holds the merge of all {lanes} lanes; "
            f"in red: the states that reach lane {highlight}", ha="center", fontsize=9)
    ax.set_xlim(-6, lanes)
    ax.set_ylim(-0.9, rounds + 0.6)
    ax.axis("off")
    ax.set_title("A warp's xor butterfly: in round r every lane merges its state with lane ^ offset "
                 "(__shfl_xor_sync)", fontsize=10)
    fig.tight_layout()
    return fig
