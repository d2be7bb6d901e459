"""Hidden cases of lesson 02 (stable reductions: softmax, online softmax, Welford, the butterfly).

Every case builds its inputs from a fixed seed, calls the student's function inside
`student_call()` (torch's own softmax / variance functions are recorded and score zero), checks
that the inputs were not modified, and compares with float64 ground truth computed here from the
same (already rounded) inputs. When a result is wrong, the message says what was expected, what
came back, and, where the error has a recognisable pattern, which mistake makes it.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from helpers.compare import CompareResult, Tolerance
from helpers.compare import compare as _compare
from helpers.reductions02 import EXACT, MEAN_TOL, PROB_TOL, STATE_TOL, VAR_TOL, acc_dtype, welford_ref, welford_tol

from ..harness import student_call
from ..registry import Case, Exercise, register

LESSON = "02_stable_reductions"
F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
INF = math.inf

SOFTMAX_FORBIDDEN = ("softmax", "log_softmax", "logsumexp", "logcumsumexp")
VARIANCE_FORBIDDEN = ("var_mean", "var", "std", "std_mean", "cov", "corrcoef",
                      # a norm layer computes the row variance inside: its mean/rstd, save_invstd, running_var
                      "layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm")
_INSTEAD = {
    "softmax": "write exp(x - max) / sum yourself",
    "log_softmax": "write exp(x - max) / sum yourself",
    "logsumexp": "keep the running (m, l) pair yourself: l is the sum of exp(x - m)",
    "logcumsumexp": "keep the running (m, l) pair yourself: l is the sum of exp(x - m)",
    "var_mean": "compute (count, mean, M2) chunk by chunk and merge them with welford_merge",
    "var": "compute (count, mean, M2) chunk by chunk and merge them with welford_merge",
    "std": "compute (count, mean, M2) chunk by chunk and merge them with welford_merge",
    "std_mean": "compute (count, mean, M2) chunk by chunk and merge them with welford_merge",
    "cov": "compute (count, mean, M2) chunk by chunk and merge them with welford_merge",
    "corrcoef": "compute (count, mean, M2) chunk by chunk and merge them with welford_merge",
}


def compare(actual, expected, tol, *, name="y", dtype=None) -> CompareResult:
    # compare()'s pattern hints speak of row-wise kernels (masks, eps, strides); here the hints are our own.
    return _compare(actual, expected, tol, name=name, dtype=dtype, kernel_hints=False)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(2000 + seed)


# ----------------------------------------------------------------------------- calling student code

def _call(fn: Callable, args: tuple, forbidden: tuple = (), instead: str | None = None):
    """Run fn(*args) in student_call; return (out, error message or None). instead: the advice for a forbidden
    call (by default the one for the function called)."""
    before = [a.clone() for a in _tensors(args)]
    with student_call(forbidden=forbidden) as spy:
        out = fn(*args)
    if spy.forbidden:
        name = spy.forbidden[0]
        short = name.rsplit(".", 1)[-1]   # an ATen op's name holds the function's: _softmax, _log_softmax
        # overlapping names share advice; another library's variance gets the variance's
        instead = instead or next((v for k, v in _INSTEAD.items() if k in short), _INSTEAD["var"])
        what = ("a normalization layer, which computes the variance this exercise rebuilds inside it (its "
                "mean/rstd, invstd or running_var)" if "norm" in short else "that is the function this exercise "
                "rebuilds")
        return out, f"called {name}: {what}; {instead} (scores zero)"
    for t, b in zip(_tensors(args), before):
        if not _same(t, b):
            return out, ("modified its input in place: return new tensors and leave the arguments as they were "
                         "(out-of-place ops such as `mean = mean + delta / n`, not `mean += ...`; note that "
                         "x.to(dtype) returns x itself when x already has that dtype, and a slice x[..., s:e] is a "
                         "view of x: an in-place op on either (c -= ..., c.sub_, c.exp_) writes into x)")
    return out, None


def _tensors(obj) -> list:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    return []


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def _as_tuple(out, n: int, names: str):
    """None when out is a tuple/list of n tensors, else a message."""
    if not isinstance(out, (tuple, list)) or len(out) != n or not all(isinstance(t, torch.Tensor) for t in out):
        got = "None" if out is None else (f"a {type(out).__name__} of {len(out)}" if isinstance(out, (tuple, list))
                                          else type(out).__name__)
        return f"must return a tuple {names} of {n} tensors, got {got}"
    return None


def _times(n: int, word: str = "time") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _short(dtype: torch.dtype) -> str:
    return {F16: "fp16", BF16: "bf16", F32: "fp32", F64: "fp64"}.get(dtype, str(dtype).replace("torch.", ""))


def _coarser(dtypes, acc: torch.dtype) -> list[str]:
    """The float dtypes among `dtypes` that keep fewer digits than `acc` (the dtype the states must be in)."""
    return sorted(_short(d) for d in dtypes if d.is_floating_point and torch.finfo(d).eps > torch.finfo(acc).eps)


def _finer(dtypes, acc: torch.dtype, merge: str, x_dtype: torch.dtype) -> str:
    """What to say when states reached `merge` in a float dtype wider than `acc` (fp64 for an fp32 input), else ''.
    The lesson keeps them in acc_dtype, as a kernel does: fp64 would hide the rounding it teaches to control."""
    wide = sorted(_short(d) for d in dtypes if d.is_floating_point and torch.finfo(d).eps < torch.finfo(acc).eps)
    if not wide:
        return ""
    return (f"right values, but the states reaching {merge} are {', '.join(wide)} for a {_short(x_dtype)} input: keep "
            f"them in {_short(acc)}, acc_dtype(x.dtype), as a GPU kernel does (fp64 runs at half fp32's rate on an "
            "H100 and 1/64 on most consumer GPUs, and would hide the rounding this lesson teaches you to control)")


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-4, atol: float = 0.0) -> bool:
    """a matches b (float64 view) everywhere, NaN nowhere: for recognising a mistake's pattern."""
    a, b = a.detach().double(), b.detach().double()
    if a.shape != b.shape or not torch.isfinite(a).all():
        return False
    return bool(((a - b).abs() <= atol + rtol * b.abs()).all())


# ============================================================================ stable_softmax

OVERFLOW_HINT = (" exp overflowed (exp(x) = inf once x > 88.72 in fp32/bf16, > 11.09 in fp16) or "
                 "underflowed to 0 in a whole row (0/0): subtract the max first, z = x - x.amax(dim, keepdim=True), "
                 "so every exp(z) <= 1 and the largest term is exactly 1. Subtracting a constant changes nothing: "
                 "exp(x-c)/sum exp(x-c) = exp(x)/sum exp(x).")


def softmax_ref(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(x.double(), dim=dim)


def _judge_probs(y, x: torch.Tensor, dim: int, hint: str = "", nan_hint: str | None = None,
                 near_hint: str = "", stream: bool = False, merges: tuple[int, int] | None = None
                 ) -> tuple[bool, str]:
    """Compare a softmax output with the float64 reference; messages for the common mistakes.

    hint goes with every failure. nan_hint, when given, replaces it where rows came out NaN/Inf or all zero, and
    only when the row holding the tensor's max came out finite (one max for the whole tensor). near_hint goes
    with finite results within 0.2 % of the reference everywhere. stream: y comes from online_softmax (a row of
    +inf means its state never left the identity, unless merges = (merge calls seen, chunks) says they happened)."""
    ref = softmax_ref(x, dim)
    r = compare(y, ref, PROB_TOL[x.dtype], name="y", dtype=x.dtype)
    if r:
        return True, r.message
    msg = r.message
    if isinstance(y, torch.Tensor) and y.shape == ref.shape and y.dtype == x.dtype:
        yd = y.detach().double()
        bad = ~torch.isfinite(yd) & torch.isfinite(ref)
        if nan_hint is not None and (bad.any() or bool((yd == 0).all(dim=dim).any())):
            rows_x = x.double().movedim(dim, -1).reshape(-1, x.shape[dim])
            rows_y = yd.movedim(dim, -1).reshape(-1, x.shape[dim])
            top = int(rows_x.amax(dim=-1).argmax())           # the row that holds the tensor's max
            # one max for the whole tensor: that row comes out right (all 0 there: NaN replaced, not this bug)
            hint = nan_hint if bool(torch.isfinite(rows_y[top]).all()) and abs(float(rows_y[top].sum()) - 1) < 1e-2 else ""
            broken = ~torch.isfinite(rows_y).all(-1) | (rows_y == 0).all(-1)
            if hint and bool((rows_x.amax(-1)[broken] < -87).all()) and bool((rows_x.amax(-1)[~broken] < rows_x.amax() - 88).any()):
                # a row far below the tensor's max came out right (no global max), and only rows below exp's
                # underflow broke: those rows subtracted no max (one clamped at 0?)
                hint = ("(only the rows whose max is below -87 broke: there exp(x) underflows to 0 unless the row's own "
                        "max is subtracted; subtract it in every row, negative maxima too: no clamp, no condition)")
        elif near_hint and not bad.any():
            big = ref > 1e-30
            if bool(torch.isfinite(yd).all()) and float(((yd - ref).abs()[big] / ref[big]).max()) < 2e-3:
                hint = f"{hint} {near_hint}".strip()
        if bad.any():
            i = int(bad.flatten().nonzero()[0])
            idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), tuple(y.shape)))
            why = OVERFLOW_HINT
            finite = torch.isfinite(x)
            # +inf even where exp(x) cannot overflow (x < 11): l = 0 and m = -inf, the identity state
            untouched = ((torch.isposinf(yd) | ~finite).all(dim=dim) & (finite & (x.double() < 11)).any(dim=dim))
            merged = merges is not None and merges[0] > 0 and merges[0] >= merges[1] - 1
            rows_x = x.double().movedim(dim, -1)
            below = torch.isnan(yd).movedim(dim, -1).any(-1) & finite.movedim(dim, -1).all(-1)
            if stream and untouched.any() and not merged:
                row = tuple(int(v) for v in untouched.nonzero()[0])
                why = (f" Row {row} is +inf wherever its input is finite: its state is still the identity "
                       "(m, l) = (-inf, 0), so exp(x - m) = inf and l = 0: no chunk was merged into it. Loop over "
                       "range(0, N, chunk): the last chunk may be shorter, and chunk may exceed N.")
            elif stream and untouched.any():
                row = tuple(int(v) for v in untouched.nonzero()[0])
                why = (f" Row {row} is +inf wherever its input is finite: l came out 0 there although "
                       f"online_softmax_merge was called {_times(merges[0])} for {_times(merges[1], 'chunk')}. Take each "
                       "chunk's l_c = sum(exp(c - m_c)) against the chunk's own max m_c (exp(c) alone underflows "
                       "to 0 for c < -103), and divide by the final state's l with the final state's m: "
                       "y = exp(x - m) / l.")
            elif stream and (inf_among_finite := _inf_among_finite(yd, x, dim)) is not None:
                row, col = inf_among_finite
                why = (f" In row {row} y is +inf at column {col} (x = {float(x.double()[row + (col,)]):.6g}) beside "
                       "finite outputs: l is finite and non-zero there, so exp(x - m) overflowed, the final m far "
                       "below this x: did any chunk hold this column? Every column must be in one chunk, "
                       "x[..., s:s+chunk] for s in range(0, N, chunk), and the merge keeps the larger max.")
            elif stream and below.any() and bool((rows_x.amax(-1)[below] < -87).all()):
                row = tuple(int(v) for v in below.nonzero()[0])
                why = (f" Row {row} (max {float(rows_x.amax(-1)[below][0]):.6g}) is NaN: its m stayed above the "
                       "row's max, as a stream started from (m, l) = (0, 0) does, so every exp(x - m) underflowed "
                       "to 0 and l = 0. Start from the identity (-inf, 0), softmax_identity(...), not zeros.")
            elif not stream and torch.isneginf(x).any() and not bool(torch.isneginf(x).all(dim=dim).any()):
                why = (" The input has -inf entries (masked positions), but no row is all -inf, so every row's max "
                       "is finite: NaN here comes from x - c with c = -inf (the min or the mean of a row that holds "
                       "-inf?). Subtract the row's max, x.amax(dim, keepdim=True): exp(-inf - max) = 0.")
            elif torch.isneginf(x).any():
                why = (" The input has -inf entries (masked positions): wherever a max is taken over values that "
                       "are all -inf, x - max is -inf - (-inf) = nan; use 0 in place of such a max (torch.where).")
            return False, (f"y: {int(bad.sum())} NaN/Inf where the reference is finite (first at {idx}: "
                           f"{yd.flatten()[i].item()}, input there {x.double().flatten()[i].item():.6g}).{why}"
                           + (f" {hint}" if hint else ""))
        sums = yd.sum(dim=dim)
        worst = float((sums - 1).abs().max())
        if bool((sums == 0).any()):
            hint = ""
            msg += (f"; some rows along dim={dim} came out all 0: exp overflowed or underflowed there and the "
                    "NaN/Inf was replaced (nan_to_num, or a where)? Subtract the row's max first, "
                    "z = x - x.amax(dim, keepdim=True): then no exp overflows and the largest is exactly 1")
        elif worst > 1e-2:
            total = float(sums.flatten()[int((sums - 1).abs().flatten().argmax())])
            msg += (f"; the outputs along dim={dim} sum to {total:.4g}, not 1: " + (
                "the normaliser does not cover the whole row (a dropped chunk, the sum taken along another dim"
                f"{', or a wrong merge' if stream else ''}?)" if total > 1 else
                "the normaliser is larger than the row's own sum: it adds more than the row (a sum over the whole "
                f"tensor, e.sum() without dim, or along another dim{', or a wrong merge' if stream else ''}?)"))
    if y is not None and isinstance(y, torch.Tensor) and y.dtype != x.dtype:
        msg += " (compute in fp32, then return y.to(x.dtype))"
    return False, msg + (f" {hint}" if hint else "")


def _inf_among_finite(yd: torch.Tensor, x: torch.Tensor, dim: int):
    """(row index, column) of a +inf output at a finite x in a row that also holds finite non-zero outputs, or
    None. In a stream, y = exp(x - m) / l: finite non-zero outputs show l finite and non-zero, so a +inf is
    exp(x - m) overflowing, m more than 88 below x: a column that no chunk state held."""
    ys, xs = yd.movedim(dim, -1), x.double().movedim(dim, -1)
    pos = torch.isposinf(ys) & torch.isfinite(xs)
    rows = pos.any(-1) & (torch.isfinite(ys) & (ys > 0)).any(-1)
    if not bool(rows.any()):
        return None
    row = tuple(int(v) for v in rows.nonzero()[0])
    col = int(pos[row].nonzero()[0])
    return row, col


@dataclass
class SoftmaxSpec:
    name: str
    shape: tuple
    dtype: torch.dtype = F32
    scale: float = 1.0
    offset: float = 0.0
    dim: int = -1
    kind: str = "randn"        # randn | equal | masked | rows_apart | causal
    chunk: int = 128           # online_softmax only
    hint: str = ""
    hint_with_nan: bool = False  # online_softmax: the hint goes only with a NaN in y (it explains one)
    nan_hint: str | None = None  # replaces hint where rows come out NaN/Inf or all zero (see _judge_probs)
    near_hint: str = ""         # added where the result is finite and within 0.2 % everywhere
    count_merges: bool = False  # online_softmax only: check that the stream merges chunk states
    bad: str | None = None      # int_dtype | chunk0
    seed: int = 0


def softmax_input(s: SoftmaxSpec) -> torch.Tensor:
    g = _gen(s.seed)
    x = torch.randn(s.shape, generator=g, dtype=F64) * s.scale + s.offset
    if s.kind == "equal":
        x = torch.full(s.shape, 3.25 + s.offset, dtype=F64)
    elif s.kind == "masked":      # some entries -inf (masked-out positions), never a whole row
        drop = torch.rand(s.shape, generator=g) < 0.3
        drop.reshape(-1, s.shape[-1])[:, 0] = False
        x = x.masked_fill(drop, -INF)
    elif s.kind == "rows_apart":  # rows on very different scales: +1e4, 0, -1e4 ...
        shifts = torch.tensor([1e4, 0.0, -1e4, 5e3, -5e3, 300.0], dtype=F64)[: s.shape[0]]
        x = x + shifts[:, None]
    elif s.kind == "causal":      # row i sees only its first i+1 columns: whole chunks are -inf
        rows, cols = s.shape[-2], s.shape[-1]
        seen = torch.arange(cols)[None, :] <= (torch.arange(rows)[:, None] * cols) // rows
        x = x.masked_fill(~seen, -INF)
    return x.to(s.dtype)


def _bad_call(fn: Callable, args: tuple, sanity: Callable[[], tuple[bool, str]], expect: str,
              valid: str) -> tuple[bool, str]:
    """A bad call must raise; first a valid one (`valid` says which, for the message) must work, so that an
    untouched stub does not earn the points of the given validation."""
    ok, msg = sanity()
    if not ok:
        return False, f"a valid call ({valid}) failed first: {msg}"
    try:
        with student_call():
            fn(*args)
    except (ValueError, TypeError) as e:
        return True, f"ok: {type(e).__name__}: {str(e)[:90]}"
    except Exception as e:
        return False, (f"raised {type(e).__name__} from deep inside; validate first and raise a clear "
                       f"ValueError/TypeError ({expect})")
    return False, f"accepted bad input without an error: {expect}"


def _softmax_case(s: SoftmaxSpec) -> Case:
    def run(ns):
        fn = ns["stable_softmax"]
        if s.bad:
            good = SoftmaxSpec("sanity", (3, 9), seed=s.seed)
            return _bad_call(fn, (torch.arange(12).reshape(3, 4), -1), lambda: _softmax_run(fn, good),
                             "the given check_float_tensor(x) rejects integer tensors", "x of 3x9, dim -1")
        return _softmax_run(fn, s)
    return Case(s.name, run)


def _softmax_run(fn, s: SoftmaxSpec) -> tuple[bool, str]:
    x = softmax_input(s)
    y, err = _call(fn, (x, s.dim), SOFTMAX_FORBIDDEN, instead=_INSTEAD["softmax"])
    if err:
        return False, err
    return _judge_probs(y, x, s.dim, s.hint, s.nan_hint, s.near_hint)


GLOBAL_MAX_HINT = "(each row needs its own max: x.amax(dim, keepdim=True), not one max of the whole tensor)"
ROWS_APART_HINT = ("(at |x| ~ 1e4 fp32 values lie 1e-3 apart: a logsumexp rounded there is off by up to 5e-4, and "
                   "exp(x - logsumexp) carries that as a relative error of 5e-4. Subtract the row max (x - max is "
                   "exact there), take exp, then divide by the sum)")

SOFTMAX_SPECS = [
    SoftmaxSpec("fp32 (4, 10), dim=-1", (4, 10), seed=1),
    SoftmaxSpec("fp32 logits of +-1e4 (naive exp overflows)", (6, 50), scale=1e4, seed=2),
    SoftmaxSpec("fp16 logits of +-1e4 (output fp16)", (6, 50), F16, scale=1e4, seed=3),
    SoftmaxSpec("fp16 logits near -1e4 (naive exp underflows: 0/0)", (3, 40), F16, scale=2.0, offset=-1e4, seed=4),
    SoftmaxSpec("bf16 logits of +-100 (output bf16)", (5, 300), BF16, scale=100.0, seed=5),
    SoftmaxSpec("fp16, N=4096, |x|~4", (3, 4096), F16, scale=4.0, seed=6,
                hint=("(fp16 keeps 11 bits: convert x to fp32 first, before subtracting the max; exp and the "
                      "4096-term sum in fp32 too; cast only the result back)")),
    SoftmaxSpec("N=1: every output is 1", (5, 1), scale=50.0, seed=7),
    SoftmaxSpec("1-D x of 30 logits, dim=-1", (30,), scale=5.0, seed=16,
                hint="(a 1-D x is one row: x.shape[:-1] is (), nothing to flatten)"),
    SoftmaxSpec("rows of equal values: uniform 1/N", (4, 37), kind="equal", seed=8),
    SoftmaxSpec("rows on very different scales (+1e4, 0, -1e4)", (6, 20), kind="rows_apart", seed=9,
                nan_hint=GLOBAL_MAX_HINT, near_hint=ROWS_APART_HINT),
    SoftmaxSpec("dim=0 of a (7, 5) tensor", (7, 5), dim=0, scale=30.0, seed=10,
                hint="(softmax along dim=0: each column sums to 1; use the dim argument for max and sum)"),
    SoftmaxSpec("dim=1 of a 3-D (3, 6, 4) tensor", (3, 6, 4), dim=1, scale=5.0, seed=11,
                hint="(softmax along dim=1: reduce over that dim, keepdim=True to broadcast back)"),
    SoftmaxSpec("dim=-2 of a 3-D (2, 7, 3) tensor", (2, 7, 3), dim=-2, scale=5.0, seed=17,
                hint="(dim=-2 is the second-to-last dim, as in torch.softmax: pass dim itself to max and sum)"),
    SoftmaxSpec("masked entries (-inf) in every row", (5, 33), kind="masked", scale=3.0, seed=12,
                hint="(exp(-inf - max) = 0: a masked entry gets probability 0)"),
    SoftmaxSpec("bf16, N=1000, |x|~2 (compute in fp32)", (4, 1000), BF16, scale=2.0, seed=15,
                hint=("(bf16 keeps 8 significant bits: convert x to fp32 first, before subtracting the max; exp, "
                      "sum and division in fp32 too; cast only the result back)")),
    SoftmaxSpec("fp64 input: computed and returned in fp64", (4, 300), F64, scale=20.0, seed=13,
                hint="(a float64 input is computed in float64: fp32 loses the last 9 digits)"),
    SoftmaxSpec("bad input: integer logits raise TypeError", (3, 4), bad="int_dtype", seed=14),
]

# a 1-D x (one row) given to code that assumes rows and columns: flatten(0, -2), x[:, s:e], dim=-2
ONE_D_HINT = ("expected to be in range of [-1, 0]",
              ": x is 1-D here, one row (x.shape[:-1] is ()): it has no dim -2, and flatten(0, -2) or x[:, s:e] "
              "need two dims. Work along the last dim, x[..., s:e] and reductions over dim=-1, which holds for any "
              "number of leading dims, none included")

register(Exercise(id="stable_softmax", lesson=LESSON, title="Stable softmax: subtract the max",
                  functions=("stable_softmax",), cases=[_softmax_case(s) for s in SOFTMAX_SPECS],
                  error_hints=(ONE_D_HINT,)))


# ============================================================================ online softmax

def sm_state_ref(data: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, l) of the values along the last dim, in float64; the identity (-inf, 0) for no values."""
    d = data.double()
    if d.shape[-1] == 0:
        return (torch.full(d.shape[:-1], -INF, dtype=F64), torch.zeros(d.shape[:-1], dtype=F64))
    m = d.amax(dim=-1)
    m_safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(d - m_safe.unsqueeze(-1)).sum(dim=-1)


def _sm_merge_ref(a, b):
    (ma, la), (mb, lb) = a, b
    m = torch.maximum(ma, mb)
    ms = torch.where(torch.isneginf(m), 0.0, m)
    return m, la * torch.exp(ma - ms) + lb * torch.exp(mb - ms)


L_FORMULA = "l = l_a*exp(m_a - m) + l_b*exp(m_b - m) with m = max(m_a, m_b)"
IDENTITY_HINT = (" The identity state is (m, l) = (-inf, 0); with both maxima -inf, exp(m_a - m) = exp(-inf - (-inf)) "
                 "= exp(nan): take exp(m_a - m_safe) with m_safe = 0 where m = -inf (torch.where), so l = 0*0 = 0.")


def _judge_sm_state(out, ref, dtype, inputs=None) -> tuple[bool, str]:
    bad = _as_tuple(out, 2, "(m, l)")
    if bad:
        return False, bad
    m, l = out
    tol = STATE_TOL[dtype]
    rm = compare(m, ref[0], tol, name="m", dtype=dtype)
    if not rm:
        return False, rm.message + " (m is the max of every value merged so far: m = max(m_a, m_b))"
    rl = compare(l, ref[1], tol, name="l", dtype=dtype)
    if rl:
        return True, f"ok (m exact, l {rl.message.split('(', 1)[-1].rstrip(')')})"
    msg = rl.message
    if not torch.isfinite(l).all():
        msg += IDENTITY_HINT if torch.isneginf(ref[0]).any() else f" ({L_FORMULA})"
    elif inputs is not None and _close(l, inputs[0][1] + inputs[1][1], 1e-6):
        msg += ("; l came out as l_a + l_b: neither l was rescaled, or only the one whose max is the larger (its "
                "factor is exp(0) = 1). Each l is a sum of exp(x - its own max), so both must be rescaled to the new "
                f"max before adding: {L_FORMULA}")
    else:
        msg += f" ({L_FORMULA})"
    return False, msg


@dataclass
class MergeSpec:
    name: str
    kind: str                  # data | identity_left | identity_right | identity_both | fold
    dtype: torch.dtype = F32
    sizes: tuple = (5, 9)      # values behind a and b (per row)
    rows: int = 4
    scale: float = 3.0
    shift: float = 0.0         # added to b's data
    seed: int = 0


def _merge_inputs(s: MergeSpec):
    g = _gen(s.seed)
    da = torch.randn(s.rows, s.sizes[0], generator=g, dtype=F64) * s.scale
    db = torch.randn(s.rows, s.sizes[1], generator=g, dtype=F64) * s.scale + s.shift
    da, db = da.to(s.dtype).double(), db.to(s.dtype).double()   # the values as the dtype holds them
    if s.kind in ("identity_left", "identity_both"):
        da = da[:, :0]
    if s.kind in ("identity_right", "identity_both"):
        db = db[:, :0]
    return da, db


def _merge_case(s: MergeSpec) -> Case:
    def run(ns):
        fn = ns["online_softmax_merge"]
        if s.kind == "fold":
            return _fold_run(fn, s)
        da, db = _merge_inputs(s)
        a = tuple(t.to(s.dtype) for t in sm_state_ref(da))
        b = tuple(t.to(s.dtype) for t in sm_state_ref(db))
        out, err = _call(fn, (a, b), SOFTMAX_FORBIDDEN)
        if err:
            return False, err
        return _judge_sm_state(out, sm_state_ref(torch.cat([da, db], dim=-1)), s.dtype, (a, b))
    return Case(s.name, run)


def _fold_run(fn, s: MergeSpec) -> tuple[bool, str]:
    """Merge 12 chunk states (some empty) sequentially in a shuffled order and as a tree."""
    g = _gen(s.seed)
    data = (torch.randn(s.rows, 120, generator=g, dtype=F64) * s.scale).to(s.dtype).double()
    cuts = [0, 7, 7, 20, 33, 60, 61, 61, 80, 99, 100, 119, 120]   # two empty chunks
    states = [tuple(t.to(s.dtype) for t in sm_state_ref(data[:, a:b])) for a, b in zip(cuts, cuts[1:])]
    ref = sm_state_ref(data)
    order = torch.randperm(len(states), generator=g).tolist()
    return _fold_orders(fn, states, order, SOFTMAX_FORBIDDEN, 2, "(m, l)",
                        lambda st: _judge_sm_state(st, ref, s.dtype))


def _fold_orders(fn, states, order, forbidden, width, names, judge) -> tuple[bool, str]:
    """Merge partial states left to right in a shuffled `order`, then as a balanced tree; judge both."""
    acc = states[order[0]]
    for i in order[1:]:
        acc, err = _call(fn, (acc, states[i]), forbidden)
        if err:
            return False, err
        bad = _as_tuple(acc, width, names)
        if bad:
            return False, bad
    ok, msg = judge(acc)
    if not ok:
        return False, f"sequential merges in the order {order}: {msg}"
    level = list(states)
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            st, err = _call(fn, (level[i], level[i + 1]), forbidden)
            if err:
                return False, err
            nxt.append(st)
        level = nxt + ([level[-1]] if len(level) % 2 else [])
    ok, msg = judge(level[0])
    return (True, "ok: shuffled and tree orders agree with the whole row") if ok else (False, f"tree order: {msg}")


MERGE_SPECS = [
    MergeSpec("merge: two states, fp32", "data", seed=20),
    MergeSpec("merge: maxima 1e4 apart (exp(-1e4) = 0)", "data", shift=1e4, seed=21),
    MergeSpec("merge: b's max below a's (rescale b)", "data", shift=-6.0, sizes=(3, 30), seed=22),
    MergeSpec("merge: identity (-inf, 0) on the left", "identity_left", seed=23),
    MergeSpec("merge: identity (-inf, 0) on the right", "identity_right", seed=24),
    MergeSpec("merge: identity with identity -> identity", "identity_both", seed=25),
    MergeSpec("merge: fp64 states stay fp64", "data", F64, shift=2.0, seed=26),
    MergeSpec("merge: 12 chunks in shuffled and tree orders", "fold", seed=27),
]


def _stream_case(s: SoftmaxSpec) -> Case:
    def run(ns):
        fn = ns["online_softmax"]
        if s.bad:
            good = SoftmaxSpec("sanity", (3, 9), chunk=4, seed=s.seed)
            return _bad_call(fn, (torch.randn(3, 9), 0), lambda: _stream_run(ns, fn, good),
                             "the given check_rows(x, chunk) rejects chunk < 1", "x of 3x9, chunk 4")
        return _stream_run(ns, fn, s)
    return Case(s.name, run)


@contextlib.contextmanager
def _merges_seen(ns: dict, name: str, shift=None, rows: tuple | None = None):
    """While the student's stream runs, count the calls of their merge function `name` (looked up in ns by the
    stream) and the dtypes of the states it is given; yields (calls, dtypes, wrong): calls holds each call's two
    states (copies), wrong the number of the first call whose result broke the merge's rule on the states it was
    given (at most one entry; _breaks_merge_rule). shift(state) -> state, if given,
    alters what each merge returns (to see whether the result depends on the merges at all). rows: the shape of
    a state's tensors, x.shape[:-1]; a state holding more entries than that is an error named here (the merge
    would fail with a broadcast error that says nothing about the state)."""
    calls, dtypes, wrong = [], set(), []
    merge = ns.get(name)
    if callable(merge):
        def counting(a, b):
            calls.append(tuple(tuple(torch.as_tensor(t).detach().clone() for t in st)
                               if isinstance(st, (tuple, list)) and all(isinstance(t, (torch.Tensor, int, float)) for t in st)
                               else tuple(t.detach().clone() for t in _tensors(st)) for st in (a, b)))
            # a Welford count of whole numbers is exact in any dtype, and the merge promotes it to the mean's:
            # only the dtypes that carry digits are judged (an fp32 or int64 count beside fp64 states is fine)
            dtypes.update(t.dtype for st in (a, b) for i, t in enumerate(_tensors(st))
                          if not (name == "welford_merge" and i == 0 and bool((t == t.round()).all())))
            big = [t for t in _tensors((a, b)) if rows is not None and t.numel() > math.prod(rows)]
            if big:
                raise ValueError(f"a state given to {name} holds a tensor of shape {tuple(big[0].shape)}: a state "
                                 f"has one entry per row, shape x.shape[:-1] = {tuple(rows)} (start from "
                                 f"{'softmax_identity' if 'softmax' in name else 'welford_empty'}(x.shape[:-1], ...),"
                                 f" and reduce each chunk over its last dim)")
            judged = [(i, t) for st in (a, b) for i, t in enumerate(_tensors(st))
                      if not (name == "welford_merge" and i == 0)]      # a count may be 0-dim or a number
            empty = [t for _, t in judged if rows is not None and t.numel() == 0 < math.prod(rows)]
            if empty:
                raise ValueError(f"a state given to {name} holds an empty tensor of shape {tuple(empty[0].shape)}, "
                                 f"for rows of shape x.shape[:-1] = {tuple(rows)}: its chunk had no rows. Slice the "
                                 "chunks along the last dim, x[..., s:s+chunk] (x[:, s:s+chunk] slices dim 1, the rows "
                                 "of a 3-D x)")
            pairs = {}
            for i, t in judged:
                pairs.setdefault(i, []).append(tuple(t.shape))
            for i, (sa, sb) in ((i, p) for i, p in pairs.items() if len(p) == 2 and p[0] != p[1]):
                try:
                    fits = math.prod(torch.broadcast_shapes(sa, sb)) <= math.prod(rows or ())
                except RuntimeError:
                    fits = False
                if rows is not None and not fits:
                    raise ValueError(f"the two states given to {name} have tensors of shapes {sa} and {sb}: both "
                                     f"states need one shape, x.shape[:-1] = {tuple(rows)} (start from "
                                     f"{'softmax_identity' if 'softmax' in name else 'welford_empty'}(x.shape[:-1], ...) "
                                     "and reduce each chunk without keepdim, or keep the trailing 1 in both)")
            out = merge(a, b)
            if shift is None and not wrong and _breaks_merge_rule(name, a, b, out):   # the merge, on what it got
                wrong.append(len(calls))
            return shift(out) if shift is not None else out
        ns[name] = counting
    try:
        yield calls, dtypes, wrong
    finally:
        if callable(merge):
            ns[name] = merge


def _breaks_merge_rule(name: str, a, b, out) -> bool:
    """Whether the student's merge `name` returned `out` for states a and b against the rule (computed in
    float64 on the very states it was given; within a few ulps of out's dtype). False where it cannot tell."""
    rule = {"online_softmax_merge": _sm_merge_ref, "welford_merge": _welford_merge_ref}.get(name)
    try:
        ins = [tuple(t.double() for t in _tensors(st)) for st in (a, b)]
        ref, got = rule(*ins), _tensors(out)
        if len(got) != len(ref):
            return False
        for i, (o, r) in enumerate(zip(got, ref)):
            rtol = max(1e-4, 8 * torch.finfo(o.dtype).eps) if o.is_floating_point() else 0.0
            # an l that underflows in o's dtype (a row far below the merged max): 0 there, 1e-139 in float64
            floor = torch.finfo(o.dtype).tiny if o.is_floating_point() else 0.0
            scale = r.abs()
            if name == "welford_merge" and i == 1:      # a mean between two means of opposite sign cancels
                scale = scale + ins[0][1].abs() + ins[1][1].abs()
            o, fin = o.double(), torch.isfinite(r)
            if not (torch.equal(torch.isfinite(o), fin) and bool(((o - r).abs() <= rtol * scale + floor)[fin].all())):
                return True
    except Exception:    # shapes the rule cannot take: the stream's own checks say more
        return False
    return False


def _wrong_merge_first(name: str, state: str, whose: str, call: int, msg: str) -> str:
    """A stream's failure told as its merge's: the merge `name` broke its rule inside the stream, at that call."""
    return (f"your {name} returned a wrong {state} inside the stream (call {call}, checked against the rule on the "
            f"very states it was given): fix the merge first, {whose} say how. The stream's result: {msg}")


def _a_state_holds(calls: list, k: int, value: torch.Tensor, same) -> bool:
    """Whether the k-th tensor of a state given to the merge (calls from _merges_seen) holds `value`:
    same(tensor, value), the tensor reshaped and cast to value's."""
    return any(t.numel() == value.numel() and same(t.reshape(value.shape).to(value.dtype), value)
               for a, b in calls for t in (a[k], b[k]))


CHUNK_IS = ("a chunk is `chunk` consecutive columns, x[..., s:s+chunk] for s in range(0, N, chunk) "
            "(torch.chunk(x, chunk) makes `chunk` pieces instead)")


def _more_merges_than_chunks(merge: str, calls: int, chunks: int, chunk: int, N: int) -> str:
    """A stream that merged more states than a row has chunks: `chunk` read as a number of pieces (torch.chunk)."""
    return (f"{merge} was called {_times(calls)} for {_times(chunks, 'chunk')} of {chunk} columns (N = {N}): a chunk is `chunk` "
            "consecutive columns, x[..., s:s+chunk] for s in range(0, N, chunk) (torch.split(x, chunk, dim=-1)); "
            "torch.chunk(x, chunk) makes `chunk` pieces instead")


def _one_m_for_all_rows(calls: list, x: torch.Tensor, chunk: int, acc) -> str:
    """'' or what to say when the first chunk state given to the merge holds one m for all rows (c.amax())."""
    first_m = calls[0][1][0] if calls and len(calls[0][1]) == 2 else None
    if (first_m is None or first_m.numel() < 2 or not bool((first_m == first_m.flatten()[0]).all())
            or not bool((x[..., :chunk].to(acc).amax(-1) != first_m.reshape(x.shape[:-1])).any())):
        return ""
    return (f"the first chunk's state has one m for every row, {float(first_m.flatten()[0]):.6g}: a max over all rows "
            "of the chunk, c.amax() without a dim; each row needs its own, m_c = c.amax(-1)")


def _stream_run(ns, fn, s: SoftmaxSpec) -> tuple[bool, str]:
    x = softmax_input(s)
    with _merges_seen(ns, "online_softmax_merge", rows=tuple(x.shape[:-1])) as (calls, dtypes, bad_merge):
        y, err = _call(fn, (x, s.chunk), SOFTMAX_FORBIDDEN)
    if err:
        return False, err
    merges = (len(calls), math.ceil(x.shape[-1] / s.chunk))
    hint = s.hint if not s.hint_with_nan or (isinstance(y, torch.Tensor) and bool(torch.isnan(y).any())) else ""
    ok, msg = _judge_probs(y, x, -1, hint, s.nan_hint, s.near_hint, stream=True, merges=merges)
    if not ok and bad_merge:
        return False, _wrong_merge_first("online_softmax_merge", "(m, l)", "its own cases", bad_merge[0], msg)
    acc = acc_dtype(x.dtype)
    low = _coarser(dtypes, acc)
    why_low = (f"the states reaching online_softmax_merge are {', '.join(low)}: fold chunk states in "
               f"{_short(acc)}: c = x[..., s:s+chunk].to(acc), then m_c and l_c of c")
    if not ok:
        one_m = _one_m_for_all_rows(calls, x, s.chunk, acc)
        if one_m:
            return False, f"{msg} ({one_m})"
        return False, msg + (f" ({why_low})" if low else "")
    if s.count_merges:
        chunks = math.ceil(x.shape[-1] / s.chunk)
        if len(calls) > chunks:
            return False, _more_merges_than_chunks("online_softmax_merge", len(calls), chunks, s.chunk, x.shape[-1])
        wide = _finer(dtypes, acc, "online_softmax_merge", x.dtype)
        if wide:
            return False, wide
        if len(calls) < chunks - 1:
            return False, (f"online_softmax_merge was called {_times(len(calls))} for {_times(chunks, 'chunk')}: stream "
                           "over the row once, folding each chunk's (m, l) into the running state with "
                           f"online_softmax_merge. {CHUNK_IS}")
        own = x[..., :s.chunk].to(acc).amax(-1)             # chunk 0's own max
        lower = own < x.to(acc).amax(-1)
    if s.count_merges and calls:      # with no merge (one chunk, started from its state) there is nothing to probe
        if bool(lower.any()) and not _a_state_holds(calls, 0, own, lambda t, v: torch.equal(t[lower], v[lower])):
            one_m = _one_m_for_all_rows(calls, x, s.chunk, acc)
            return False, ("online_softmax_merge was called, but no state it received holds the first chunk's own "
                           "max: each chunk's state comes from that chunk alone, m_c = c.amax(-1) and "
                           "l_c = sum(exp(c - m_c)); " + (one_m or "a max of the whole row taken first is a second pass "
                                                                    "over it"))
        with _merges_seen(ns, "online_softmax_merge", shift=lambda st: (st[0], st[1] * 2)):
            y2, err2 = _call(fn, (x, s.chunk), SOFTMAX_FORBIDDEN)
        if not err2 and isinstance(y2, torch.Tensor) and _close(y2, y, 1e-3, 1e-6):
            return False, ("online_softmax_merge was called, but the output does not come from its final state "
                           "(with every merged l doubled, the output did not move): write exp(x - m) / l with the "
                           "m and l of the merged state, not a separate max and sum over the row")
        # (m + 1, l / e) is the same state written against another max: exp(x - m) / l does not move with it
        with _merges_seen(ns, "online_softmax_merge", shift=lambda st: (st[0] + 1, st[1] / math.e)):
            y3, err3 = _call(fn, (x, s.chunk), SOFTMAX_FORBIDDEN)
        if not err3 and isinstance(y3, torch.Tensor) and not _close(y3, y, 1e-3, 1e-6):
            return False, ("the output does not come from the merged state's m: with every merged state written "
                           "against a max 1 higher, (m + 1, l / e), which is the same state, the output moved. "
                           "y = exp(x - m) / l with the final state's m and l, not a second max over the row")
    if low:
        return False, why_low
    return True, msg


STREAM_SPECS = [
    SoftmaxSpec("stream: chunk=1 (one value at a time), N=37", (3, 37), scale=5.0, chunk=1, seed=30,
                count_merges=True),
    SoftmaxSpec("stream: chunk=100 > N=13 (one chunk)", (4, 13), scale=5.0, chunk=100, seed=31, count_merges=True),
    SoftmaxSpec("stream: N=1000, chunk=64 (a partial last chunk)", (3, 1000), scale=4.0, chunk=64, seed=32,
                count_merges=True),
    SoftmaxSpec("stream: N=1", (6, 1), scale=100.0, chunk=8, seed=33),
    SoftmaxSpec("stream: 1-D x (N=70), chunk=16: the state is 0-dim", (70,), scale=5.0, chunk=16, seed=25),
    SoftmaxSpec("stream: fp32 logits of +-1e4", (4, 300), scale=1e4, chunk=32, seed=34),
    SoftmaxSpec("stream: fp16 logits of +-1e4 (output fp16)", (4, 300), F16, scale=1e4, chunk=50, seed=35),
    SoftmaxSpec("stream: causal mask (whole chunks of -inf)", (8, 64), kind="causal", scale=3.0, chunk=8, seed=36,
                hint_with_nan=True,
                hint=("(a chunk whose values are all -inf, as under a causal mask, has the identity state (-inf, 0): "
                      "exp(x - m) with m = -inf is exp(nan); use 0 in place of m there)")),
    SoftmaxSpec("stream: 3-D (2, 3, 50), chunk=16, bf16", (2, 3, 50), BF16, scale=20.0, chunk=16, seed=37),
    SoftmaxSpec("stream: rows of equal values", (3, 40), kind="equal", chunk=7, seed=38),
    SoftmaxSpec("stream: fp64 input, computed in fp64, 3-D (2, 2, 300)", (2, 2, 300), F64, scale=20.0, chunk=64,
                seed=28),
    SoftmaxSpec("stream: bf16, N=1000, |x|~2, chunk=500 (states in fp32)", (4, 1000), BF16, scale=2.0, chunk=500,
                seed=41, hint=("(bf16 keeps 8 significant bits: each chunk's l_c = sum(exp(c - m_c)) is computed and "
                               "kept in fp32, as the merged state, and y = exp(x - m) / l too; cast only y back)")),
    SoftmaxSpec("stream: rows on very different scales (+1e4, 0, -1e4)", (6, 200), kind="rows_apart", chunk=32,
                seed=29, near_hint=ROWS_APART_HINT),
]

register(Exercise(
    id="online_softmax", lesson=LESSON, title="Online softmax: the (m, l) merge and one streaming pass",
    functions=("online_softmax_merge", "online_softmax"),
    cases=[_merge_case(s) for s in MERGE_SPECS] + [_stream_case(s) for s in STREAM_SPECS]
    + [_stream_case(SoftmaxSpec("bad input: chunk=0 raises ValueError", (3, 9), bad="chunk0", seed=39))],
    error_hints=(ONE_D_HINT,)))


# ============================================================================ Welford

UPDATE_HINTS = {
    "count": "count = count + 1",
    "mean": "mean = mean + delta / count, with delta = x - mean and the NEW count (so the first value gives mean = x)",
    "M2": ("M2 = M2 + delta * (x - mean_new): one factor measured before the mean moves, one after "
           "(delta*delta overcounts by count/(count-1))"),
}
MERGE_HINTS = {
    "count": "n = n_a + n_b",
    "mean": "mean = mean_a + delta * n_b / n, with delta = mean_b - mean_a (b's share pulls the mean towards b)",
    "M2": "M2 = M2_a + M2_b + delta^2 * n_a * n_b / n (the last term: the spread between the two means)",
}


def _judge_welford(out, ref, dtype, data, hints) -> tuple[bool, str]:
    bad = _as_tuple(out, 3, "(count, mean, M2)")
    if bad:
        return False, bad
    tol_mean, tol_m2 = welford_tol(dtype, data)
    empty = bool((ref[0] == 0).any())
    for name, got, want, tol in zip(("count", "mean", "M2"), out, ref, (EXACT, tol_mean, tol_m2)):
        r = compare(got, want, tol, name=name, dtype=dtype)
        if not r:
            extra = ""
            if empty and not torch.isfinite(got.detach().double()).all():
                extra = (". An empty state (count 0) is allowed on either side: n = 0 makes n_b / n = 0/0; "
                         "divide by n.clamp_min(1) (n_b = 0 whenever n = 0, so the ratio is 0).")
            if (not extra and dtype == F64 and isinstance(got, torch.Tensor) and got.shape == want.shape
                    and _close(got, want, 1e-5, 1e-5 * float(want.abs().max()))):
                extra = (" (the values are right to about 7 digits only: a float64 state is computed in float64 "
                         "throughout; a .float(), or a float32 tensor in the formula, rounds it to fp32)")
            return False, f"{r.message}. {hints[name]}{extra}"
    return True, "ok (count exact, mean and M2 within tolerance)"


@dataclass
class WelfordSpec:
    name: str
    kind: str                       # update_fold | update_first | merge | fold
    dtype: torch.dtype = F32
    sizes: tuple = (3, 40)
    rows: int = 4
    mean: float = 0.0
    std: float = 1.0
    shift: float = 0.0              # added to b's values
    empty_rows: tuple = ()          # merge: rows where a (and/or b) is empty, per side: ("a", row)
    seed: int = 0


def _welford_data(s: WelfordSpec, n: int, g) -> torch.Tensor:
    return (torch.randn(s.rows, n, generator=g, dtype=F64) * s.std + s.mean).to(s.dtype).double()


def _state(data: torch.Tensor, dtype) -> tuple:
    return tuple(t.to(dtype) for t in welford_ref(data))


def _welford_case(s: WelfordSpec) -> Case:
    def run(ns):
        if s.kind.startswith("update"):
            return _update_run(ns["welford_update"], s)
        if s.kind == "fold":
            return _wfold_run(ns["welford_merge"], s)
        return _wmerge_run(ns["welford_merge"], s)
    return Case(s.name, run)


def _update_run(fn, s: WelfordSpec) -> tuple[bool, str]:
    g = _gen(s.seed)
    n = 1 if s.kind == "update_first" else s.sizes[1]
    data = _welford_data(s, n, g)
    state = _state(data[:, :0], s.dtype)
    for j in range(n):
        state, err = _call(fn, (state, data[:, j].to(s.dtype)), VARIANCE_FORBIDDEN)
        if err:
            return False, err
        bad = _as_tuple(state, 3, "(count, mean, M2)")
        if bad:
            return False, bad
        if j == 0:
            ok, msg = _judge_welford(state, welford_ref(data[:, :1]), s.dtype, data[:, :1], UPDATE_HINTS)
            if not ok:
                return False, f"after the first update from the empty state (0, 0, 0): {msg}"
    ok, msg = _judge_welford(state, welford_ref(data), s.dtype, data, UPDATE_HINTS)
    if not ok and msg.startswith("M2") and _close(state[2], _old_count_m2(data), 1e-3):
        msg = msg.split(". ", 1)[0] + (". That is the M2 of updates whose mean divides delta by the OLD count: "
                                       "mean = mean + delta / count with the count after the +1 (the mean's own "
                                       "error stays within tolerance here; M2 carries it)")
    return ok, (msg if ok else f"after {n} updates: {msg}")


def _old_count_m2(data: torch.Tensor) -> torch.Tensor:
    """M2 (float64) of Welford updates over data's columns whose mean step divides by the count before the +1
    (max(count, 1), so that the first update is right)."""
    d = data.double()
    n, mean, m2 = 0, torch.zeros(d.shape[0], dtype=torch.float64), torch.zeros(d.shape[0], dtype=torch.float64)
    for j in range(d.shape[1]):
        x = d[:, j]
        delta = x - mean
        mean = mean + delta / max(n, 1)
        n += 1
        m2 = m2 + delta * (x - mean)
    return m2


def _wmerge_run(fn, s: WelfordSpec) -> tuple[bool, str]:
    g = _gen(s.seed)
    da = _welford_data(s, s.sizes[0], g)
    db = _welford_data(s, s.sizes[1], g) + s.shift
    db = db.to(s.dtype).double()
    a, b = list(_state(da, s.dtype)), list(_state(db, s.dtype))
    ref = list(welford_ref(torch.cat([da, db], dim=-1)))
    for side, row in s.empty_rows:      # make that row of a (or b) empty; the reference follows
        st, other = (a, welford_ref(db)) if side == "a" else (b, welford_ref(da))
        for t in st:
            t[row] = 0
        for k in range(3):
            ref[k][row] = other[k][row]
        if ("b" if side == "a" else "a", row) in s.empty_rows:
            for k in range(3):
                ref[k][row] = 0.0
    out, err = _call(fn, (tuple(a), tuple(b)), VARIANCE_FORBIDDEN)
    if err:
        return False, err
    return _judge_welford(out, tuple(ref), s.dtype, torch.cat([da, db], dim=-1), MERGE_HINTS)


def _wfold_run(fn, s: WelfordSpec) -> tuple[bool, str]:
    """16 partial states of unequal sizes (two empty), merged in a shuffled order and as a tree."""
    g = _gen(s.seed)
    data = _welford_data(s, 200, g)
    cuts = [0, 1, 9, 9, 30, 31, 64, 70, 100, 101, 101, 130, 150, 170, 190, 199, 200]
    states = [_state(data[:, a:b], s.dtype) for a, b in zip(cuts, cuts[1:])]
    ref = welford_ref(data)
    order = torch.randperm(len(states), generator=g).tolist()
    return _fold_orders(fn, states, order, VARIANCE_FORBIDDEN, 3, "(count, mean, M2)",
                        lambda st: _judge_welford(st, ref, s.dtype, data, MERGE_HINTS))


WELFORD_SPECS = [
    WelfordSpec("update: first value from the empty state", "update_first", seed=40),
    WelfordSpec("update: fold 40 values, fp32", "update_fold", seed=41),
    WelfordSpec("update: mean 1e4, std 1, 300 values", "update_fold", sizes=(0, 300), mean=1e4, seed=42),
    WelfordSpec("update: fp64 state stays fp64", "update_fold", F64, sizes=(0, 25), mean=5.0, std=3.0, seed=43),
    WelfordSpec("merge: unequal counts (3 and 40)", "merge", sizes=(3, 40), seed=44),
    WelfordSpec("merge: means far apart (0 and 1000), counts 10 and 7", "merge", sizes=(10, 7), shift=1000.0, seed=45),
    WelfordSpec("merge: empty state on the left", "merge", sizes=(5, 12), empty_rows=(("a", 0), ("a", 1), ("a", 2),
                                                                                      ("a", 3)), seed=46),
    WelfordSpec("merge: empty state on the right", "merge", sizes=(12, 5), empty_rows=(("b", 0), ("b", 1), ("b", 2),
                                                                                       ("b", 3)), seed=47),
    WelfordSpec("merge: empty with empty -> empty, no NaN", "merge", sizes=(4, 4),
                empty_rows=(("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)), seed=48),
    WelfordSpec("merge: per-row mix of empty and full states", "merge", sizes=(6, 25), shift=3.0,
                empty_rows=(("a", 1), ("b", 2), ("a", 3), ("b", 3)), seed=49),
    WelfordSpec("merge: mean 1e4, std 1, counts 100 and 37", "merge", sizes=(100, 37), mean=1e4, seed=50),
    WelfordSpec("merge: fp64 states stay fp64", "merge", F64, sizes=(9, 2), shift=-4.0, seed=51),
    WelfordSpec("merge: 16 partials in shuffled and tree orders", "fold", mean=50.0, std=2.0, seed=52),
    WelfordSpec("merge: 16 partials of mean 1e4, std 1", "fold", mean=1e4, seed=53),
]

register(Exercise(id="welford", lesson=LESSON, title="Welford's update and Chan's merge",
                  functions=("welford_update", "welford_merge"), cases=[_welford_case(s) for s in WELFORD_SPECS]))


# ============================================================================ var_mean_welford

CANCELLATION = ("; var is off by up to {rel:.0%} on rows of mean/std = {r:.0e}: the one-pass E[x^2] - E[x]^2 "
                "subtracts two numbers that agree in their first {d:.0f} digits, and float32 keeps about 7: "
                "catastrophic cancellation (relative error about eps*(mean/std)^2). Compute each chunk's "
                "M2 = sum((x - mean_chunk)^2) and merge the chunks with welford_merge")
HALF_HINT = ("; {dt} keeps {keeps}: convert each chunk to fp32 before its statistics, "
             "c = x[..., s:s+chunk].to(acc), so that mean_c, M2_c and the merges run in fp32; cast only "
             "(var, mean) back")
LOW_STATES = ("; the states reaching welford_merge are {low}: convert each chunk to {acc} before its statistics, "
              "c = x[..., s:s+chunk].to(acc), so that mean_c, M2_c and the merges run in {acc}; cast only "
              "(var, mean) back")
F64_HINT = ("; these values went through fp32 (each one is an fp32 number): a float64 input is computed in "
            "float64 (acc_dtype), fp32 loses the last 9 digits")


@dataclass
class VarSpec:
    name: str
    shape: tuple
    dtype: torch.dtype = F32
    chunk: int = 64
    correction: int = 1
    mean: float = 0.0
    std: float = 1.0
    kind: str = "randn"           # randn | equal | halves
    bad: str | None = None
    count_merges: bool = False    # check that the chunk states are merged with welford_merge
    seed: int = 0


def var_input(s: VarSpec) -> torch.Tensor:
    g = _gen(s.seed)
    x = torch.randn(s.shape, generator=g, dtype=F64) * s.std + s.mean
    if s.kind == "equal":
        x = torch.full(s.shape, s.mean, dtype=F64)
    elif s.kind == "halves":      # first half around 0, second half around 100: chunk means far apart
        x[..., s.shape[-1] // 2:] += 100.0
    return x.to(s.dtype)


def var_mean_ref(x: torch.Tensor, correction: int):
    d = x.double()
    mean = d.mean(dim=-1)
    m2 = ((d - mean.unsqueeze(-1)) ** 2).sum(dim=-1)
    return m2 / (d.shape[-1] - correction), mean     # 0/0 = nan when N = correction = 1, as torch


def _var_case(s: VarSpec) -> Case:
    def run(ns):
        fn = ns["var_mean_welford"]
        if s.bad:
            good = VarSpec("sanity", (3, 20), chunk=8, seed=s.seed)
            return _bad_call(fn, (torch.randn(3, 9), 0, 1), lambda: _var_run(ns, fn, good),
                             "the given check_rows(x, chunk) rejects chunk < 1", "x of 3x20, chunk 8")
        return _var_run(ns, fn, s)
    return Case(s.name, run)


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    """Largest |got - want| / |want| (inf where got is not finite)."""
    g, w = got.detach().double(), want.double()
    if not torch.isfinite(g).all():
        return math.inf
    return float(((g - w).abs() / w.abs().clamp_min(1e-300)).max()) if g.numel() else 0.0


def _chunked_m2(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """The sum of the chunks' own M2 (float64): what merging without Chan's cross term gives."""
    d = x.double()
    return sum(((c - c.mean(-1, keepdim=True)) ** 2).sum(-1) for c in d.split(chunk, dim=-1))


def _merged_count(calls: list):
    """The largest count a merge produced (a[0] + b[0]), from the states welford_merge was given: the row's count
    once every chunk is in. None where the states are not (count, mean, M2) tensors."""
    try:
        return max(float((a[0] + b[0]).max()) for a, b in calls if len(a) == 3 and len(b) == 3)
    except (ValueError, RuntimeError, IndexError):
        return None


def _chunk_counts(calls: list) -> set[float]:
    """The counts of the chunk states given to welford_merge (its second argument), as a set; empty where they
    cannot be read."""
    try:
        return {float(v) for _, b in calls if len(b) == 3 for v in torch.as_tensor(b[0]).flatten().unique()}
    except (TypeError, ValueError, RuntimeError):
        return set()


def _chunks_var_as_m2(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """M2 (float64) of Chan's merges when each chunk's state holds its variance M2_c / n_c in place of M2_c."""
    chunks = x.double().split(chunk, dim=-1)
    n = torch.tensor([float(c.shape[-1]) for c in chunks], dtype=torch.float64)
    means = torch.stack([c.mean(-1) for c in chunks], dim=-1)
    mean = (means * n).sum(-1) / n.sum()
    own = sum(((c - c.mean(-1, keepdim=True)) ** 2).mean(-1) for c in chunks)
    return own + (n * (means - mean.unsqueeze(-1)) ** 2).sum(-1)


def _last_chunk_counted_full(x: torch.Tensor, chunk: int, correction: int):
    """(var, mean) in float64 when the last, shorter chunk is merged with count `chunk` instead of its length:
    Chan's merge of all chunks at once, M2 = sum of the chunks' M2 + sum of n_i (mean_i - mean)^2."""
    chunks = x.double().split(chunk, dim=-1)
    n = torch.tensor([float(c.shape[-1]) for c in chunks[:-1]] + [float(chunk)], dtype=torch.float64)
    means = torch.stack([c.mean(-1) for c in chunks], dim=-1)
    mean = (means * n).sum(-1) / n.sum()
    m2 = _chunked_m2(x, chunk) + (n * (means - mean.unsqueeze(-1)) ** 2).sum(-1)
    return m2 / (n.sum() - correction), mean


LAST_CHUNK_HINT = ("; that is what merging the last chunk with count {chunk} gives: it holds only {tail} values "
                   "(N = {N}, chunk = {chunk}), so its count is c.shape[-1], not chunk")


def _var_precision_hint(s: VarSpec, dtypes: set, outs, err: float = 0.0) -> str:
    """Why a result lost digits, where the dtypes show it: '' when they do not. dtypes: those of the states that
    reached welford_merge (none seen: a 16-bit input is suspected for errors under 10 %, err being relative, and
    for NaN/Inf, which fp16's range (65504) makes likely)."""
    low = _coarser(dtypes, acc_dtype(s.dtype))
    if low:
        return LOW_STATES.format(low=", ".join(low), acc=_short(acc_dtype(s.dtype)))
    if s.dtype in (F16, BF16) and not dtypes and (err < 0.1 or err == math.inf):
        return HALF_HINT.format(dt=_short(s.dtype), keeps={F16: "11 significant bits and overflows past 65504",
                                                           BF16: "8 significant bits"}[s.dtype])
    if s.dtype == F64 and all(t.dtype == F64 and torch.equal(t.float().double(), t) for t in outs):
        return F64_HINT
    return ""


def _ignores_merges(ns, fn, x, s: VarSpec, var, mean) -> str:
    """Run again with every merge's mean moved by 1, then with every merge's M2 doubled: a stream that returns its
    merged state moves with it. Returns what did not move ("mean", "var") or ''."""
    def moved(state):
        n, m, m2 = state
        return n, m + 1, m2

    def doubled(state):
        n, m, m2 = state
        return n, m, m2 * 2

    for name, shift, before in (("mean", moved, mean), ("var", doubled, var)):
        with _merges_seen(ns, "welford_merge", shift=shift):
            out, err = _call(fn, (x, s.chunk, s.correction), VARIANCE_FORBIDDEN)
        if err or not isinstance(out, (tuple, list)) or len(out) != 2:
            return ""
        now = out[0 if name == "var" else 1]
        if isinstance(now, torch.Tensor) and now.shape == before.shape and _close(now, before, 1e-2):
            return name
    return ""


def _var_run(ns, fn, s: VarSpec) -> tuple[bool, str]:
    x = var_input(s)
    with _merges_seen(ns, "welford_merge", rows=tuple(x.shape[:-1])) as (calls, dtypes, bad_merge):
        out, err = _call(fn, (x, s.chunk, s.correction), VARIANCE_FORBIDDEN)
    if err:
        return False, err
    ok, msg = _var_judged(ns, fn, s, x, out, calls, dtypes)
    if not ok and bad_merge:
        return False, _wrong_merge_first("welford_merge", "(count, mean, M2)", "the welford exercise's cases",
                                         bad_merge[0], msg)
    return ok, msg


def _var_judged(ns, fn, s: VarSpec, x, out, calls, dtypes) -> tuple[bool, str]:
    """_var_run's verdict on the output `out` of the stream run on x (calls, dtypes: its merges)."""
    bad = _as_tuple(out, 2, "(var, mean), in torch.var_mean's order")
    if bad:
        return False, bad
    var, mean = out
    ref_var, ref_mean = var_mean_ref(x, s.correction)
    rv = compare(var, ref_var, VAR_TOL[s.dtype], name="var", dtype=s.dtype)
    rm = compare(mean, ref_mean, MEAN_TOL[s.dtype], name="mean", dtype=s.dtype)
    N = x.shape[-1]
    if rv and rm:
        chunks = math.ceil(N / s.chunk)
        if s.count_merges and len(calls) > chunks:
            return False, _more_merges_than_chunks("welford_merge", len(calls), chunks, s.chunk, N)
        if s.count_merges and len(calls) < chunks - 1:
            return False, (f"welford_merge was called {_times(len(calls))} for {_times(chunks, 'chunk')}: compute each "
                           "chunk's (count, mean, M2) and merge the chunk states into the running state with "
                           f"welford_merge. {CHUNK_IS}")
        if _coarser(dtypes, acc_dtype(s.dtype)):
            return False, "right values, but" + _var_precision_hint(s, dtypes, ())[1:]
        wide = _finer(dtypes, acc_dtype(s.dtype), "welford_merge", s.dtype) if s.count_merges else ""
        if wide:
            return False, wide
        if s.count_merges and calls:     # no merge (one chunk, started from its state): nothing to probe
            own = x[..., :s.chunk].to(acc_dtype(s.dtype)).mean(-1)     # chunk 0's own mean
            if not _a_state_holds(calls, 1, own, lambda t, v: torch.allclose(t, v, rtol=1e-5, atol=1e-6)):
                return False, ("welford_merge was called, but no state it received holds the first chunk's own "
                               "mean: each chunk's state is (len, c.mean(-1), sum((c - mean_c)^2)) of that chunk "
                               "alone; a mean of the whole row taken first is a second pass over it")
        fixed = _ignores_merges(ns, fn, x, s, var, mean) if s.count_merges and calls else ""
        if fixed == "mean":
            return False, ("welford_merge was called, but the mean returned does not come from its states (with "
                           "every merged mean moved by 1, it did not move): return the merged state's mean and "
                           "M2 / (count - correction)")
        if fixed == "var":
            return False, ("welford_merge was called, but the var returned does not come from the merged M2 (with "
                           "every merged M2 doubled, it did not move): a second pass over x, or a library "
                           "variance, reads the row again; return M2 / (count - correction) of the final state")
        return True, f"ok (var {rv.message.split('(', 1)[-1].rstrip(')')})"
    rt = max(1e-3, torch.finfo(s.dtype).eps)
    if var.shape == ref_mean.shape and _close(var, ref_mean, rt, 1e-6) and _close(mean, ref_var, rt, 1e-6):
        return False, "returned (mean, var): torch.var_mean returns (var, mean), variance first"
    if (var.shape == ref_var.shape and rm and _close(var, ref_var.sqrt(), rt, 1e-6)
            and not _close(var, ref_var, rt, 1e-6)):
        return False, (rv.message + "; that is the standard deviation: var is M2 / (n - correction), without a "
                       "square root")
    if any(t.dtype != s.dtype for t in (var, mean)):
        return False, ((rm.message if not rm else rv.message) + f" (compute in {_short(acc_dtype(s.dtype))}, then "
                       "return var.to(x.dtype), mean.to(x.dtype))")
    if not rm:
        msg = rm.message
        if not (isinstance(mean, torch.Tensor) and mean.shape == ref_mean.shape):
            return False, msg
        md = mean.detach().double()
        kept = N - N % s.chunk
        if bool((md == 0).all()) and bool((ref_mean != 0).any()):
            return False, (f"{msg}; mean is 0, the empty state's: no chunk was merged into it. Loop over "
                           "range(0, N, chunk): the last chunk may be shorter, and chunk may exceed N")
        if N % s.chunk and kept:
            full_mean = _last_chunk_counted_full(x, s.chunk, s.correction)[1]
            if bool(((md - full_mean).abs() <= 0.2 * (full_mean - ref_mean).abs()).all()):
                return False, msg + LAST_CHUNK_HINT.format(chunk=s.chunk, tail=N % s.chunk, N=N)
            partial = x.double()[..., :kept].mean(-1)      # dropped: the mean's deviation is the partial one's
            if bool(((md - partial).abs() <= 0.2 * (partial - ref_mean).abs()).all()):
                return False, (f"{msg}; that is the mean of the first {kept} columns only: the last partial chunk "
                               f"(columns {kept}..{N - 1}) was dropped: range(0, N, chunk) and x[..., s:s+chunk]")
        scale = ref_mean.abs() + ref_var.clamp_min(0).sqrt().nan_to_num(0.0)
        err = float(((md - ref_mean).abs() / scale.clamp_min(1e-300)).max()) if torch.isfinite(md).all() else math.inf
        return False, msg + _var_precision_hint(s, dtypes, (mean,), err)
    msg = rv.message
    if var.shape != ref_var.shape:
        return False, msg
    rel = _rel_err(var, ref_var)
    merged = _merged_count(calls)
    if x.dim() > 1 and x.shape[0] != min(s.chunk, N) and _chunk_counts(calls) == {float(x.shape[0])}:
        return False, (f"{msg}; every chunk's state counts {x.shape[0]}, the number of rows: len(c) is a chunk's "
                       "rows, its count is its number of columns, c.shape[-1]")
    if merged is not None and merged < N:
        return False, (f"{msg}; the merged states count {merged:g} of the {N} columns: some columns never reached "
                       "welford_merge. Loop over range(0, N, chunk), chunks x[..., s:s+chunk]: the last may be shorter")
    if N > 1 and rel < math.inf:
        for c in {0, 1} - {s.correction}:
            if bool(compare(var, var_mean_ref(x, c)[0], VAR_TOL[s.dtype], name="var", dtype=s.dtype)):
                return False, (f"{msg}; that is the variance with correction={c}: biased/unbiased mixed up. "
                               f"var = M2 / (n - correction): correction=0 divides by n (biased, the population "
                               f"variance), correction=1 by n - 1 (unbiased, Bessel), as torch.var_mean")
        if N % s.chunk:
            full_var = _last_chunk_counted_full(x, s.chunk, s.correction)[0]
            if _rel_err(full_var, ref_var) > 1e-3 and _rel_err(var, full_var) <= 0.1 * rel:
                return False, msg + LAST_CHUNK_HINT.format(chunk=s.chunk, tail=N % s.chunk, N=N)
        as_var = _chunks_var_as_m2(x, s.chunk) / (N - s.correction)
        if _rel_err(as_var, ref_var) > 1e-3 and _rel_err(var, as_var) <= 0.1 * rel:
            return False, (f"{msg}; that is what chunk states holding each chunk's variance give: a state's third "
                           "entry is M2 = ((c - mean_c)**2).sum(-1), the sum of squared deviations, not their mean")
        no_cross = _chunked_m2(x, s.chunk) / (N - s.correction)
        if _rel_err(no_cross, ref_var) > 1e-3 and _rel_err(var, no_cross) <= 0.1 * rel:
            return False, (f"{msg}; that is the chunks' M2 summed: merging chunks needs Chan's cross term "
                           "delta^2 * n_a * n_b / n (the spread between the chunk means)")
    hint = _var_precision_hint(s, dtypes, (var, mean), rel)
    ratio = abs(s.mean) / s.std if s.kind == "randn" and s.std and s.dtype != F64 else 0.0
    if hint:
        msg += hint
    elif ratio >= 100 and 1e-2 < rel < math.inf:
        msg += CANCELLATION.format(rel=min(rel, 9.99), r=ratio, d=2 * math.log10(ratio))
    elif s.kind == "halves" and 1e-2 < rel < math.inf:
        msg += ("; the chunk means here differ by 100, so most of M2 comes from merging: Chan's cross term "
                "delta^2 * n_a * n_b / n, with the counts n_a and n_b of the two states")
    return False, msg


VAR_SPECS = [
    VarSpec("(4, 100) fp32, chunk=16, correction=1", (4, 100), chunk=16, seed=60),
    VarSpec("(4, 100) fp32, chunk=16, correction=0 (biased)", (4, 100), chunk=16, correction=0, seed=61),
    VarSpec("mean 1e4, std 1, N=4096, fp32 (one-pass fails)", (3, 4096), chunk=256, mean=1e4, seed=62),
    VarSpec("mean 1e3, std 1, chunk=1 (pure Welford), correction=0", (2, 300), chunk=1, correction=0, mean=1e3,
            seed=63),
    VarSpec("mean 1e3, std 0.1, N=2000, chunk=128", (2, 2000), chunk=128, mean=1e3, std=0.1, seed=64),
    VarSpec("chunk=500 > N=37 (one chunk)", (5, 37), chunk=500, mean=3.0, seed=65, count_merges=True),
    VarSpec("N=1000, chunk=96 (a partial last chunk)", (3, 1000), chunk=96, mean=-2.0, std=4.0, seed=66,
            count_merges=True),
    VarSpec("N=1, correction=0: var 0", (4, 1), chunk=8, correction=0, mean=5.0, seed=67),
    VarSpec("1-D x (N=90): var and mean are 0-dim", (90,), chunk=16, mean=2.0, seed=76),
    VarSpec("N=1, correction=1: var nan (0/0), as torch", (4, 1), chunk=8, correction=1, mean=5.0, seed=68),
    VarSpec("constant rows: var 0", (3, 77), chunk=10, kind="equal", mean=3.5, seed=69),
    VarSpec("chunk means far apart (halves at 0 and 100)", (3, 64), chunk=8, kind="halves", seed=70),
    VarSpec("fp16 input: outputs fp16", (4, 333), F16, chunk=64, mean=1.0, std=2.0, seed=71),
    VarSpec("fp16, mean 300, std 1 (compute in fp32)", (4, 1000), F16, chunk=64, mean=300.0, seed=75),
    VarSpec("3-D (2, 3, 50) bf16, correction=0", (2, 3, 50), BF16, chunk=16, correction=0, mean=4.0, seed=72),
    VarSpec("fp64: computed and returned in fp64, 3-D (3, 2, 500)", (3, 2, 500), F64, chunk=64, mean=1e6, seed=73),
    VarSpec("bad input: chunk=0 raises ValueError", (3, 9), bad="chunk0", seed=74),
]

register(Exercise(id="var_mean_welford", lesson=LESSON, title="var_mean by chunks and Chan merges",
                  functions=("var_mean_welford",), uses=("welford_merge",), cases=[_var_case(s) for s in VAR_SPECS],
                  error_hints=(ONE_D_HINT,)))


# ============================================================================ butterfly_reduce

WARP = 32
OFFSETS = (16, 8, 4, 2, 1)
BUTTERFLY_RULE = ("every lane must end with the merge of all 32 lanes: 5 rounds, offset = 16, 8, 4, 2, 1; in each "
                  "round every lane merges its state with that of lane ^ offset, all lanes at once (each reads "
                  "its partner's state from before the round): state = merge(state, partner's state)")


def _map(fn, state):
    if isinstance(state, torch.Tensor):
        return fn(state)
    return type(state)(_map(fn, s) for s in state)


def butterfly_ref(values, merge, partner_of=lambda lane, off: lane ^ off, mine_first: bool = True,
                  offsets=OFFSETS):
    lane = torch.arange(WARP)
    state = values
    for off in offsets:
        p = partner_of(lane, off)
        theirs = _map(lambda t: t[p], state)
        state = merge(state, theirs) if mine_first else merge(theirs, state)
    return state


def _add(a, b):
    return a + b


def _or(a, b):
    return a | b


def _matmul(a, b):
    return a @ b


def _welford_merge_ref(a, b):
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    w = nb / n.clamp_min(1)
    d = mb - ma
    return n, ma + d * w, m2a + m2b + d * d * na * w


@dataclass
class LaneSpec:
    name: str
    kind: str      # sum | sum_vec | max | or | softmax | welford | matmul | equal | calls | bad64 | bad16
    dtype: torch.dtype = F32
    seed: int = 0
    extra: dict = field(default_factory=dict)


def _lane_inputs(s: LaneSpec):
    """(values, merge, expected full-lane state or None (then use butterfly_ref), tolerance, source data)."""
    g = _gen(s.seed)
    if s.kind in ("sum", "calls"):
        v = torch.randn(WARP, generator=g, dtype=F64) * 100
        return v.to(s.dtype), _add, v.to(s.dtype).double().sum().expand(WARP), Tolerance(1e-5, 1e-5)
    if s.kind == "sum_vec":
        v = (torch.randn(WARP, 7, generator=g, dtype=F64) + 1e3).to(s.dtype)
        return v, _add, v.double().sum(0).expand(WARP, 7), Tolerance(1e-4, 1e-6)
    if s.kind == "equal":
        v = torch.full((WARP, 3), 0.1, dtype=s.dtype)
        return v, _add, v.double().sum(0).expand(WARP, 3), Tolerance(1e-6, 1e-6)
    if s.kind == "max":
        v = (torch.randn(WARP, 5, generator=g, dtype=F64) * 10).to(s.dtype)
        v[3, 0], v[30, 0] = 1e6, -INF
        v[:, 4] = -INF
        return v, torch.maximum, v.double().amax(0).expand(WARP, 5), EXACT
    if s.kind == "or":
        v = torch.tensor([1 << lane for lane in range(WARP)], dtype=torch.int64)
        return v, _or, torch.full((WARP,), (1 << WARP) - 1, dtype=torch.int64), None
    if s.kind == "softmax":
        data = (torch.randn(WARP, 6, generator=g, dtype=F64) * 50).to(s.dtype).double()
        data[5] = -INF                                  # lane 5 has seen only masked values: (-inf, 0)
        m, l = sm_state_ref(data)
        vals = (m.to(s.dtype), l.to(s.dtype))
        fm, fl = sm_state_ref(data.reshape(1, -1))
        return vals, _sm_merge_ref, (fm.expand(WARP), fl.expand(WARP)), STATE_TOL[s.dtype]
    if s.kind == "welford":
        sizes = torch.randint(0, 9, (WARP,), generator=g)
        sizes[[2, 17]] = 0                               # two lanes own no elements
        data = (torch.randn(WARP, 8, generator=g, dtype=F64) + 1e3).to(s.dtype).double()
        pieces = [data[i, : int(sizes[i])] for i in range(WARP)]
        states = [welford_ref(p.reshape(1, -1)) for p in pieces]
        vals = tuple(torch.cat([st[k] for st in states]).to(s.dtype) for k in range(3))
        full = welford_ref(torch.cat(pieces).reshape(1, -1))
        return vals, _welford_merge_ref, tuple(t.expand(WARP) for t in full), Tolerance(1e-4, 1e-5)
    if s.kind == "matmul":
        v = (torch.eye(2, dtype=F64) + 0.3 * torch.randn(WARP, 2, 2, generator=g, dtype=F64)).to(s.dtype)
        return v, _matmul, None, Tolerance(1e-5, 1e-5)
    raise ValueError(s.kind)


def _lane_case(s: LaneSpec) -> Case:
    def run(ns):
        fn = ns["butterfly_reduce"]
        if s.kind.startswith("bad"):
            good = LaneSpec("sanity", "sum", seed=s.seed)
            arg = torch.randn(64) if s.kind == "bad64" else (torch.randn(WARP), torch.randn(16))
            return _bad_call(fn, (arg, _add), lambda: _lane_run(fn, good),
                             "the given check_lanes(values) rejects states without a leading lane dim of 32",
                             "32 lanes of sums")
        return _lane_run(fn, s)
    return Case(s.name, run)


def _lane_run(fn, s: LaneSpec) -> tuple[bool, str]:
    values, merge, expected, tol = _lane_inputs(s)
    calls = []

    def recording(a, b):
        calls.append(tuple(t.shape[0] for t in _tensors(a)))
        return merge(a, b)

    out, err = _call(fn, (values, recording), ())
    if err:
        return False, err
    structure = "a tensor" if isinstance(values, torch.Tensor) else f"a tuple of {len(values)} tensors"
    if isinstance(values, torch.Tensor) != isinstance(out, torch.Tensor) or (
            not isinstance(out, torch.Tensor) and (not isinstance(out, (tuple, list)) or len(out) != len(values))):
        return False, f"must return the state in the structure it came in ({structure}), got {type(out).__name__}"
    got_t, exp_t = _tensors(out), _tensors(expected if expected is not None else butterfly_ref(values, merge))
    if len(got_t) != len(exp_t):
        return False, f"must return the state in the structure it came in ({structure}) with a tensor in every place"
    for g, e in zip(got_t, exp_t):
        if tuple(g.shape) != tuple(e.shape):
            return False, (f"returned shape {tuple(g.shape)}, expected {tuple(e.shape)}: return the state of all 32 "
                           "lanes (every lane holds the full result, as after __shfl_xor_sync rounds)")
    if s.kind == "calls":
        if len(calls) != len(OFFSETS) or any(c != (WARP,) * len(c) for c in calls):
            return False, (f"merge was called {len(calls)} times (first call on leading dims {calls[0] if calls else '-'})"
                           f": a warp exchanges all 32 lanes at once, so call merge once per round on the whole "
                           f"(32, ...) state: 5 calls for offsets 16, 8, 4, 2, 1")
    for k, (g, e) in enumerate(zip(got_t, exp_t)):
        if tol is None:
            ok = torch.equal(g, e)
        else:
            ok = bool(compare(g, e.double(), tol, name="state", dtype=s.dtype))
        if not ok:
            return False, _lane_message(s, values, merge, g, e, k)
    if s.kind == "sum":
        if not bool((out == out[0]).all()):
            return False, ("lanes hold different sums: with partner = lane ^ offset lanes i and i ^ offset add the "
                           "same two numbers, so every lane ends bitwise equal")
    return True, f"ok: all 32 lanes hold the full result ({len(calls)} merge calls)"


def _lane_message(s, values, merge, got, exp, k) -> str:
    gd, ed = got.double(), exp.double()
    diff = ~(((gd - ed).abs() <= 1e-5 * (1 + ed.abs())) | (gd == ed))
    lanes = diff.reshape(WARP, -1).any(dim=1).nonzero().flatten().tolist()
    if not lanes and s.kind not in ("or",):
        return (f"every lane is within 1e-5 of the full result, but not within this case's tolerance: the lane states "
                f"lost precision on the way ({_short(got.dtype)} lanes, {_short(s.dtype)} input): exchange each tensor "
                "as it is, theirs = t[partner], without converting it (a .float(), or a buffer made with the default "
                "dtype, rounds fp64 lanes to fp32)")
    lane = lanes[0] if lanes else 0
    msg = (f"lanes {lanes[:8]}{'...' if len(lanes) > 8 else ''} are wrong; lane {lane}: got "
           f"{_show(got[lane])}, expected {_show(exp[lane])}")
    if s.kind == "or":
        counts = [bin(int(v)).count("1") for v in got.tolist()]
        return (f"lanes {lanes[:8]}{'...' if len(lanes) > 8 else ''} are wrong; lane {lane} holds the bits "
                f"{int(got[lane]):#010x}, expected {int(exp[lane]):#010x}: it combined {counts[lane]} of the 32 lanes. "
                f"{BUTTERFLY_RULE[0].upper()}{BUTTERFLY_RULE[1:]}")
    if s.kind == "matmul":
        swapped = butterfly_ref(values, merge, mine_first=False)
        rotated = butterfly_ref(values, merge, partner_of=lambda lane, off: (lane + off) % WARP)
        ascending = butterfly_ref(values, merge, offsets=OFFSETS[::-1])
        if torch.allclose(got.double(), swapped.double(), rtol=1e-5, atol=1e-5):
            return msg + (": you computed merge(partner's, mine); with a merge that is not commutative (here a 2x2 "
                          "matrix product) the order is part of the contract: state = merge(mine, partner's)")
        if torch.allclose(got.double(), rotated.double(), rtol=1e-5, atol=1e-5):
            return msg + (": that is partner = (lane + offset) % 32, a rotation; for a commutative merge it reaches the "
                          "same total, but __shfl_xor_sync pairs lane with lane ^ offset and the products differ")
        if torch.allclose(got.double(), ascending.double(), rtol=1e-5, atol=1e-5):
            return msg + (": your offsets ran 1, 2, 4, 8, 16; they must run 16, 8, 4, 2, 1 (descending): the order "
                          "fixes the tree, and with a merge that is not commutative (here a 2x2 matrix product) "
                          "another tree gives other products")
        return msg + (": the merge here is a 2x2 matrix product (not commutative), so each lane's result shows the "
                      f"exact order of its merges. {BUTTERFLY_RULE[0].upper()}{BUTTERFLY_RULE[1:]}")
    return f"{msg}: {BUTTERFLY_RULE}"


def _show(t: torch.Tensor) -> str:
    flat = t.double().flatten()
    vals = ", ".join(f"{v:.6g}" for v in flat[:4].tolist())
    return f"[{vals}{', ...' if flat.numel() > 4 else ''}]" if t.ndim else vals


LANE_SPECS = [
    LaneSpec("sum of 32 fp32 values: every lane, bitwise equal", "sum", seed=80),
    LaneSpec("sum of (32, 7) fp32 vectors (mean 1e3)", "sum_vec", seed=81),
    LaneSpec("sum of equal values (0.1 in every lane)", "equal", seed=82),
    LaneSpec("max of (32, 5), with 1e6 and -inf entries", "max", seed=83),
    LaneSpec("bitwise OR of 1 << lane: every lane sees all 32", "or", seed=84),
    LaneSpec("online-softmax pair (m, l), one lane empty", "softmax", seed=85),
    LaneSpec("online-softmax pair (m, l), fp64", "softmax", F64, seed=86),
    LaneSpec("Welford triple, unequal counts, two empty lanes", "welford", seed=87),
    LaneSpec("non-commutative merge (2x2 matrix product)", "matmul", seed=88),
    LaneSpec("non-commutative merge, fp64", "matmul", F64, seed=89),
    LaneSpec("merge called once per round on all 32 lanes", "calls", seed=90),
    LaneSpec("bad input: 64 lanes raise ValueError", "bad64", seed=91),
    LaneSpec("bad input: a state tensor of 16 lanes", "bad16", seed=92),
]

register(Exercise(id="butterfly_reduce", lesson=LESSON, title="A warp's butterfly all-reduce, simulated on tensors",
                  functions=("butterfly_reduce",), cases=[_lane_case(s) for s in LANE_SPECS]))
