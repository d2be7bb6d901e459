"""Compare a kernel's output with a float64 reference and explain what is wrong.

Protocol (DESIGN section 4): pass when every element has |y - ref| <= atol + rtol * |ref|.
NaN or Inf where the reference is finite always fails. Messages come in a fixed order:
shape, dtype, device, unwritten (still poisoned) elements, NaN/Inf, then the worst error with
its index and the tolerance, and a hint when the error has a recognisable pattern.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# Outputs are poisoned with a NaN carrying this payload before the student's code runs, so an
# element the kernel never wrote can be told apart from a NaN the kernel computed.
_POISON_BITS = {
    torch.float32: (torch.int32, 0x7FC0DEAD),
    torch.float16: (torch.int16, 0x7E5A),
    torch.bfloat16: (torch.int16, 0x7FDA),
    torch.float64: (torch.int64, 0x7FF8DEADBEEFDEAD),
}


# Padding and guard bands around *inputs* get a different payload: a kernel that reads them
# produces NaNs that must not be mistaken for unwritten outputs.
_INPUT_POISON_BITS = {
    torch.float32: (torch.int32, 0x7FC0BEEF),
    torch.float16: (torch.int16, 0x7E5B),
    torch.bfloat16: (torch.int16, 0x7FDB),
    torch.float64: (torch.int64, 0x7FF8BEEFBEEFBEEF),
}


def poison_input_(t: torch.Tensor) -> torch.Tensor:
    """Fill padding around inputs with a NaN distinct from the output poison."""
    if t.dtype not in _INPUT_POISON_BITS:
        raise TypeError(f"poison_input_ supports float dtypes, got {t.dtype}")
    int_dtype, bits = _INPUT_POISON_BITS[t.dtype]
    t.view(int_dtype).fill_(bits)
    return t


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill a floating tensor in place with the marker NaN; other dtypes with their max value."""
    if t.dtype in _POISON_BITS:
        int_dtype, bits = _POISON_BITS[t.dtype]
        t.view(int_dtype).fill_(bits)
    elif t.dtype == torch.bool:
        t.fill_(True)
    elif t.numel():
        t.fill_(torch.iinfo(t.dtype).max if not t.dtype.is_floating_point else float("nan"))
    return t


def is_poison(t: torch.Tensor) -> torch.Tensor:
    """Boolean mask of elements that still hold the marker NaN (never written)."""
    if t.dtype not in _POISON_BITS:
        return torch.zeros(t.shape, dtype=torch.bool, device=t.device)
    int_dtype, bits = _POISON_BITS[t.dtype]
    return t.view(int_dtype) == bits


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float

    def __str__(self) -> str:
        return f"atol={self.atol:g}, rtol={self.rtol:g}"


# Chosen from measurement (tests/test_compare.py keeps them honest): a correct kernel that
# accumulates in fp32 passes on every hidden shape; fp16 accumulation, eps outside the sqrt,
# dividing by BLOCK instead of N, or a dropped mask fail.
TOLERANCES: dict[tuple[str, torch.dtype], Tolerance] = {
    ("rmsnorm", torch.float32): Tolerance(atol=1e-5, rtol=1e-5),
    ("rmsnorm", torch.float16): Tolerance(atol=1e-3, rtol=1e-3),
    ("rmsnorm", torch.bfloat16): Tolerance(atol=8e-3, rtol=8e-3),
    ("layernorm", torch.float32): Tolerance(atol=1e-5, rtol=1e-5),
    ("layernorm", torch.float16): Tolerance(atol=1e-3, rtol=1e-3),
    ("layernorm", torch.bfloat16): Tolerance(atol=8e-3, rtol=8e-3),
    ("stat", torch.float32): Tolerance(atol=1e-6, rtol=1e-5),
    ("softmax", torch.float32): Tolerance(atol=1e-6, rtol=1e-5),
}


def tolerance_for(op: str, dtype: torch.dtype) -> Tolerance:
    try:
        return TOLERANCES[(op, dtype)]
    except KeyError:
        known = sorted({o for o, _ in TOLERANCES})
        raise KeyError(f"no tolerance for op={op!r} dtype={dtype}; ops with tolerances: {known}") from None


@dataclass
class CompareResult:
    ok: bool
    message: str
    max_abs_err: float = float("nan")

    def __bool__(self) -> bool:
        return self.ok


def _wrong_outputs(actual, names: tuple) -> CompareResult | None:
    """A failing result when `actual` is not one output per name (None from an untouched stub, a wrong count)."""
    if actual is None:
        return CompareResult(False, f"{', '.join(names)}: got None (not implemented yet, or a missing return?)")
    if not isinstance(actual, (tuple, list)) or len(actual) != len(names):
        got = f"a {type(actual).__name__} of {len(actual)}" if isinstance(actual, (tuple, list)) else type(actual).__name__
        return CompareResult(False, f"expected {len(names)} outputs ({', '.join(names)}), got {got}")
    return None


def compare_outputs(op: str, actual, expected, dtype: torch.dtype, *, names=("y", "mean", "rstd"),
                    atol: float | None = None, stat_rtol: float | None = None,
                    device: str | None = None) -> list[CompareResult]:
    """Each output of a row-wise op against its float64 reference, with the tolerance the hidden cases use.

    `y` (of `dtype`) gets tolerance_for(op, dtype), its atol raised to `atol` where given (rows whose own float
    rounding is larger, e.g. mean 1e4 in fp32); the statistics (float32: mean, rstd) get tolerance_for("stat"),
    their rtol raised to `stat_rtol` where given. One result per name, in order; `actual` that is None (an
    untouched stub) or has the wrong count gives one failing result that says what came back.
    """
    names = tuple(names)
    wrong = _wrong_outputs(actual, names)
    if wrong is not None:   # (a CompareResult is falsy when it fails)
        return [wrong]
    refs = dict(zip(names, expected))
    row_len = int(refs["y"].shape[-1]) if "y" in refs and refs["y"].dim() else None   # N, the rows' length
    results = {}
    for name, got, ref in zip(names, actual, expected):   # the statistics first: y's hints depend on them
        if name == "y":
            continue
        tol = tolerance_for("stat", torch.float32)
        if stat_rtol is not None:
            tol = Tolerance(atol=tol.atol, rtol=max(tol.rtol, stat_rtol))
        # a variance around a wrong mean is wrong too: the mean's message says why, no hint of rstd's own
        after_bad_mean = name == "rstd" and "mean" in results and not results["mean"]
        results[name] = compare(got, ref, tol, name=name, dtype=torch.float32, device=device, x_dtype=dtype,
                                kernel_hints=not after_bad_mean, op=op, row_len=row_len)
    if "y" in refs:
        tol = tolerance_for(op, dtype)
        if atol is not None:
            tol = Tolerance(atol=max(tol.atol, atol), rtol=tol.rtol)
        # a wrong statistic spreads errors of any size over y (weight and bias make them more than a per-row
        # a * y + c): no guess of 16-bit rounding then, the statistic's own message says why
        results["y"] = compare(actual[names.index("y")], refs["y"], tol, name="y", dtype=dtype, device=device,
                               x_dtype=dtype, op=op, row_len=row_len, rounding_hint=all(results.values()))
    return [results[name] for name in names]


def compare_each(actual, expected, tols, names, *, dtype: torch.dtype | None = None) -> list[CompareResult]:
    """A visible check of a function with one or more outputs: each against its float64 reference and tolerance.

    `actual` is a tuple/list with one tensor per name, or the output itself when there is one name; anything else
    (None from an untouched stub, a wrong count) gives one failing result that says what came back. `dtype`: what
    every output must be (the hidden cases check it). No kernel hints: for the lessons whose exercises are PyTorch
    functions, not kernels.
    """
    names, tols = tuple(names), tuple(tols)
    expected = (expected,) if isinstance(expected, torch.Tensor) else tuple(expected)
    if not names or len(tols) != len(names) or len(expected) != len(names):
        raise ValueError(f"compare_each: {len(names)} names, {len(tols)} tolerances, {len(expected)} references")
    if len(names) == 1 and not isinstance(actual, (tuple, list)):
        actual = (actual,)
    wrong = _wrong_outputs(actual, names)
    if wrong is not None:   # (a CompareResult is falsy when it fails)
        return [wrong]
    return [compare(a, e, t, name=n, dtype=dtype, kernel_hints=False)
            for a, e, t, n in zip(actual, expected, tols, names)]


def print_verdict(label: str, results: list[CompareResult]) -> None:
    """Print one line for a visible check: "label: ok (max abs err ...)" or what failed. Returns nothing, so that a
    notebook cell that ends with it shows no stray True/False."""
    if not results:
        raise ValueError("print_verdict: no results to judge")
    bad = [r for r in results if not r]
    if bad:
        print(f"{label}: FAILED: " + "; ".join(r.message for r in bad))
        return
    errs = ", ".join(r.message.split(":", 1)[0] + f" {r.max_abs_err:.1e}" for r in results)
    print(f"{label}: ok (max abs err {errs}; within the hidden cases' tolerance)")


def changed_in_place(name: str, before: torch.Tensor, after: torch.Tensor) -> str | None:
    """What to say when a function changed its input `name` (`before`: a clone taken before the call), else None."""
    if after is None or torch.equal(after.detach(), before):
        return None
    return (f"your function changed its input {name} in place: for a float32 (or float64) x, "
            "x.to(compute_dtype(x)) is x itself, not a copy, so xf.sub_(mean) or xf.mul_(...) write into the "
            "caller's tensor; use out-of-place ops (xf - mean)")


def print_unchanged(name: str, before: torch.Tensor, after: torch.Tensor) -> None:
    """A visible check's line when the function changed its input in place (nothing when it did not)."""
    said = changed_in_place(name, before, after)
    if said:
        print(f"{name}: FAILED: {said}")


def _fmt_index(flat_idx: int, shape) -> tuple:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_idx), tuple(shape))) if len(shape) else ()


def compare(actual, expected: torch.Tensor, tol: Tolerance, *, name: str = "y",
            dtype: torch.dtype | None = None, device: str | None = None,
            kernel_hints: bool = True, x_dtype: torch.dtype | None = None, op: str = "",
            row_len: int | None = None, rounding_hint: bool = True) -> CompareResult:
    """Check `actual` against the float64 `expected`; `dtype`/`device` are what actual must have.

    kernel_hints=False leaves out the hints that speak of row-wise kernels (masks, strides, eps,
    fp32 accumulation), for exercises that are not kernels. x_dtype: the kernel's input dtype, where known (an
    overflow hint is for fp16 input; a per-row statistic is float32 whatever it is). op: the tolerance key of
    the kernel ("softmax" has no variance and no eps: its hints speak of the running max and sum). row_len: N, the
    length of the rows the statistics are of, where known (a factor sqrt((N-1)/N) in rstd is a variance divided by
    N - 1). rounding_hint=False: no guess of 16-bit rounding (y, where a statistic is wrong too).
    """
    if not isinstance(tol, Tolerance):
        raise TypeError(f"tol must be a helpers.Tolerance, got {type(tol).__name__}")
    if not isinstance(expected, torch.Tensor):
        raise TypeError(f"expected must be a torch.Tensor, got {type(expected).__name__}")
    if actual is None:
        return CompareResult(False, f"{name}: got None (not implemented yet, or a missing return?)")
    if not isinstance(actual, torch.Tensor):
        return CompareResult(False, f"{name}: expected a torch.Tensor, got {type(actual).__name__}")
    if tuple(actual.shape) != tuple(expected.shape):
        note = ""
        if name in PER_ROW and expected.dim() and tuple(actual.shape) == tuple(expected.shape) + (1,):
            note = "; a trailing 1 (keepdim): one value per row has x.shape[:-1], the rows' own shape"
        elif name in PER_ROW and actual.numel() == expected.numel():
            note = (f"; return {name}.reshape(x.shape[:-1]): one value per row in the rows' own shape (a 1-D x has a "
                    "0-dim statistic, a 3-D x of (B, T, N) has (B, T))")
        return CompareResult(False, f"{name}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}{note}")
    if dtype is not None and actual.dtype != dtype:
        return CompareResult(False, f"{name}: dtype {actual.dtype}, expected {dtype}")
    if device is not None and actual.device.type != torch.device(device).type:
        return CompareResult(False, f"{name}: on {actual.device}, expected on {device}")
    if actual.numel() == 0:
        return CompareResult(True, f"{name}: ok (empty)", 0.0)

    unwritten = is_poison(actual)
    exp = expected.detach().to(device=actual.device, dtype=torch.float64)
    act = actual.detach().to(torch.float64)
    finite_ref = torch.isfinite(exp)
    if unwritten.any():
        n = int(unwritten.sum())
        where = _fmt_index(int(unwritten.flatten().nonzero()[0]), actual.shape)
        hint = _unwritten_hint(unwritten, name) if kernel_hints else ""
        return CompareResult(False, f"{name}: {n} of {actual.numel()} elements never written "
                                    f"(first at {where}){hint}")
    bad_nonfinite = ~torch.isfinite(act) & finite_ref
    if bad_nonfinite.any():
        n = int(bad_nonfinite.sum())
        i = int(bad_nonfinite.flatten().nonzero()[0])
        hint = (_row_hint(bad_nonfinite) or (_zero_row_hint(exp, bad_nonfinite) if row_len != 1 else "")
                or _nonfinite_hint(name, act[bad_nonfinite], x_dtype, op, row_len) if kernel_hints else "")
        return CompareResult(False, f"{name}: {n} NaN/Inf where the reference is finite (first at "
                                    f"{_fmt_index(i, actual.shape)}: {act.flatten()[i].item()}, expected "
                                    f"{exp.flatten()[i].item():.6g}){hint}")
    err = (act - exp).abs()
    same = (act == exp) | (torch.isnan(act) & torch.isnan(exp))
    err = torch.where(finite_ref, err, torch.where(same, 0.0, float("inf")))
    allowed = tol.atol + tol.rtol * exp.abs()
    bad = err > torch.where(finite_ref, allowed, torch.zeros_like(allowed))
    max_err = float(err.max())
    if not bad.any():
        return CompareResult(True, f"{name}: ok (max abs err {max_err:.2e}; each element within atol + "
                                   f"rtol*|expected|, {tol})", max_err)
    i = int((err - allowed).flatten().argmax())
    idx = _fmt_index(i, actual.shape)
    msg = (f"{name}: {int(bad.sum())} of {actual.numel()} elements off; worst at {idx}: got "
           f"{act.flatten()[i].item():.6g}, expected {exp.flatten()[i].item():.6g} "
           f"(abs err {err.flatten()[i].item():.3g}, {tol})")
    return CompareResult(False, msg + (_error_hint(act, exp, bad, name, x_dtype, op, row_len, rounding_hint)
                                       if kernel_hints else ""),
                         max_err)


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, t.shape[-1]) if t.ndim >= 1 else t.reshape(1, 1)


def _zero_row_hint(exp: torch.Tensor, bad: torch.Tensor) -> str:
    """NaN/Inf in rows whose reference is all zeros (x = 0 there): 0 * 1/sqrt(0) when eps is missing."""
    if exp.ndim == 0 or exp.numel() == 0:
        return ""
    e, b = _rows(exp), _rows(bad)
    zero = (e == 0).all(dim=1)
    if zero.any() and bool(b.any(dim=1)[zero].any()) and not bool(b.any(dim=1)[~zero].any()):
        return ("; only rows of zeros came out NaN/Inf: 0 * 1/sqrt(0) is NaN. Is eps added inside the square "
                "root (rsqrt(mean + eps))?")
    return ""


PER_ROW = ("mean", "rstd")   # outputs with one value per row: their elements are rows
NOTHING_STORED = "is the store reached, and is its mask ever true?"   # (a case that knows more says that instead)


def _unwritten_hint(unwritten: torch.Tensor, name: str = "y") -> str:
    if bool(unwritten.all()):
        return f"; no element of {name} was written: {NOTHING_STORED}"
    if name in PER_ROW:   # the rows are its elements, in x's row order whatever its shape (x.shape[:-1])
        unwritten = unwritten.reshape(-1)
        k = int(unwritten.nonzero()[0])
        if bool(unwritten[k:].all()):
            return (f"; unwritten from row {k} on: does every program store this value for each of its own rows "
                    "(offsets by row, not by program)?")
        return "."
    u = _rows(unwritten)
    rows_all = u.all(dim=1)
    if rows_all.any() and not rows_all.all():
        first = int(rows_all.nonzero()[0])
        return (f"; whole rows are missing from row {first} on: does the grid cover every row, and does every "
                "program store its own rows?")
    if u.any(dim=1).all() and not u[:, 0].any():
        col = int(u.any(dim=0).nonzero()[0])
        return (f"; every row is unwritten from column {col} on: the kernel covers only the first {col} columns "
                "of each row (one block shorter than N? or a loop over the row that stops early: check its bound)")
    return "."


def _counted_times(factors: torch.Tensor) -> str:
    """Every row's y (or rstd) off by 1/sqrt(k) or sqrt(k) for one integer k >= 2: the mean of squares (or the
    variance) came out k times, or a k-th of, its value: a sum counted twice, or only one of k partial sums."""
    f = float(factors.median())
    if not bool(((factors - f).abs() <= 1e-4 * abs(f)).all()) or f <= 0:
        return ""
    for k, too in ((1 / f ** 2, "large"), (f ** 2, "small")):
        n = round(k)
        if 2 <= n <= 1024 and abs(k - n) < 1e-3 * n:
            times = "twice" if n == 2 else f"{n} times"
            if too == "large":
                return (f"the mean of squares (the variance) came out {times} its value. Is a value counted {times} "
                        "(a shuffle offset equal to the warp size hands a lane its own value back; a block total "
                        f"that every warp adds again), or the sum divided by N/{n} instead of N?")
            return (f"the mean of squares (the variance) came out 1/{n} of its value. Does only one of {n} partial "
                    f"sums reach the total (one warp's, one chunk's), or is the sum divided by {n}*N (the padded "
                    "block size?) instead of N?")
    return ""


def _nonfinite_hint(name: str, wrong: torch.Tensor, x_dtype: torch.dtype | None, op: str = "",
                    row_len: int | None = None) -> str:
    """NaN/Inf where the reference is finite: fp16 squares overflow; with wider inputs a NaN is the rsqrt of a
    negative variance (softmax: exp(-inf - (-inf)), or l = 0). Either way an unmasked read of the NaN guard bands
    around the inputs is possible."""
    outside = "; or a read of memory outside the row (masks, strides)?"
    if row_len == 1 and op in ("layernorm", "rmsnorm") and bool(torch.isnan(wrong).all()):
        return (". NaN in rows of one element: a sum divided by N - 1, which is 0 there (0/0)? The variance of a "
                "norm layer is divided by N (the biased one, correction=0)" + outside)
    if op == "softmax":
        return (". NaN from exp(-inf - (-inf)), or 0/0 from a sum l of 0? A lane whose values are all -inf holds "
                "(m, l) = (-inf, 0), and updates and merges must leave such a state out" + outside)
    if x_dtype in (None, torch.float16):
        return (". Overflow? Accumulate in fp32: convert x to float32 before squaring (x.to(tl.float32) in Triton, "
                "a float in CUDA C)" + outside)
    if op == "rmsnorm":   # a mean of squares is never negative: no cancellation to blame, for y or rstd
        return (". NaN/Inf: the rsqrt of 0 (eps left out of rsqrt(mean(x^2) + eps)), or a NaN read from memory "
                "outside the row (masks, strides)?")
    if name == "rstd" and bool(torch.isinf(wrong).all()) and bool((wrong > 0).all()):
        return (". Inf: the rsqrt of 0, a variance of exactly 0 (a constant or all-zero row) with eps left out: "
                "rstd = 1/sqrt(var + eps), eps inside the root" + outside)
    if name == "rstd" or bool(torch.isnan(wrong).all()):
        return (". NaN: the rsqrt of a negative variance? E[x^2] - mean^2, or a correction "
                "subtracted after the sum, can cancel below zero (subtract the mean before squaring)" + outside)
    return ". Inf: a division by zero (a count or N of 0?)" + outside


def _row_hint(bad: torch.Tensor) -> str:
    b = _rows(bad).any(dim=1)
    if b.shape[0] > 1 and not bool(b[0]) and bool(b[1:].all()):
        return ("; row 0 is right but every later row is wrong: where does row r start? At r times the row stride "
                "in a kernel given strides (x.stride(0) may differ from N, and y's from x's: pass each and use it "
                "for its own tensor), at r * N only where the launcher passes contiguous rows")
    return ""


def _error_hint(act: torch.Tensor, exp: torch.Tensor, bad: torch.Tensor, name: str = "y",
                x_dtype: torch.dtype | None = None, op: str = "", row_len: int | None = None,
                rounding_hint: bool = True) -> str:
    a, e, b = _rows(act), _rows(exp), _rows(bad)
    n_cols = a.shape[1]
    bad_rows = b.any(dim=1)
    if x_dtype == torch.bfloat16 and float(act[bad].abs().max()) > 1e10 >= float(exp.abs().max()) * 1e6:
        return ("; huge values from bf16 input: arithmetic on bf16 values before .to(tl.float32)? (Triton's CPU "
                "interpreter computes it on the raw bits; a GPU rounds to bf16, and fails too)")
    if act.ndim >= 2 and n_cols > 1 and bad_rows.any():  # 1-D: one value per row, no columns to blame
        first_bad_col = torch.where(b.any(dim=0))[0]
        c = int(first_bad_col[0]) if len(first_bad_col) else 0
        # a tail: column 0 right everywhere, and (nearly) every column from c on wrong in the wrong rows, not a
        # scatter of rounding errors that happens to miss column 0
        # at a block boundary (a multiple of 16, or past half the row): elsewhere column 0 is right by chance
        boundary = c % 16 == 0 or c >= n_cols // 2
        if (c > 0 and boundary and bool(b[:, 0].logical_not().all())
                and float(b[bad_rows][:, c:].float().mean()) > 0.9):
            return (f"; only columns >= {c} are wrong: check the column mask (cols < N in Triton; in CUDA C the "
                    "bound on the index, and that threads past the row still join the reduction instead of "
                    "returning) and the last chunk of the row; if the statistics are right, the offsets of the later "
                    "chunks: x, y, weight and bias each at the chunk's columns (off + tl.arange in Triton)")
    # every bad row scaled by one factor -> the normaliser (eps, N) is wrong
    if n_cols > 1 and bad_rows.any():
        sel = bad_rows & (e.abs() > 1e-6).all(dim=1)
        if sel.any():
            ratio = a[sel] / e[sel]
            spread = (ratio.max(dim=1).values - ratio.min(dim=1).values).abs()
            centre = ratio.median(dim=1).values.abs().clamp_min(1e-30)
            f = float(ratio[0].median())
            # one factor per row, and far from 1 next to its spread (rounding scatters around x1 with no factor)
            if bool((spread / centre < 1e-2).all()) and bool((spread / centre < 0.1 * (centre - 1).abs()).all()):
                if bool((a[sel] == 0).all()):
                    if name == "mean":
                        return ("; every wrong mean is 0: is the sum of x (each chunk's, the first one's too) added "
                                "into it, and is it stored?")
                    if x_dtype == torch.float16:
                        return ("; whole rows came out as zeros (rstd = 0): did the sum of squares overflow to inf? "
                                "fp16 stops at 65504; accumulate in fp32 (convert x before squaring: x.to(tl.float32) "
                                "in Triton, a float in CUDA C)")
                    return "; whole rows came out as zeros: is rstd 0 there (a sum of squares that is inf)?"
                where = (f"each wrong row is off by a constant factor (row {int(sel.nonzero()[0])}: x{f:.7g})"
                         if act.ndim >= 2 else f"the wrong values are off by a constant factor (x{f:.7g})")
                if name == "mean":
                    return f"; {where}: divide the sum by N, the row's length (not the padded block size, nor a chunk's)"
                if op == "softmax":
                    return (f"; {where}: l, the sum of exp(x - m), is wrong. Rescale it by exp(m_old - m_new) "
                            "whenever the max grows, in the per-element update and in the merge")
                if name == "rstd" and row_len and row_len > 1 and abs(f / math.sqrt((row_len - 1) / row_len) - 1) < 1e-5:
                    return (f"; {where}, which is sqrt((N-1)/N) for N = {row_len}: the sum divided by N - 1 (the "
                            "unbiased variance, torch.var's default). A norm layer divides by N (correction=0)")
                counted = _counted_times(ratio.median(dim=1).values)
                if counted:
                    return f"; {where}: {counted}"
                said = (f"; {where}: the normaliser is wrong. Is eps inside the square root, do you divide "
                        "by N (not the padded block size), and is the variance itself right?")
                if name == "rstd" and op == "layernorm" and f < 1:   # a variance too large, by the same share
                    said += (" Here rstd is too small: padded lanes in the sum of squares (each lane past N adds "
                             "mean^2 unless zeroed: tl.where(mask, x - mean, 0.0) in Triton, a bound on the index "
                             "in CUDA C), or, where chunks merge, Chan's cross term delta^2 * n * n_c / n' (n: the "
                             "count before the chunk)?")
                return said
    rb, eb = act[bad], exp[bad]
    if name == "rstd" and bool((eb != 0).all()) and bool(((rb * eb - 1).abs() < 1e-3).all()) \
            and bool(((rb - eb).abs() > 1e-2 * eb.abs()).all()):
        return ("; rstd holds 1/rstd, sqrt(var + eps): the standard deviation. Store its reciprocal "
                "(tl.rsqrt(var + eps) in Triton, rsqrtf in CUDA C)")
    if name == "rstd" and op == "rmsnorm" and bool((act[bad] < exp[bad]).all()):
        return ("; rstd is too small wherever it is wrong: the mean of squares came out too large. Padded lanes in "
                "the sum of squares? Load them as 0 (other=0.0 in Triton, a bound on the index in CUDA C); or a "
                "divisor smaller than N")
    if name == "rstd" and bool((act[bad] < exp[bad]).all()):
        return ("; rstd is too small wherever it is wrong: the variance came out too large. Padded lanes in the sum "
                "of squares? Each lane past N adds mean^2 unless zeroed (tl.where(mask, x - mean, 0.0) in "
                "Triton, a bound on the index in CUDA C); or a divisor smaller than N")
    hint = _row_hint(b)
    if hint:
        return hint
    if e.shape[0] > 2 and bad_rows.any() and not bad_rows.all():
        means = e.mean(dim=1).abs()
        if float(means[bad_rows].min()) > 10 * float(means[~bad_rows].max()) > 0:   # by far, not by chance
            return "; only rows with a large mean are wrong: cancellation (use a two-pass or Welford variance)"
    if name in PER_ROW and x_dtype in (torch.float16, torch.bfloat16):
        # small next to the statistic's own scale (a mean near 0 has large relative errors from a 16-bit sum):
        # sums rounded to 16 bits, or a small slip (one element left out) that the float32 cases show as well
        # ... and larger than float32 rounding (1e-6 of the scale: a sum around one element of the row, k + s1/N,
        # loses bits of k at that size, with x converted to float32 all along)
        if 1e-4 * float(exp.abs().max()) < float((act - exp).abs()[bad].max()) < 3e-2 * float(exp.abs().max()):
            dt = str(x_dtype).replace("torch.", "")
            return (f"; small errors in a float32 statistic of {dt} input: if only the 16-bit cases fail like "
                    "this, the sums are done in x's dtype (convert x to float32 right after the load: "
                    "x.to(tl.float32) in Triton, a float in CUDA C, and accumulate in float32), or the statistic is "
                    f"rounded to {dt} before its float32 store (no .to(Y.dtype.element_ty) on {name})")
    if rounding_hint and x_dtype == torch.float32 and name not in PER_ROW and _like_16_bit_rounding(a, e, b):
        return ("; errors the size of 16-bit rounding (fp16 keeps 11 bits, bf16 8), scattered along the rows, from "
                "float32 input: is x, a partial sum or y held in a 16-bit type somewhere (a __half or __nv_bfloat16 "
                "register or shared array in CUDA C, tl.float16/tl.bfloat16 in Triton)? float32 input stays float32 "
                "all the way")
    return "."


def _like_16_bit_rounding(a: torch.Tensor, e: torch.Tensor, b: torch.Tensor) -> bool:
    """Errors between 1e-4 and 1e-2 of the output's scale that no per-row a * y + c explains (a wrong mean or rstd
    gives exactly that: y' = (x - m') r' = (r'/r) y + (m - m') r'), in rows of at least 8 values."""
    if a.shape[1] < 8:
        return False
    scale = float(e.abs().max())
    worst = float((a - e).abs()[b].max())
    if not 1e-4 * scale < worst < 1e-2 * scale:
        return False
    rows = b.any(dim=1)
    err, ref = (a - e)[rows], e[rows]
    design = torch.stack([torch.ones_like(ref), ref], dim=-1)          # per row: err ~ c + a * y
    coef = torch.linalg.lstsq(design, err.unsqueeze(-1)).solution
    left = err - (design @ coef).squeeze(-1)
    return float(left.abs().max()) > 0.3 * worst
