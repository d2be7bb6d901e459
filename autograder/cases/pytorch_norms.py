"""Hidden cases of lesson 01 (PyTorch's norm layers, taken apart and rebuilt).

Every case builds its inputs from a fixed seed, runs the student's function inside
`student_call()` (so calling torch's own norm scores zero), and compares with torch's own function
run in float64 on the same, already rounded inputs (tolerances: helpers.norms01.TOL). When a result
is wrong, the case recomputes the classic mistakes in float64 (unbiased variance, eps outside the
sqrt, batch statistics in eval, momentum the wrong way round...) and names the one that matches.
The cases run on the CPU: this lesson is about PyTorch semantics, not kernels.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers.compare import Tolerance, changed_in_place
from helpers.norms01 import GRAD_TOL, TOL

from ..harness import student_call
from ..registry import Case, Exercise, register

LESSON = "01_pytorch_norms"
F64, F32, F16, BF16 = torch.float64, torch.float32, torch.float16, torch.bfloat16
FORBIDDEN = ("batch_norm", "layer_norm", "rms_norm", "group_norm", "instance_norm", "native_batch_norm",
             "native_layer_norm", "native_group_norm", "_native_batch_norm_legit", "_batch_norm_impl_index",
             # a native op with layer norms inside (nn.TransformerEncoderLayer's fast path): zero attention and an
             # identity feed-forward leave x + LayerNorm(x), and the modes see only the outer op
             "_transformer_encoder_layer_fwd")
TORCH_FN = {"batch_norm": "F.batch_norm", "batch_norm_module": "F.batch_norm", "layer_norm": "F.layer_norm",
            "rms_norm": "F.rms_norm", "group_norm": "F.group_norm", "normalize": "torch's norms"}


# ------------------------------------------------------------------------------------ plumbing
def _dt(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(10_000 + seed)


def _x(shape, dtype, g, scale=1.0, offset=0.0):
    return (torch.randn(shape, generator=g, dtype=F64) * scale + offset).to(dtype)


def _affine_params(n_shape, dtype, g, params="both"):
    """weight in [0.5, 1.5] (never near 0, so the affine step can be undone) and bias ~ N(0, 1); params "weight"
    or "bias" keeps only that one (the other None), drawn as with both."""
    w = (torch.rand(n_shape, generator=g, dtype=F64) + 0.5).to(dtype)
    b = torch.randn(n_shape, generator=g, dtype=F64).to(dtype)
    return (None if params == "bias" else w), (None if params == "weight" else b)


class Fail(Exception):
    """Raised inside a case to fail it with a message."""


F16_HINT = "fp16 squares above 65504 overflow: compute in float32 (x.to(compute_dtype(x))), return y.to(x.dtype)"
BF16_HINT = ("bf16 is computed in float32, not float16: fp16 squares above 65504 overflow (x.to(compute_dtype(x))), "
             "return y.to(x.dtype)")
# channel_shape, not keepdim, is the usual cause of a broadcast error in the per-channel norms
BROADCAST_HINT = ("must match the size of tensor b",
                  ": the shapes do not broadcast. A per-channel (C,) vector (weight, bias, running statistics) lines "
                  "up with the LAST dim of x, not with dim 1: reshape it with .reshape(channel_shape(x)); or a mean "
                  "or var taken without keepdim=True dropped the reduced dims")

VIEW_HINT = ("view size is not compatible",
             ": .view() needs memory it can reinterpret, and x may be a non-contiguous view (a transposed tensor, "
             "channels_last memory): use .reshape(), which copies only when it must")


def _call(ex_id: str, fn, *args, may_change=(), names=None, **kwargs):
    """fn(*args, **kwargs) as student code: torch's own norms recorded, and every tensor argument (x, weight, bias;
    not those in may_change, the running statistics a training step updates) must come back unchanged, dtype
    included. names: the name of each positional argument, for the message."""
    kept = [(i, a, a.detach().clone()) for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and not any(a is m for m in may_change)]
    with student_call(forbidden=FORBIDDEN, python_calls=True) as spy:
        out = fn(*args, **kwargs)
    _no_forbidden(ex_id, spy)
    first = True
    for i, a, before in kept:
        name = "x" if first else (names[i] if names and i < len(names) else f"argument {i}")
        first = False
        if a.dtype != before.dtype:
            raise Fail(f"your function changed its input {name} in place (now {_dt(a.dtype)}, was {_dt(before.dtype)}: "
                       f"`{name}.data = {name}.to(...)`?): convert into a new tensor, {name}.to(xf.dtype), and leave "
                       "the caller's as it was")
        _unchanged(name, a, before)
    return out


def _unchanged(name: str, x, before) -> None:
    said = changed_in_place(name, before, x)
    if said:
        raise Fail(said)


def _no_forbidden(ex_id: str, spy) -> None:
    if spy.forbidden:
        raise Fail(f"called {spy.forbidden[0]}: this exercise rebuilds {TORCH_FN[ex_id]} from reductions "
                   "(mean, var, var_mean, rsqrt...); calling torch's own norm (or an nn norm layer) scores zero")


def _close(got, ref: torch.Tensor, dtype, name: str, tol=None) -> str | None:
    """None when got matches ref (float64) within TOL[dtype]; else a message."""
    tol = tol or TOL[dtype]
    if got is None:
        return f"{name}: got None (did the function return its result?)"
    if not isinstance(got, torch.Tensor):
        return f"{name}: expected a torch.Tensor, got {type(got).__name__}"
    if tuple(got.shape) != tuple(ref.shape):
        return f"{name}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
    if got.dtype != dtype:
        return (f"{name}: dtype {_dt(got.dtype)}, expected {_dt(dtype)} (compute in float32, or float64 for "
                f"float64 inputs, and return the result in the input's dtype: y.to(x.dtype))")
    a, e = got.detach().to(F64), ref.detach().to(F64)
    if a.numel() == 0:
        return None
    bad_nf = ~torch.isfinite(a) & torch.isfinite(e)
    if bad_nf.any():
        i = int(bad_nf.flatten().nonzero()[0])
        idx = tuple(int(k) for k in torch.unravel_index(torch.tensor(i), a.shape))
        return (f"{name}: {int(bad_nf.sum())} NaN/Inf where the reference is finite (first at {idx}: "
                f"{a.flatten()[i].item()}, expected {e.flatten()[i].item():.6g})")
    err = (a - e).abs()
    allowed = tol.atol + tol.rtol * e.abs()
    if bool((err <= allowed).all()):
        return None
    i = int((err - allowed).flatten().argmax())
    idx = tuple(int(k) for k in torch.unravel_index(torch.tensor(i), a.shape))
    return (f"{name}: {int((err > allowed).sum())} of {a.numel()} values off; worst at {idx}: got "
            f"{a.flatten()[i].item():.6g}, expected {e.flatten()[i].item():.6g} ({tol})")


def _matches(got, alt: torch.Tensor, dtype) -> bool:
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(alt.shape):
        return False
    tol = TOL[dtype]
    a = got.detach().to(F64)
    fin = torch.isfinite(alt)
    if not fin.all():   # a mistake that makes NaN (rsqrt of a negative "variance"): NaN at the same places, the rest close
        if not torch.equal(torch.isfinite(a), fin) or not torch.equal(torch.isnan(a), torch.isnan(alt)) or \
                not torch.equal(a[torch.isinf(a)], alt[torch.isinf(alt)]):
            return False
        a, alt = a[fin], alt[fin]
    return bool(((a - alt).abs() <= 2 * tol.atol + 2 * tol.rtol * alt.abs()).all())


def _float32_precision(got, ref) -> bool:
    """A float64 result that agrees with the reference only to about float32's 7 digits: computed in float32."""
    a, e = got.detach().to(F64), ref.detach().to(F64)
    if a.numel() == 0 or not torch.isfinite(a).all() or not torch.isfinite(e).all():
        return False
    return float((a - e).abs().max()) <= 1e-5 * (float(e.abs().max()) + 1e-30)


def _judge(got, ref, dtype, name, alts=(), extra_hint: str | None = None, tol=None) -> None:
    """Fail with a teaching message when got != ref; alts: (float64 tensor, hint) of known mistakes."""
    msg = _close(got, ref, dtype, name, tol)
    if msg is None:
        return
    if isinstance(got, torch.Tensor) and got.dtype == dtype and tuple(got.shape) == tuple(ref.shape):
        for alt, hint in alts:
            if alt is not None and not _matches(ref, alt, dtype) and _matches(got, alt, dtype):
                raise Fail(f"{msg}. Your {name} matches {hint}")
        if dtype == F64 and _float32_precision(got, ref):
            raise Fail(f"{msg}. Your {name} agrees with the reference only to about 7 digits, float32's precision: "
                       "float64 inputs are computed in float64 (x.to(compute_dtype(x))), not in float32")
        if extra_hint:
            raise Fail(f"{msg}. {extra_hint}")
    raise Fail(msg)


def _run(body):
    def run(ns):
        try:
            return body(ns)
        except Fail as e:
            return False, str(e)
    return run


def _expect_error(ex_id: str, call, what: str, types=(ValueError,), must_say: str | None = None):
    """The student's call must raise a clear ValueError (or the given types)."""
    try:
        with student_call(forbidden=FORBIDDEN, python_calls=True) as spy:
            call()
    except types as e:
        _no_forbidden(ex_id, spy)
        if must_say and must_say.lower() not in str(e).lower():
            raise Fail(f"raised {type(e).__name__}('{str(e)[:80]}'), but the message should say "
                       f"'{must_say}' so the user knows what is wrong ({what})") from None
        return f"ok: {type(e).__name__}: {str(e)[:70]}"
    except Exception as e:  # noqa: BLE001  (a crash deep inside is not a clear error)
        raise Fail(f"raised {type(e).__name__} ({str(e)[:80]}) where a clear "
                   f"{'/'.join(t.__name__ for t in types)} was expected: {what}") from None
    raise Fail(f"no error: {what}")


def _affine64(y, w, b, shape=None):
    """y * w + b in float64; w and b reshaped to `shape` (e.g. (1, C, 1, 1)) when given."""
    if w is not None:
        y = y * (w.to(F64) if shape is None else w.to(F64).reshape(shape))
    if b is not None:
        y = y + (b.to(F64) if shape is None else b.to(F64).reshape(shape))
    return y


def _bias_dropped(y_hat, w, b):
    """The alternative (output, message) of a bias ignored because no weight was given: with w None and b given, the
    wrong output is the normalized y_hat itself (float64, before the affine step). None for any other w, b."""
    if b is None or w is not None:
        return None
    return (y_hat, "the output without the bias: weight=None does not mean bias=None; apply each on its own")


def _order_alts(xd, mean, var, eps, w, b, aff, shape=None, reshape=None, swapped=True) -> list:
    """(float64 output, hint) of two slips of order: torch.var_mean's (var, mean) unpacked as (mean, var), and the
    affine step done as (y + bias) * weight. reshape: applied to a normalized output before the affine (group)."""
    back = reshape or (lambda t: t)
    alts = [(aff(back((xd - var) / torch.sqrt(mean + eps))),
             "the mean and the variance swapped: torch.var_mean returns (var, mean), in that order "
             "(var, mean = torch.var_mean(...)); yours subtracts the variance and divides by sqrt(mean + eps)")] \
        if swapped else []
    if w is not None and b is not None:
        y_hat = back((xd - mean) / torch.sqrt(var + eps))
        bb, ww = (b.to(F64), w.to(F64)) if shape is None else (b.to(F64).reshape(shape), w.to(F64).reshape(shape))
        alts.append(((y_hat + bb) * ww, "the affine step in the wrong order, (y + bias) * weight: scale first, then "
                                         "shift, y * weight + bias"))
    return alts


def _step_alts(normalize, eps, aff, w, root: str, bias: bool = True) -> list:
    """(float64 output, hint) of two slips any norm can make: eps left out, and the affine step left out.
    normalize(e) is the output before the affine step with e added to `root`; bias=False for a norm without one."""
    alts = [(aff(normalize(0.0)), f"no eps: it belongs inside the square root, sqrt({root} + eps)")]
    if w is not None:
        alts.append((normalize(eps), "the output without the affine step: after normalizing, multiply by weight "
                                     + ("and add bias (each one when it is given)" if bias else
                                        "(RMSNorm has no bias)")))
    return alts


def _undo_affine(y, w, b, shape=None):
    """(y - b) / w in float64 (w is never near 0 in the cases), w and b reshaped to `shape` when given."""
    y = y.detach().to(F64)
    if b is not None:
        y = y - (b.to(F64) if shape is None else b.to(F64).reshape(shape))
    if w is not None:
        y = y / (w.to(F64) if shape is None else w.to(F64).reshape(shape))
    return y


def _wrong_dims_hint(got, w, b, cshape, dims, dtype, what: str) -> str | None:
    """A correct norm's output (affine undone) has mean 0 over S_i; say so when it does not."""
    if not isinstance(got, torch.Tensor) or got.dtype != dtype or not torch.isfinite(got.detach()).all():
        return None
    yn = _undo_affine(got, w, b, cshape)
    off = float(yn.detach().mean(dim=dims).abs().max())
    if off > 50 * TOL[dtype].atol + 1e-3:
        return (f"Your output's mean over S_i is up to {off:.3g}, not 0: the mean is taken over the wrong dims. "
                f"{what}")
    return None


def _grads_match(pairs) -> None:
    for name, got, ref in pairs:
        if ref is None:
            continue
        if got is None:
            raise Fail(f"{name} is None after backward: the gradient does not flow through your function "
                       "(no .detach(), .item() or torch.no_grad() in the computation of y)")
        _judge(got, ref, F64, name, tol=GRAD_TOL,
               extra_hint="The forward matched, so some op breaks the chain (a detach, an in-place op on a "
                          "value autograd needs, or statistics computed under no_grad)")


def _backward_and_compare(y, yd, seed: int, leaves) -> None:
    """Backpropagate the same random grad through the student's y and the float64 yd; compare the grads.

    leaves: (name, student tensor or None, float64 tensor or None), read after backward.
    """
    go = torch.randn(tuple(yd.shape), generator=_gen(seed + 900), dtype=F64)
    y.backward(go.to(y.dtype))
    yd.backward(go)
    _grads_match([(name, None if t is None else t.grad, None if td is None else td.grad) for name, t, td in leaves])


def _leaves(grad: bool, *tensors):
    """For each tensor (or None): a clone for the student and a float64 copy for the reference, both
    requiring grad when grad is True. Returns [(student, reference), ...]."""
    out = []
    for t in tensors:
        if t is None:
            out.append((None, None))
        else:
            out.append((t.clone().requires_grad_(grad), t.to(F64, copy=True).requires_grad_(grad)))
    return out


@contextlib.contextmanager
def _calls_of(ns: dict, name: str, caller: str):
    """Record the calls of the student's own function `name` made by `caller` (group_norm inside instance_norm),
    in ns and in the globals the caller runs with (a copy of ns when grade() was handed one)."""
    calls: list = []
    orig = ns[name]

    def recording(*a, **k):
        calls.append((a, k))
        return orig(*a, **k)
    scopes = [ns]
    caller_globals = getattr(ns.get(caller), "__globals__", None)
    if caller_globals is not None and caller_globals is not ns and caller_globals.get(name) is orig:
        scopes.append(caller_globals)
    for scope in scopes:
        scope[name] = recording
    try:
        yield calls
    finally:
        for scope in scopes:
            scope[name] = orig


def _exercise(id, title, functions, cases, error_hints=()) -> Exercise:
    ex = Exercise(id=id, lesson=LESSON, title=title, functions=functions, cases=cases, error_hints=error_hints)
    return register(ex)


def _sanity(check_ok, valid: str):
    """A valid call first: an untouched stub must not earn the points of given validation code. `valid` says
    which call, for the message."""
    ok, msg = check_ok()
    if not ok:
        raise Fail(f"a valid call ({valid}) failed first: {msg}")


# ------------------------------------------------------------------------------- 1. batch_norm
@dataclass
class BN:
    name: str
    shape: tuple
    dtype: torch.dtype = F32
    training: bool = True
    running: str = "same"        # same | f32 | none
    affine: bool = True
    params: str = "both"           # with affine: "both", "weight" (bias=None) or "bias" (weight=None)
    momentum: float = 0.1
    eps: float = 1e-5
    scale: float = 1.0
    offset: float = 0.0
    grad: bool = False
    channels_last: bool = False
    steps: int = 1
    tol: object = None             # a Tolerance for this case (large means: the mean's own rounding)
    seed: int = 0


# fp32 inputs with |mean| ~ 300: a correct float32 version is off by ~4e-5 (the mean's rounding, 2^-24 * 300,
# over a std of 1); E[x^2] - E[x]^2 in float32 is off by 2e-2 to 1e-1 (measured).
LARGE_MEAN_TOL = Tolerance(atol=1e-4, rtol=1e-4)


def _bn_inputs(s: BN):
    g = _gen(s.seed)
    C = s.shape[1]
    x = _x(s.shape, s.dtype, g, s.scale, s.offset)
    st = s.dtype if s.running == "same" else F32
    rm = rv = None
    if s.running != "none":
        rm = (torch.randn(C, generator=g, dtype=F64) * 0.5 * s.scale + s.offset).to(st)
        rv = ((torch.rand(C, generator=g, dtype=F64) + 0.5) * s.scale ** 2).to(st)
    w = b = None
    if s.affine:
        w, b = _affine_params(C, s.dtype if s.running != "f32" else F32, g, s.params)
    return x, rm, rv, w, b


def _bn_alts(x, rm, rv, w, b, training, eps, updated=None):
    """float64 outputs of the classic mistakes. rm, rv: the running statistics before the call; updated: (mean,
    var) after it, for a training step that normalizes with them once updated."""
    xd = x.to(F64)
    dims = [0] + list(range(2, x.ndim))
    cs = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean = xd.mean(dims, keepdim=True)
    var_b = xd.var(dims, keepdim=True, correction=0)
    var_u = xd.var(dims, keepdim=True, correction=1) if xd.numel() // x.shape[1] > 1 else None

    def aff(y):
        return _affine64(y, w, b, cs)
    alts = []
    if training:
        if var_u is not None:
            alts.append((aff((xd - mean) / torch.sqrt(var_u + eps)),
                         "normalizing with the unbiased variance (divides by m - 1): the batch is normalized with "
                         "the biased variance, var_mean(..., correction=0); only the running estimate is unbiased"))
        alts.append((aff((xd - mean) / (torch.sqrt(var_b) + eps)),
                     "eps added outside the square root: use (x - mean) / sqrt(var + eps)"))
        if x.ndim > 2:
            m0, v0 = xd.mean(0, keepdim=True), xd.var(0, keepdim=True, correction=0)
            alts.append((aff((xd - m0) / torch.sqrt(v0 + eps)),
                         "statistics over the wrong dims (dim 0 only): BatchNorm's S_i is every dim except the "
                         f"channels, dims {tuple(dims)}"))
        used = (mean, var_b)
    else:
        alts.append((aff((xd - mean) / torch.sqrt(var_b + eps)),
                     "normalizing with the batch's statistics in eval mode: with training=False, use running_mean "
                     "and running_var (and leave them unchanged)"))
        used = (rm.to(F64).reshape(cs), rv.to(F64).reshape(cs))
        if rm.dtype != x.dtype and x.dtype in (BF16, F16):
            rounded = (rm.to(x.dtype).to(F64).reshape(cs), rv.to(x.dtype).to(F64).reshape(cs))
            alts.append((aff((xd - rounded[0]) / torch.sqrt(rounded[1] + eps)),
                         f"running statistics rounded to x's dtype ({_dt(x.dtype)}) before use "
                         "(running_mean.to(x.dtype), type_as(x)): convert float32 running statistics to "
                         "compute_dtype(x), never to x.dtype"))
        alts.append((aff((xd - used[0]) / (torch.sqrt(used[1]) + eps)),
                     "eps added outside the square root: use (x - running_mean) / sqrt(running_var + eps)"))
    if training and rm is not None:
        for m_, v_ in [(rm, rv)] + ([updated] if updated is not None else []):
            alts.append((aff((xd - m_.to(F64).reshape(cs)) / torch.sqrt(v_.to(F64).reshape(cs) + eps)),
                         "normalizing with the running statistics in training: with training=True normalize with "
                         "the batch's mean and biased variance; the running statistics are only updated"))
    alts += _step_alts(lambda e: (xd - used[0]) / torch.sqrt(used[1] + e), eps, aff, w, "var")
    alts += _order_alts(xd, used[0], used[1], eps, w, b, aff, cs, swapped=training)
    dropped = _bias_dropped((xd - used[0]) / torch.sqrt(used[1] + eps), w, b)
    return alts + ([dropped] if dropped else [])


def _check_running(name, got, before, expected, ptr, dtype, x, momentum, stat_alts):
    if got.data_ptr() != ptr:
        raise Fail(f"{name} now points to new memory (was `{name}.data = ...` or set_ used?): update the "
                   f"caller's tensor in place, e.g. {name}.mul_(1 - momentum).add_(momentum * batch_stat)")
    if got.requires_grad:
        raise Fail(f"{name} now requires grad: it joined the autograd graph. Update running statistics "
                   "under `with torch.no_grad():` (they are bookkeeping, not part of the model)")
    exp_changed = not torch.equal(expected.to(before.dtype), before)
    if exp_changed and torch.equal(got, before):
        raise Fail(f"{name} was not updated: the caller's tensor is unchanged. Rebinding a name "
                   f"(`{name} = (1 - momentum) * {name} + ...`) creates a new tensor the caller never sees; "
                   f"update it in place: {name}.mul_(1 - momentum).add_(momentum * batch_stat) or .copy_()")
    _judge(got, expected, dtype, name, alts=stat_alts)


def _bn_case(s: BN) -> Case:
    def body(ns):
        fn = ns["batch_norm"]
        x0, rm0, rv0, w0, b0 = _bn_inputs(s)
        stat_dtype = rm0.dtype if rm0 is not None else None
        if s.channels_last:  # clone() keeps the memory format
            x0 = x0.to(memory_format=torch.channels_last if x0.ndim == 4 else torch.channels_last_3d)
        (x, xd), (w, wd), (b, bd) = _leaves(s.grad, x0, w0, b0)   # student's, float64 reference's
        (rm, rmd), (rv, rvd) = _leaves(False, rm0, rv0)
        g = _gen(s.seed + 500)
        for step in range(s.steps):
            xs = x if step == 0 else _x(s.shape, s.dtype, g, s.scale, s.offset + step)
            xsd = xd if step == 0 else xs.to(F64)
            before_m = None if rm is None else rm.clone()
            before_v = None if rv is None else rv.clone()
            ptrs = (None if rm is None else rm.data_ptr(), None if rv is None else rv.data_ptr())
            y = _call("batch_norm", fn, xs, rm, rv, w, b, s.training, s.momentum, s.eps,
                      may_change=(rm, rv),   # their own checks follow (in place, unchanged in eval)
                      names=("x", "running_mean", "running_var", "weight", "bias"))
            rm_prev_d = None if rmd is None else rmd.clone()
            rv_prev_d = None if rvd is None else rvd.clone()
            yd = F.batch_norm(xsd, rmd, rvd, wd, bd, s.training, s.momentum, s.eps)
            where = f" (step {step + 1} of {s.steps}, momentum={s.momentum})" if s.steps > 1 else ""
            alts = _bn_alts(xs, rm_prev_d if rm is not None else None, rv_prev_d if rv is not None else None,
                            w0, b0, s.training, s.eps, updated=None if rmd is None else (rmd, rvd))
            dims = [0] + list(range(2, xs.ndim))
            hint = None
            if s.training:
                hint = _wrong_dims_hint(y, w0, b0, (1, s.shape[1]) + (1,) * (len(s.shape) - 2), dims, s.dtype,
                                        f"BatchNorm's S_i is every dim except the channels: dims {tuple(dims)}")
            if hint is None and s.offset and s.dtype == BF16 and not s.training:
                hint = ("bf16 inputs with a mean of ~50 (bf16 spacing 0.25 there) in eval: x - running_mean and the "
                        "rest in float32 (x.to(compute_dtype(x)), running statistics .to(compute_dtype(x))); round "
                        "only y")
            if hint is None and s.offset and s.dtype == BF16:
                hint = ("bf16 inputs with a mean of ~50 (bf16 spacing 0.25 there): compute the statistics and the "
                        "normalization in float32 and round only y. (PyTorch's own CPU kernel, given bf16 running "
                        "stats, rounds the batch mean to bf16 and is off by up to 0.125 here)")
            if hint is None and s.dtype == F16:
                hint = F16_HINT
            if hint is None and s.offset and s.dtype == F32 and s.training:   # batch statistics are computed
                hint = ("inputs with a large mean: E[x^2] - E[x]^2 cancels catastrophically in float32; subtract the "
                        "mean first (torch.var_mean / var(correction=0) do)")
            _judge(y, yd, s.dtype, "y" + where, alts=alts, extra_hint=hint, tol=s.tol)
            if rm is not None:
                m = xs.numel() // s.shape[1]
                xsd64 = xs.to(F64)
                bm = xsd64.mean(dims)
                bv = xsd64.var(dims, correction=0)
                mom = s.momentum
                if s.training:
                    m_alts = [(mom * rm_prev_d + (1 - mom) * bm,
                               "momentum applied the wrong way round: PyTorch's momentum weights the NEW batch, "
                               "running = (1 - momentum) * running + momentum * batch_stat")]
                    v_alts = [((1 - mom) * rv_prev_d + mom * bv,
                               "the biased batch variance in the running estimate: running_var is updated with the "
                               "unbiased variance, var * m / (m - 1)"),
                              (mom * rv_prev_d + (1 - mom) * bv * m / (m - 1),
                               "momentum applied the wrong way round: PyTorch's momentum weights the NEW batch, "
                               "running = (1 - momentum) * running + momentum * batch_stat")]
                    v_alts.append(((1 - mom) * rv_prev_d + mom * (bv + s.eps) * m / (m - 1),
                                   "eps added into the batch variance before the running update: running_var gets "
                                   "the unbiased batch variance itself; eps belongs only in sqrt(var + eps)"))
                    if s.dtype in (F16, BF16):   # the update's batch statistics taken from x itself, in 16 bits
                        v16, m16 = torch.var_mean(xs.detach(), dims, correction=0)
                        low = (f"the batch statistics of the running update computed in {_dt(s.dtype)} (var_mean "
                               "of x itself): compute them once from xf = x.to(compute_dtype(x)) and use them for "
                               "both the normalization and the update")
                        for scaled_m, scaled_v in (((mom * m16.to(F64)), mom * m / (m - 1) * v16.to(F64)),
                                                   ((mom * m16).to(F64), (mom * m / (m - 1) * v16).to(F64))):
                            m_alts.append(((1 - mom) * rm_prev_d + scaled_m, low))   # the product in 64 or 16 bits
                            v_alts.append(((1 - mom) * rv_prev_d + scaled_v, low))
                    n = xs.shape[0]
                    if xs.ndim > 3 and 1 < n * xs.shape[2] != m:
                        n2 = n * xs.shape[2]
                        v_alts.append(((1 - mom) * rv_prev_d + mom * bv * n2 / (n2 - 1),
                                       f"the unbiased correction with m = N * x.shape[2] = {n2}: m counts every dim "
                                       f"but the channels, x.numel() // C = {m} here"))
                    if 1 < n != m:
                        v_alts.append(((1 - mom) * rv_prev_d + mom * bv * n / (n - 1),
                                       f"the unbiased correction with the batch size, N / (N - 1): m is the number "
                                       f"of values per channel, x.numel() // C = {m} here (every dim but the "
                                       f"channels), not N = {n}"))
                else:
                    m_alts = v_alts = []
                    for name, t, was, ptr in (("running_mean", rm, before_m, ptrs[0]),
                                              ("running_var", rv, before_v, ptrs[1])):
                        if t.data_ptr() != ptr or t.dtype != was.dtype:   # `.data = ...to(float32)`, say
                            raise Fail(f"eval mode (training=False) replaced the caller's {name}" + (
                                f" (now {_dt(t.dtype)}, was {_dt(was.dtype)})" if t.dtype != was.dtype else
                                " with new memory") + ": in eval, only read the running statistics; convert a "
                                "copy for the arithmetic (running_mean.to(compute_dtype(x))) and leave the "
                                "caller's tensors as they were")
                    if not torch.equal(rm, before_m) or not torch.equal(rv, before_v):
                        raise Fail("eval mode (training=False) changed running_mean/running_var: in eval, only "
                                   "read the running statistics")
                _check_running("running_mean", rm, before_m, rmd, ptrs[0], stat_dtype, xs, mom, m_alts)
                _check_running("running_var", rv, before_v, rvd, ptrs[1], stat_dtype, xs, mom, v_alts)
        if s.grad:
            _backward_and_compare(y, yd, s.seed, [("x.grad", x, xd), ("weight.grad", w, wd), ("bias.grad", b, bd)])
        return True, "ok"
    return Case(s.name, _run(body))


def _bn_error_case(name, shape, training=True, seed=0, running=True) -> Case:
    def body(ns):
        fn = ns["batch_norm"]
        ok, msg = _bn_case(BN("sanity", (4, 3), seed=seed)).run(ns)
        _sanity(lambda: (ok, msg), "x of 4x3")
        x = _x(shape, F32, _gen(seed))
        C = shape[1]
        rm, rv = (torch.zeros(C), torch.ones(C)) if running else (None, None)
        res = _expect_error("batch_norm", lambda: fn(x, rm, rv, None, None, training, 0.1, 1e-5),
                            f"x of shape {shape} in training has one value per channel; F.batch_norm raises "
                            "ValueError('Expected more than 1 value per channel when training, ...')",
                            must_say="more than 1 value per channel")
        if running and (not torch.equal(rm, torch.zeros(C)) or not torch.equal(rv, torch.ones(C))):
            raise Fail("the ValueError is right, but running_mean/running_var changed before it was raised: check "
                       "the input first, update the running statistics only for a valid batch (F.batch_norm leaves "
                       "them as they were)")
        return True, res
    return Case(name, _run(body))


def _bn_fine_case(name, shape, training, seed) -> Case:
    """A batch of one that is NOT an error (more than one value per channel, or eval mode)."""
    inner = _bn_case(BN(name, shape, training=training, seed=seed))
    m = math.prod(shape) // shape[1]
    why = (f"in training with {m} values per channel" if training else "in eval mode (running statistics, no "
           "batch statistics needed)")

    def run(ns):
        try:
            return inner.run(ns)
        except ValueError as e:
            return False, (f"raised ValueError ({str(e)[:80]}), but x of shape {shape} is valid {why}: raise only "
                           "when a channel has a single value in training (x.numel() // C < 2)")
        except ZeroDivisionError as e:
            return False, (f"raised ZeroDivisionError ({e}) for x of shape {shape}, valid {why}: a batch of one has "
                           "N - 1 = 0; the unbiased correction m / (m - 1) counts the values per channel, "
                           "m = x.numel() // C, not the batch size")
    return Case(name, run)


def _empty_batch_case(ex_id: str, name: str, shape, groups=None, dtype=F32, seed=0) -> Case:
    """An empty batch (N = 0) is not an error in PyTorch: F.batch_norm (training or eval), F.group_norm and
    F.instance_norm return an empty y of x's shape and dtype, and batch_norm leaves the running statistics as they
    were (the mean of no values is NaN: an update would write it into them). ex_id: batch_norm, group_norm or
    instance_norm (graded in the group_norm exercise)."""
    def body(ns):
        C = shape[1]
        if ex_id == "batch_norm":
            _sanity(lambda: _bn_case(BN("sanity", (4, 3), seed=seed)).run(ns), "x of 4x3")
        else:
            _sanity(lambda: _gn_case(GN("sanity", (2, 4, 3), None if groups is None else 2, seed=seed)).run(ns),
                    "x of 2x4x3")
        g = _gen(seed)
        x = _x(shape, dtype, g)
        w, b = _affine_params(C, dtype, g, "both")
        rm, rv = torch.full((C,), 0.5), torch.full((C,), 2.0)
        fn = ns[ex_id]
        if ex_id == "batch_norm":
            args, names = (x, rm, rv, w, b, True, 0.1, 1e-5), ("x", "running_mean", "running_var", "weight", "bias")
        elif ex_id == "group_norm":
            args, names = (x, groups, w, b, 1e-5), ("x", "num_groups", "weight", "bias")
        else:
            args, names = (x, w, b, 1e-5), ("x", "weight", "bias")
        torch_fn = "F.instance_norm" if ex_id == "instance_norm" else f"F.{ex_id}"
        try:
            y = _call("group_norm" if ex_id == "instance_norm" else ex_id, fn, *args, may_change=(rm, rv),
                      names=names)
        except Fail:
            raise
        except Exception as e:  # noqa: BLE001
            why = (" (x.reshape(N, G, -1) cannot work out the -1 from 0 elements: return early when x.numel() == 0, "
                   "or give the size, (C // G) times the spatial size)" if "reshape" in str(e) else
                   " (only m = 1 is the 'more than 1 value per channel' error; m = 0 is an empty batch)"
                   if ex_id == "batch_norm" else "")
            raise Fail(f"raised {type(e).__name__} ({str(e)[:80]}) on an empty batch, x of shape {shape}: {torch_fn} "
                       f"returns an empty y of x's shape and dtype{why}") from None
        if not isinstance(y, torch.Tensor) or tuple(y.shape) != tuple(shape) or y.dtype != dtype:
            got = (f"shape {tuple(y.shape)}, {_dt(y.dtype)}" if isinstance(y, torch.Tensor) else type(y).__name__)
            raise Fail(f"an empty batch, x of shape {shape} ({_dt(dtype)}): got {got}; {torch_fn} returns an empty y "
                       "of x's shape and dtype")
        if ex_id == "batch_norm" and (not torch.equal(rm, torch.full((C,), 0.5))
                                      or not torch.equal(rv, torch.full((C,), 2.0))):
            raise Fail(f"an empty batch, x of shape {shape}, in training changed running_mean/running_var (to "
                       f"{rm[0].item():.3g}, {rv[0].item():.3g}: the mean of no values is NaN): F.batch_norm leaves "
                       "them as they were when there are no values to average; update only a batch with values")
        return True, "ok (an empty y, " + ("running statistics unchanged)" if ex_id == "batch_norm" else "as PyTorch)")
    return Case(name, _run(body))


BN_CASES = [
    _bn_case(BN("BN1d (N, C) = (7, 5), train, affine", (7, 5), seed=1)),
    _bn_case(BN("BN1d (N, C, L) = (4, 3, 11), train, no affine", (4, 3, 11), affine=False, seed=2)),
    _bn_case(BN("BN2d (3, 6, 5, 7), train", (3, 6, 5, 7), seed=3)),
    _bn_case(BN("BN3d (2, 4, 3, 5, 2), train, no affine", (2, 4, 3, 5, 2), affine=False, seed=4)),
    _bn_case(BN("weight only (bias=None), train, (6, 4, 5)", (6, 4, 5), params="weight", seed=21)),
    _bn_case(BN("bias only (weight=None), eval, (3, 4, 2, 3)", (3, 4, 2, 3), training=False, params="bias",
                seed=22)),
    _bn_case(BN("eval: uses the running stats, (5, 4, 9)", (5, 4, 9), training=False, scale=2.0, offset=1.0,
                seed=5)),
    _bn_case(BN("train without running stats (None, None)", (6, 3, 4), running="none", seed=6)),
    _bn_case(BN("momentum 0.5, three steps, (8, 3)", (8, 3), momentum=0.5, steps=3, seed=7)),
    _bn_case(BN("momentum 1.0 (running = batch, unbiased var)", (5, 4, 3), momentum=1.0, seed=8)),
    _bn_case(BN("momentum 0.0 (running stats stay), BN2d", (4, 3, 2, 3), momentum=0.0, seed=9)),
    _bn_case(BN("float64, tiny variance: eps matters (eps=1e-3)", (6, 5, 4), F64, eps=1e-3, scale=1e-2,
                seed=10)),
    _bn_case(BN("bf16 x and stats, mean ~50: compute in float32", (8, 16, 6, 6), BF16, offset=50.0, seed=11)),
    _bn_case(BN("bf16 x, float32 running stats and affine (mixed)", (6, 8, 10), BF16, running="f32", seed=12)),
    _bn_case(BN("fp32, large mean (x = 300 + randn): no cancellation", (64, 4, 16), offset=300.0,
                tol=LARGE_MEAN_TOL, seed=13)),
    _bn_case(BN("fp16 |x| ~ 300, float32 running stats and affine: squares overflow fp16", (8, 6, 10), F16,
                running="f32", scale=300.0, seed=23)),
    _bn_case(BN("eval: bf16 x, float32 running stats, mean ~50 (compute in float32)", (6, 8, 10), BF16,
                training=False, running="f32", offset=50.0, seed=24)),
    _bn_case(BN("eval: bf16 x and bf16 running stats (read them, leave them as they are)", (6, 8, 10), BF16,
                training=False, scale=2.0, offset=1.0, seed=26)),
    _bn_case(BN("channels_last memory, BN2d (2, 5, 4, 3)", (2, 5, 4, 3), channels_last=True, seed=14)),
    _bn_case(BN("bf16, no affine (weight = bias = None): y in bf16 too", (6, 4, 5), BF16, affine=False, seed=27)),
    _bn_case(BN("gradients (float64, train): x, weight, bias", (5, 3, 4), F64, grad=True, seed=15)),
    _bn_case(BN("gradients (float64, eval, 3 channels)", (4, 3, 5), F64, training=False, grad=True, seed=16)),
    _bn_error_case("batch of one (1, 6) in training: ValueError", (1, 6), seed=17),
    _bn_error_case("(1, 6, 1) in training: one value per channel", (1, 6, 1), seed=18),
    _bn_error_case("(1, 6) in training without running stats: ValueError too", (1, 6), seed=25, running=False),
    _bn_fine_case("(1, 6, 5) in training is fine (5 values per channel)", (1, 6, 5), True, 19),
    _bn_fine_case("batch of one (1, 6) in eval is fine", (1, 6), False, 20),
    _empty_batch_case("batch_norm", "an empty batch (0, 4, 5) in training: an empty y, running stats unchanged",
                      (0, 4, 5), seed=28),
]

_exercise("batch_norm", "batch_norm: F.batch_norm rebuilt (train/eval, running stats)", ("batch_norm",), BN_CASES,
          error_hints=(BROADCAST_HINT,))


# ------------------------------------------------------------------------ 2. batch_norm_module
@dataclass
class BNM:
    name: str
    shape: tuple
    kwargs: dict = field(default_factory=dict)
    steps: str = "ttte"            # t = a training step, e = an eval step
    dtype: torch.dtype = F32
    grad: bool = False
    seed: int = 0


_REF_BN = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}


def _momentum_hint(kwargs) -> str:
    if kwargs.get("momentum", 0.1) == 0.0 and kwargs["momentum"] is not None:
        return ("momentum=0.0 is a number, not None: the update factor is 0.0 and the running statistics stay as "
                "they are (test `self.momentum is None`, not `not self.momentum` or `self.momentum or ...`)")
    if "momentum" in kwargs and kwargs["momentum"] is None:
        return ("momentum=None means a cumulative moving average: at each training step the update factor is "
                "1 / num_batches_tracked (after incrementing it), so the running mean is the plain average of "
                "every batch mean so far")
    return ("each training step: num_batches_tracked += 1, then running = (1 - momentum) * running + "
            "momentum * batch_stat (unbiased variance for running_var)")


def _new_module(ns, C, kwargs, dtype=None):
    """The student's BatchNorm(C, **kwargs), moved to dtype (None: as built)."""
    cls = ns["BatchNorm"]
    with student_call(forbidden=FORBIDDEN, python_calls=True) as spy:
        mod = cls(C, **kwargs)
    _no_forbidden("batch_norm_module", spy)
    if not isinstance(mod, nn.Module):
        raise Fail(f"BatchNorm must be an nn.Module subclass, got {type(mod).__name__}")
    base = next((c for c in type(mod).__mro__ if c.__module__.startswith("torch.nn.modules.") and c is not nn.Module),
                None)
    if base is not None:
        raise Fail(f"BatchNorm subclasses torch's {base.__module__}.{base.__name__}: build it on nn.Module "
                   "itself; registering weight, bias and the buffers, and counting the batches, are the exercise")
    return mod if dtype is None else mod.to(dtype)


def _compare_state(mod, ref, dtype, where, kwargs):
    for name in ("running_mean", "running_var"):
        got, exp = getattr(mod, name, "missing"), getattr(ref, name)
        if isinstance(got, str):
            raise Fail(f"BatchNorm has no attribute {name} {where}: register it with self.register_buffer")
        if exp is None:
            if got is not None:
                raise Fail(f"with track_running_stats=False, {name} must be None {where} (register_buffer("
                           f"'{name}', None)), got a {type(got).__name__}")
            continue
        if got is None:
            raise Fail(f"{name} is None {where}, but track_running_stats=True")
        if isinstance(got, torch.Tensor) and got.requires_grad:
            raise Fail(f"{name} requires grad {where}: the running statistics joined the autograd graph (each step "
                       "keeps the last one's graph alive). Update them under `with torch.no_grad():`, as your "
                       "batch_norm does")
        if isinstance(got, torch.Tensor) and got.dtype != dtype:
            raise Fail(f"{name} is {_dt(got.dtype)} {where}, but the module was moved with .to({_dt(dtype)}): "
                       "register running statistics with self.register_buffer so that .to(), .cuda() and "
                       "state_dict() see them")
        _judge(got, exp, dtype, f"{name} {where}", extra_hint=_momentum_hint(kwargs))
    got, exp = getattr(mod, "num_batches_tracked", "missing"), ref.num_batches_tracked
    if exp is None:
        if got is not None and not isinstance(got, str):
            raise Fail(f"with track_running_stats=False, num_batches_tracked must be None {where}")
        return
    if not isinstance(got, torch.Tensor):
        raise Fail(f"num_batches_tracked {where} must be a long tensor buffer (torch.tensor(0, dtype=torch.long)), "
                   f"got {type(got).__name__}")
    if got.dtype != torch.long or int(got) != int(exp):
        raise Fail(f"num_batches_tracked {where} is {got.tolist()} ({_dt(got.dtype)}), expected {int(exp)} (int64): "
                   "increment it by one at each training step (never in eval), in place: "
                   "self.num_batches_tracked.add_(1)")


def _bnm_case(s: BNM) -> Case:
    def body(ns):
        C = s.shape[1]
        mod = _new_module(ns, C, s.kwargs, s.dtype)
        ref = _REF_BN[len(s.shape)](C, **s.kwargs).to(F64)
        g = _gen(s.seed)
        if ref.weight is not None:
            if getattr(mod, "weight", None) is None:
                raise Fail("BatchNorm(affine=True) has no weight: self.weight = nn.Parameter(torch.ones(C))")
            w, b = _affine_params(C, s.dtype, g)
            with torch.no_grad():
                mod.weight.copy_(w)
                mod.bias.copy_(b)
                ref.weight.copy_(w.to(F64))
                ref.bias.copy_(b.to(F64))
        elif getattr(mod, "weight", None) is not None or getattr(mod, "bias", None) is not None:
            raise Fail("with affine=False, weight and bias must be None (self.register_parameter('weight', None))")
        y = yd = x = xd = None
        for k, mode in enumerate(s.steps):
            mod.train(mode == "t")
            ref.train(mode == "t")
            x = _x(s.shape, s.dtype, g, 1.0 + k, 0.5 * k)
            xd = x.to(F64)
            if s.grad:
                x.requires_grad_(True)
                xd.requires_grad_(True)
            where = f"after step {k + 1} ({'train' if mode == 't' else 'eval'}) of '{s.steps}'"
            x_before = x.detach().clone()
            with student_call(forbidden=FORBIDDEN, python_calls=True) as spy:
                y = mod(x)
            _no_forbidden("batch_norm_module", spy)
            _unchanged("x", x, x_before)
            stats = [None if t is None else t.detach().clone() for t in (ref.running_mean, ref.running_var)]
            yd = ref(xd)
            alts = _bn_alts(x.detach(), *stats, None if ref.weight is None else ref.weight.detach(),
                            None if ref.bias is None else ref.bias.detach(), mode == "t" or stats[0] is None, ref.eps,
                            updated=None if stats[0] is None else (ref.running_mean, ref.running_var))
            hint = None
            if mode == "e" and ref.running_mean is not None:
                yb = F.batch_norm(xd.detach(), None, None, None if ref.weight is None else ref.weight.detach(),
                                  None if ref.bias is None else ref.bias.detach(), True, 0.0, ref.eps)
                if _matches(y, yb, s.dtype):
                    hint = ("In eval mode the module must normalize with its running statistics: pass "
                            "training=False to batch_norm (batch statistics only when self.training or when there "
                            "are no running stats)")
            # y depends on the running statistics (the momentum bookkeeping) only in eval
            _judge(y, yd, s.dtype, f"y {where}", alts=() if hint else alts,   # the module's own hint first
                   extra_hint=hint or (_momentum_hint(s.kwargs) if mode == "e" else None))
            _compare_state(mod, ref, s.dtype, where, s.kwargs)
        if s.grad:
            _backward_and_compare(y, yd, s.seed, [("x.grad", x, xd), ("weight.grad", mod.weight, ref.weight),
                                                  ("bias.grad", mod.bias, ref.bias)])
        return True, "ok"
    return Case(s.name, _run(body))


def _bnm_initial_case(name, kwargs, seed=0) -> Case:
    def body(ns):
        _sanity(lambda: _bnm_case(BNM("sanity", (4, 3), dict(kwargs), steps="te", seed=seed)).run(ns), "x of 4x3")
        C = 5
        mod = _new_module(ns, C, kwargs)    # as built: the dtypes of its state are checked
        ref = nn.BatchNorm1d(C, **kwargs)
        keys, ref_keys = list(mod.state_dict()), list(ref.state_dict())
        if sorted(keys) != sorted(ref_keys):
            raise Fail(f"state_dict() keys {keys}, expected {ref_keys}: weight/bias as nn.Parameter, running "
                       "stats and num_batches_tracked with self.register_buffer (plain attributes are not saved, "
                       "moved by .to() or loaded)")
        params = sorted(n for n, _ in mod.named_parameters())
        ref_params = sorted(n for n, _ in ref.named_parameters())
        if params != ref_params:
            raise Fail(f"parameters {params}, expected {ref_params}: only weight and bias are trained "
                       "(nn.Parameter); running statistics are buffers")
        for k, v in ref.state_dict().items():
            got = mod.state_dict()[k]
            if got.dtype != v.dtype or tuple(got.shape) != tuple(v.shape) or not torch.equal(got, v):
                raise Fail(f"initial {k}: {got.tolist()} ({_dt(got.dtype)}, shape {tuple(got.shape)}), expected "
                           f"{v.tolist()} ({_dt(v.dtype)}, shape {tuple(v.shape)}): weight ones, bias zeros, "
                           "running_mean zeros, running_var ones, num_batches_tracked torch.tensor(0, dtype=torch.long)")
        return True, "ok"
    return Case(name, _run(body))


def _bnm_load_state_case(name, seed) -> Case:
    def body(ns):
        C, shape = 4, (3, 4, 5, 5)
        ref = nn.BatchNorm2d(C).to(F64)
        g = _gen(seed)
        ref.train()
        for k in range(3):
            ref(_x(shape, F64, g, 2.0, 1.0))
        with torch.no_grad():
            w, b = _affine_params(C, F64, g)
            ref.weight.copy_(w)
            ref.bias.copy_(b)
        mod = _new_module(ns, C, {}, F64)
        try:
            mod.load_state_dict(ref.state_dict())
        except Exception as e:  # noqa: BLE001
            raise Fail(f"load_state_dict(nn.BatchNorm2d(...).state_dict()) failed: {str(e)[:160]} (use the same "
                       "names: weight, bias, running_mean, running_var, num_batches_tracked)") from None
        mod.eval()
        ref.eval()
        x = _x(shape, F64, g)
        with student_call(forbidden=FORBIDDEN, python_calls=True) as spy:
            y = mod(x)
        _no_forbidden("batch_norm_module", spy)
        _judge(y, ref(x), F64, "y in eval after load_state_dict")
        return True, "ok"
    return Case(name, _run(body))


def _bnm_resume_case(name, seed) -> Case:
    """momentum=None resumed from a checkpoint: the cumulative factor counts from the loaded num_batches_tracked."""
    def body(ns):
        C, shape, kwargs = 3, (6, 3, 4), {"momentum": None}
        ref = nn.BatchNorm1d(C, **kwargs).to(F64)
        g = _gen(seed)
        for k in range(3):
            ref(_x(shape, F64, g, 1.0 + k, 0.5 * k))
        mod = _new_module(ns, C, kwargs, F64)
        try:
            mod.load_state_dict(ref.state_dict())
        except Exception as e:  # noqa: BLE001
            raise Fail(f"load_state_dict(nn.BatchNorm1d(...).state_dict()) failed: {str(e)[:160]}") from None
        for k, mode in enumerate("tte"):
            mod.train(mode == "t")
            ref.train(mode == "t")
            x = _x(shape, F64, g, 2.0, 1.0 + k)
            with student_call(forbidden=FORBIDDEN, python_calls=True) as spy:
                y = mod(x)
            _no_forbidden("batch_norm_module", spy)
            yd = ref(x)
            where = f"after step {k + 1} ({'train' if mode == 't' else 'eval'}) of 'tte', resumed at 3 batches"
            try:
                _compare_state(mod, ref, F64, where, kwargs)
            except Fail as e:
                raise Fail(f"{e}. After load_state_dict the count is the loaded num_batches_tracked (3 here): the "
                           "momentum=None factor is 1 / num_batches_tracked, read from the buffer, not from a counter "
                           "of your own") from None
            _judge(y, yd, F64, f"y {where}")
        return True, "ok"
    return Case(name, _run(body))


def _bnm_bad_channels_case(name, seed) -> Case:
    def body(ns):
        _sanity(lambda: _bnm_case(BNM("sanity", (4, 3), steps="t", seed=seed)).run(ns), "x of 4x3")
        mod = _new_module(ns, 3, {}, F32)
        x = _x((4, 5, 2), F32, _gen(seed))
        return True, _expect_error("batch_norm_module", lambda: mod(x),
                                   "BatchNorm(3) given x with 5 channels must raise ValueError")
    return Case(name, _run(body))


def _bnm_batch_of_one_case(name, seed) -> Case:
    def body(ns):
        _sanity(lambda: _bnm_case(BNM("sanity", (4, 3), steps="t", seed=seed)).run(ns), "x of 4x3")
        mod = _new_module(ns, 3, {}, F32)
        x = _x((1, 3), F32, _gen(seed))
        res = _expect_error("batch_norm_module", lambda: mod(x),
                            "a (1, C) batch in training: one value per channel", must_say="more than 1 value")
        mod.eval()
        with student_call(forbidden=FORBIDDEN, python_calls=True) as spy:
            y = mod(x)
        _no_forbidden("batch_norm_module", spy)
        ref = nn.BatchNorm1d(3).to(F64).eval()
        _judge(y, ref(x.to(F64)), F32, "y of a (1, C) batch in eval (valid: running stats)")
        return True, res
    return Case(name, _run(body))


BNM_CASES = [
    _bnm_initial_case("a train and an eval step, then a new module's state = nn.BatchNorm1d's (names, values, "
                      "dtypes)", {}),
    _bnm_initial_case("affine=False, track_running_stats=False: Nones", {"affine": False,
                                                                          "track_running_stats": False}),
    _bnm_case(BNM("(N, C) = (6, 5): 3 train steps, then eval", (6, 5), seed=1)),
    _bnm_case(BNM("(N, C, L), momentum 0.3: t t e t e", (4, 3, 7), {"momentum": 0.3}, steps="ttete", seed=2)),
    _bnm_case(BNM("2d (3, 4, 5, 5): 3 train steps, then eval", (3, 4, 5, 5), seed=3)),
    _bnm_case(BNM("3d (2, 3, 2, 3, 4): t t e", (2, 3, 2, 3, 4), steps="tte", seed=4)),
    _bnm_case(BNM("momentum=None: cumulative average over 4 steps", (8, 3), {"momentum": None}, steps="tttte",
                  seed=5)),
    _bnm_case(BNM("momentum=None, 2d, with evals in between", (4, 2, 3, 3), {"momentum": None},
                  steps="tetete", seed=6)),
    _bnm_case(BNM("momentum=0.0: running stats stay (0.0 is not None)", (5, 3, 4), {"momentum": 0.0}, steps="ttte",
                  seed=15)),
    _bnm_case(BNM("affine=False: 2 train steps, eval", (5, 4, 6), {"affine": False}, steps="tte", seed=7)),
    _bnm_case(BNM("track_running_stats=False: batch stats in eval too", (5, 3, 4),
                  {"track_running_stats": False}, steps="tete", seed=8)),
    _bnm_case(BNM("eps=1e-2, momentum 0.9, float64", (6, 3, 2), {"eps": 1e-2, "momentum": 0.9}, steps="tttee",
                  dtype=F64, seed=9)),
    _bnm_case(BNM("module.to(bfloat16): 2 train steps, eval", (8, 4, 3, 3), steps="tte", dtype=BF16, seed=10)),
    _bnm_case(BNM("gradients through a training step (float64)", (5, 3, 4), steps="t", dtype=F64, grad=True,
                  seed=11)),
    _bnm_load_state_case("load_state_dict from nn.BatchNorm2d, then eval", 12),
    _bnm_resume_case("momentum=None resumed from a state_dict (3 batches), then t t e", 16),
    _bnm_bad_channels_case("wrong channel count: ValueError", 13),
    _bnm_batch_of_one_case("(1, C): ValueError in training, fine in eval", 14),
]

_exercise("batch_norm_module", "BatchNorm: nn.BatchNorm1d/2d/3d rebuilt as a module", ("BatchNorm", "batch_norm"),
          BNM_CASES, error_hints=(BROADCAST_HINT,))


# --------------------------------------------------------------------- 3-4. layer_norm, rms_norm
@dataclass
class LN:
    name: str
    shape: tuple
    nshape: object                 # int | tuple | list | torch.Size
    dtype: torch.dtype = F32
    weight: bool = True
    bias: bool = True
    eps: float | None = 1e-5
    scale: float = 1.0
    offset: float = 0.0
    const: float | None = None
    grad: bool = False
    tol: object = None
    seed: int = 0
    permuted: bool = False         # x a non-contiguous view (its first two dims swapped)


def _tuple_shape(ns_) -> tuple:
    return (ns_,) if isinstance(ns_, int) else tuple(ns_)


def _rms_eps(eps, dtype):
    return torch.finfo(F64 if dtype == F64 else F32).eps if eps is None else eps


def _ln_alts(kind, x, w, b, k, eps):
    xd = x.to(F64)
    dims = tuple(range(x.ndim - k, x.ndim))

    def aff(y):
        return _affine64(y, w, b)
    alts = []
    if kind == "layer":
        mean = xd.mean(dims, keepdim=True)
        vb = xd.var(dims, keepdim=True, correction=0)
        if math.prod(x.shape[x.ndim - k:]) > 1:
            vu = xd.var(dims, keepdim=True, correction=1)
            alts.append((aff((xd - mean) / torch.sqrt(vu + eps)),
                         "normalizing with the unbiased variance (divides by m - 1): LayerNorm uses the biased "
                         "variance, correction=0"))
        alts.append((aff((xd - mean) / (torch.sqrt(vb) + eps)),
                     "eps added outside the square root: use (x - mean) / sqrt(var + eps)"))
        if k > 1:
            m1 = xd.mean(-1, keepdim=True)
            v1 = xd.var(-1, keepdim=True, correction=0)
            alts.append((aff((xd - m1) / torch.sqrt(v1 + eps)),
                         "statistics over the last dim only: normalized_shape has "
                         f"{k} dims, so reduce over the last {k} dims of x"))
        alts += _step_alts(lambda e: (xd - mean) / torch.sqrt(vb + e), eps, aff, w, "var")
        alts += _order_alts(xd, mean, vb, eps, w, b, aff)
        dropped = _bias_dropped((xd - mean) / torch.sqrt(vb + eps), w, b)
        if dropped:
            alts.append(dropped)
    else:
        ms = xd.square().mean(dims, keepdim=True)
        alts.append((aff(xd / (torch.sqrt(ms) + eps)),
                     "eps added outside the square root: use x / sqrt(mean(x^2) + eps)"))
        vb = xd.var(dims, keepdim=True, correction=0)
        alts.append((aff((xd - xd.mean(dims, keepdim=True)) / torch.sqrt(vb + eps)),
                     "LayerNorm: RMSNorm does not subtract the mean; divide x by sqrt(mean(x^2) + eps)"))
        alts.append((aff(xd / torch.sqrt(xd.var(dims, keepdim=True, correction=0) + eps)),
                     "dividing by the standard deviation: RMSNorm divides by the root mean square, "
                     "sqrt(mean(x^2) + eps), not by sqrt(var + eps)"))
        if k > 1:
            ms1 = xd.square().mean(-1, keepdim=True)
            alts.append((aff(xd / torch.sqrt(ms1 + eps)),
                         f"statistics over the last dim only: normalized_shape has {k} dims, so reduce over the last "
                         f"{k} dims of x"))
            alts.append((aff(xd / torch.sqrt(xd.square().sum(dims, keepdim=True) / x.shape[-1] + eps)),
                         f"the sum of squares over the last {k} dims divided by x.shape[-1] only: the mean divides "
                         f"by every normalized element, {math.prod(x.shape[x.ndim - k:])} here (or use .mean(dims))"))
        alts += _step_alts(lambda e: xd / torch.sqrt(ms + e), eps, aff, w, "mean(x^2)", bias=False)
    return alts


def _ln_case(kind: str, s: LN) -> Case:
    fname = "layer_norm" if kind == "layer" else "rms_norm"

    def body(ns):
        fn = ns[fname]
        g = _gen(s.seed)
        x0 = _x(s.shape, s.dtype, g, s.scale, s.offset)
        if s.const is not None:
            x0 = torch.full(s.shape, s.const, dtype=s.dtype)
        if s.permuted:   # the same values, as a non-contiguous view: clone() keeps the strides
            x0 = x0.transpose(0, 1).contiguous().transpose(0, 1)
        tshape = _tuple_shape(s.nshape)
        k = len(tshape)
        w0, b0 = _affine_params(tshape, s.dtype, g)
        w0 = w0 if s.weight else None
        b0 = b0 if (s.bias and kind == "layer") else None
        (x, xd), (w, wd), (b, bd) = _leaves(s.grad, x0, w0, b0)
        if kind == "layer":
            y = _call(fname, fn, x, s.nshape, w, b, s.eps, names=("x", "normalized_shape", "weight", "bias"))
            yd = F.layer_norm(xd, tshape, wd, bd, s.eps)
            eps = s.eps
        else:
            y = _call(fname, fn, x, s.nshape, w, s.eps, names=("x", "normalized_shape", "weight"))
            eps = _rms_eps(s.eps, s.dtype)
            yd = F.rms_norm(xd, tshape, wd, eps)
        alts = _ln_alts(kind, x0, w0, b0, k, eps)
        if kind == "rms" and s.eps is None:
            if s.dtype == F64:
                alts.insert(0, (F.rms_norm(x0.to(F64), tshape, None if w0 is None else w0.to(F64),
                                           torch.finfo(F32).eps),
                                "eps = torch.finfo(float32).eps: float64 inputs are computed in float64, so eps=None "
                                "means torch.finfo(float64).eps there"))
            else:
                alts.insert(0, (F.rms_norm(x0.to(F64), tshape, None if w0 is None else w0.to(F64),
                                           torch.finfo(s.dtype).eps),
                                f"eps = torch.finfo({_dt(s.dtype)}).eps: with eps=None PyTorch uses the epsilon of "
                                "the dtype the math runs in, torch.finfo(float32).eps for fp16/bf16/fp32 inputs "
                                "(float64's for float64)"))
            for fixed in (1e-6, 1e-5):
                alts.append((F.rms_norm(x0.to(F64), tshape, None if w0 is None else w0.to(F64), fixed),
                             f"eps = {fixed:g}, a fixed number: eps=None means the machine epsilon of the compute "
                             "dtype, torch.finfo(compute_dtype(x)).eps"))
            alts.insert(0, (F.rms_norm(x0.to(F64), tshape, None if w0 is None else w0.to(F64), 0.0),
                            "eps = 0 (or eps outside the square root, the same for so small an eps): eps=None "
                            "means the machine epsilon of the compute dtype, torch.finfo(compute_dtype(x)).eps, "
                            "inside the square root"))
        hint = None
        if kind == "layer" and s.const is None:
            dims = tuple(range(len(s.shape) - k, len(s.shape)))
            hint = _wrong_dims_hint(y, w0, b0, None, dims, s.dtype,
                                    f"LayerNorm reduces over the last len(normalized_shape) = {k} dims: {dims}")
        if hint is None and s.offset and s.dtype == BF16:
            hint = ("bf16 inputs with a large mean: compute in float32 (x.to(compute_dtype(x))), return y.to(x.dtype)")
        if hint is None and s.offset and s.dtype == F32:
            hint = ("inputs with a large mean: E[x^2] - E[x]^2 cancels catastrophically in float32; subtract the mean "
                    "first (torch.var_mean / var(correction=0) do)")
        if hint is None and s.dtype == F16:
            hint = F16_HINT
        if hint is None and s.dtype == BF16 and s.scale > 100:
            hint = BF16_HINT
        _judge(y, yd, s.dtype, "y", alts=alts, extra_hint=hint, tol=s.tol)
        if s.grad:
            _backward_and_compare(y, yd, s.seed, [("x.grad", x, xd), ("weight.grad", w, wd), ("bias.grad", b, bd)])
        return True, "ok"
    return Case(s.name, _run(body))


def _ln_bad_case(kind: str, name: str, bad: str, seed: int) -> Case:
    fname = "layer_norm" if kind == "layer" else "rms_norm"

    def body(ns):
        _sanity(lambda: _ln_case(kind, LN("sanity", (3, 8), 8, seed=seed)).run(ns), "x of 3x8")
        fn = ns[fname]
        x = _x((4, 6, 8), F32, _gen(seed))
        if bad == "shape":
            call = (lambda: fn(x, (6,), None, None, 1e-5)) if kind == "layer" else (lambda: fn(x, (6,), None, 1e-5))
            what = "normalized_shape=(6,) does not match the last dim of x (4, 6, 8)"
        else:
            w = torch.ones(6, 8)
            call = (lambda: fn(x, 8, w, None, 1e-5)) if kind == "layer" else (lambda: fn(x, 8, w, 1e-5))
            what = "weight of shape (6, 8) with normalized_shape=(8,)"
        return True, _expect_error(fname, call, what)
    return Case(name, _run(body))


LN_CASES = [
    _ln_case("layer", LN("int normalized_shape, (4, 10, 32), affine", (4, 10, 32), 32, seed=1)),
    _ln_case("layer", LN("tuple (5, 7) of x (3, 5, 7), affine", (3, 5, 7), (5, 7), seed=2)),
    _ln_case("layer", LN("tuple of every dim: x (4, 6), shape (4, 6), no affine", (4, 6), (4, 6), weight=False,
                         bias=False, seed=3)),
    _ln_case("layer", LN("torch.Size and 3 dims: (2, 3, 4, 5, 6) over (4, 5, 6), no affine", (2, 3, 4, 5, 6),
                         torch.Size([4, 5, 6]), weight=False, bias=False, seed=4)),
    _ln_case("layer", LN("list [9] and weight only (bias=False)", (6, 9), [9], bias=False, seed=5)),
    _ln_case("layer", LN("bias only (weight=None)", (5, 12), 12, weight=False, seed=6)),
    _ln_case("layer", LN("float64, tiny variance: eps matters (1e-4)", (5, 3, 20), (3, 20), F64, eps=1e-4,
                         scale=1e-2, seed=7)),
    _ln_case("layer", LN("bf16, mean ~50: compute in float32", (16, 128), 128, BF16, offset=50.0, seed=8)),
    _ln_case("layer", LN("fp32, large mean (x = 300 + randn): no cancellation", (8, 257), 257, offset=300.0,
                         tol=LARGE_MEAN_TOL, seed=9)),
    _ln_case("layer", LN("fp16 |x| ~ 300: squares overflow fp16", (8, 160), 160, F16, scale=300.0, seed=16)),
    _ln_case("layer", LN("bf16 |x| ~ 300: float32 math, not fp16 (squares overflow fp16)", (8, 160), 160, BF16,
                         scale=300.0, seed=17)),
    _ln_case("layer", LN("constant rows: y = bias (var = 0)", (3, 33), 33, const=3.0, seed=10)),
    _ln_case("layer", LN("fp16, no affine (weight = bias = None): y in fp16 too", (6, 40), 40, F16, weight=False,
                         bias=False, seed=19)),
    _ln_case("layer", LN("1-D x (640,), normalized_shape 640", (640,), 640, seed=11)),
    _ln_case("layer", LN("normalized size 1: y = bias", (7, 1), 1, seed=12)),
    _ln_case("layer", LN("gradients (float64), tuple shape", (3, 4, 5), (4, 5), F64, grad=True, seed=13)),
    _ln_case("layer", LN("non-contiguous x (a transposed view), (4, 3, 16)", (4, 3, 16), 16, permuted=True, seed=18)),
    _ln_bad_case("layer", "bad input: normalized_shape != x's last dims", "shape", 14),
    _ln_bad_case("layer", "bad input: weight shape != normalized_shape", "weight", 15),
]

_exercise("layer_norm", "layer_norm: F.layer_norm rebuilt", ("layer_norm",), LN_CASES, error_hints=(VIEW_HINT,))

RMS_CASES = [
    _ln_case("rms", LN("int shape, (4, 10, 64), weight, eps=1e-6", (4, 10, 64), 64, eps=1e-6, seed=21)),
    _ln_case("rms", LN("tuple (5, 7), weight, eps=1e-5", (3, 5, 7), (5, 7), eps=1e-5, seed=22)),
    _ln_case("rms", LN("no weight, eps=1e-6", (6, 33), 33, weight=False, eps=1e-6, seed=23)),
    _ln_case("rms", LN("eps=None, fp32, tiny x: eps = finfo(float32).eps", (4, 48), 48, eps=None, scale=1e-4,
                       seed=24)),
    _ln_case("rms", LN("eps=None, float64, tiny x: finfo(float64).eps", (4, 48), 48, F64, eps=None, scale=1e-9,
                       seed=25)),
    _ln_case("rms", LN("eps=None, bf16, tiny x: float32's eps, not bf16's", (4, 48), 48, BF16, eps=None,
                       scale=1e-3, seed=26)),
    _ln_case("rms", LN("eps=None, fp16, tiny x: float32's eps, not fp16's", (4, 48), 48, F16, eps=None,
                       scale=1e-3, seed=36)),
    _ln_case("rms", LN("bf16 (4, 7, 96), weight", (4, 7, 96), 96, BF16, eps=1e-6, seed=27)),
    _ln_case("rms", LN("fp16 |x| ~ 300: squares overflow fp16", (8, 160), 160, F16, eps=1e-6, scale=300.0,
                       seed=28)),
    _ln_case("rms", LN("bf16 |x| ~ 300: float32 math, not fp16 (squares overflow fp16)", (8, 160), 160, BF16,
                       eps=1e-6, scale=300.0, seed=37)),
    _ln_case("rms", LN("float64, eps matters (1e-4, |x| ~ 1e-2)", (5, 40), 40, F64, eps=1e-4, scale=1e-2,
                       seed=29)),
    _ln_case("rms", LN("mean ~5: no mean is subtracted", (6, 50), 50, eps=1e-6, offset=5.0, seed=30)),
    _ln_case("rms", LN("zero rows: y = 0", (3, 20), 20, eps=1e-6, const=0.0, seed=31)),
    _ln_case("rms", LN("bf16, no weight: y in bf16 too", (6, 40), 40, BF16, weight=False, eps=1e-6, seed=39)),
    _ln_case("rms", LN("1-D x (100,)", (100,), 100, weight=False, eps=1e-6, seed=32)),
    _ln_case("rms", LN("gradients (float64), tuple shape, weight", (3, 4, 5), (4, 5), F64, eps=1e-6, grad=True,
                       seed=33)),
    _ln_case("rms", LN("non-contiguous x (a transposed view), (4, 3, 16)", (4, 3, 16), 16, eps=1e-6, permuted=True,
                       seed=38)),
    _ln_bad_case("rms", "bad input: normalized_shape != x's last dims", "shape", 34),
    _ln_bad_case("rms", "bad input: weight shape != normalized_shape", "weight", 35),
]

_exercise("rms_norm", "rms_norm: F.rms_norm rebuilt (eps=None included)", ("rms_norm",), RMS_CASES,
          error_hints=(VIEW_HINT,))


# ------------------------------------------------------------------------------ 5. group_norm
@dataclass
class GN:
    name: str
    shape: tuple
    groups: int | None = None      # None: instance_norm
    dtype: torch.dtype = F32
    affine: bool = True
    params: str = "both"           # with affine: "both", "weight" (bias=None) or "bias" (weight=None)
    eps: float = 1e-5
    scale: float = 1.0
    offset: float = 0.0
    grad: bool = False
    seed: int = 0
    channels_last: bool = False


def _gn_alts(x, G, w, b, eps):
    xd = x.to(F64)
    N, C = x.shape[:2]
    cs = (1, C) + (1,) * (x.ndim - 2)

    def aff(y):
        return _affine64(y, w, b, cs)
    xg = xd.reshape(N, G, -1)
    mean, vb = xg.mean(-1, keepdim=True), xg.var(-1, keepdim=True, correction=0)
    alts = []
    if xg.shape[-1] > 1:
        vu = xg.var(-1, keepdim=True, correction=1)
        alts.append((aff(((xg - mean) / torch.sqrt(vu + eps)).reshape(x.shape)),
                     "normalizing with the unbiased variance (divides by m - 1): GroupNorm uses the biased "
                     "variance, correction=0"))
    alts.append((aff(((xg - mean) / (torch.sqrt(vb) + eps)).reshape(x.shape)),
                 "eps added outside the square root: use (x - mean) / sqrt(var + eps)"))
    if 1 < G < C:
        xi = xd.reshape(N, C // G, G, -1)
        mi, vi = xi.mean((1, 3), keepdim=True), xi.var((1, 3), keepdim=True, correction=0)
        alts.append((aff(((xi - mi) / torch.sqrt(vi + eps)).reshape(x.shape)),
                     "groups of interleaved channels (c % G): the channels of a group are consecutive, group g holds "
                     "channels g*C/G ... (g+1)*C/G - 1; reshape to (N, G, -1)"))
    if w is not None and b is not None and 1 < G < C:
        wg = w.to(F64).reshape(G, C // G)[:, 0].repeat_interleave(C // G)
        bg = b.to(F64).reshape(G, C // G)[:, 0].repeat_interleave(C // G)
        y = ((xg - mean) / torch.sqrt(vb + eps)).reshape(x.shape)
        alts.append((y * wg.reshape(cs) + bg.reshape(cs),
                     "a weight per group: GroupNorm's weight and bias are per channel, shape (C,)"))
    alts += _step_alts(lambda e: ((xg - mean) / torch.sqrt(vb + e)).reshape(x.shape), eps, aff, w, "var")
    alts += _order_alts(xg, mean, vb, eps, w, b, aff, cs, reshape=lambda t: t.reshape(x.shape))
    dropped = _bias_dropped(((xg - mean) / torch.sqrt(vb + eps)).reshape(x.shape), w, b)
    return alts + ([dropped] if dropped else [])


def _gn_case(s: GN) -> Case:
    inst = s.groups is None

    def body(ns):
        fn = ns["instance_norm" if inst else "group_norm"]
        g = _gen(s.seed)
        C = s.shape[1]
        G = C if inst else s.groups
        x0 = _x(s.shape, s.dtype, g, s.scale, s.offset)
        if s.channels_last:  # clone() keeps the memory format
            x0 = x0.to(memory_format=torch.channels_last)
        w0 = b0 = None
        if s.affine:
            w0, b0 = _affine_params(C, s.dtype, g, s.params)
        (x, xd), (w, wd), (b, bd) = _leaves(s.grad, x0, w0, b0)
        calls = []
        if inst:
            with _calls_of(ns, "group_norm", "instance_norm") as calls:
                y = _call("group_norm", fn, x, w, b, s.eps, names=("x", "weight", "bias"))
            yd = F.instance_norm(xd, weight=wd, bias=bd, eps=s.eps)
        else:
            y = _call("group_norm", fn, x, G, w, b, s.eps, names=("x", "num_groups", "weight", "bias"))
            yd = F.group_norm(xd, G, wd, bd, s.eps)
        cs = (1, C) + (1,) * (len(s.shape) - 2)
        xs = x0.to(F64).reshape(s.shape[0], G, -1)
        hint = None
        if isinstance(y, torch.Tensor) and y.dtype == s.dtype and tuple(y.shape) == s.shape and \
                torch.isfinite(y.detach()).all() and s.dtype != BF16:
            yn = _undo_affine(y, w0, b0, cs).reshape(s.shape[0], G, -1)
            if float(yn.mean(-1).abs().max()) > 1e-3 and xs.shape[-1] > 1:
                hint = ("Your output's mean over each (sample, group) is not 0: the statistics are over the wrong "
                        "set. S_i of GroupNorm: one sample, the C/G consecutive channels of one group, all positions "
                        "(x.reshape(N, G, -1), reduce the last dim)")
        if hint is None and s.offset:
            hint = "inputs with a large mean: compute in float32 (x.to(compute_dtype(x))), return y.to(x.dtype)"
        if hint is None and s.dtype == F16:
            hint = F16_HINT
        alts = _gn_alts(x0, G, w0, b0, s.eps)
        if inst and s.eps != 1e-5:
            alts.insert(0, (F.instance_norm(x0.to(F64), weight=None if w0 is None else w0.to(F64),
                                            bias=None if b0 is None else b0.to(F64), eps=1e-5),
                            "group_norm's default eps, 1e-5: instance_norm must pass its eps on to group_norm"))
        _judge(y, yd, s.dtype, "y", alts=alts, extra_hint=hint)
        if inst and len(calls) != 1:
            said = ("never called group_norm (or called it under another name)" if not calls
                    else f"called group_norm {len(calls)} times")
            raise Fail(f"instance_norm gave the right numbers but {said}: write it as one call, "
                       "group_norm(x, C, weight, bias, eps) (instance norm is group norm with one channel per group)")
        if s.grad:
            _backward_and_compare(y, yd, s.seed, [("x.grad", x, xd), ("weight.grad", w, wd), ("bias.grad", b, bd)])
        return True, "ok"
    return Case(s.name, _run(body))


def _gn_bad_case(name, shape, groups, what, must_say=None, seed=0, weight_shape=None) -> Case:
    inst = groups is None

    def body(ns):
        _sanity(lambda: _gn_case(GN("sanity", (2, 4, 3), None if inst else 2, seed=seed)).run(ns), "x of 2x4x3")
        fn = ns["instance_norm" if inst else "group_norm"]
        x = _x(shape, F32, _gen(seed))
        w = None if weight_shape is None else torch.ones(weight_shape)
        call = (lambda: fn(x, w, None, 1e-5)) if inst else (lambda: fn(x, groups, w, None, 1e-5))
        return True, _expect_error("group_norm", call, what, must_say=must_say)
    return Case(name, _run(body))


GN_CASES = [
    _gn_case(GN("GN (2, 6, 5), G=3, affine", (2, 6, 5), 3, seed=1)),
    _gn_case(GN("GN 2d (3, 8, 4, 5), G=4, affine", (3, 8, 4, 5), 4, seed=2)),
    _gn_case(GN("G=1 (LayerNorm over C, H, W), no affine", (2, 6, 3, 3), 1, affine=False, seed=3)),
    _gn_case(GN("G=C (InstanceNorm), affine", (2, 5, 7), 5, seed=4)),
    _gn_case(GN("GN 3d (2, 6, 2, 3, 4), G=2, no affine", (2, 6, 2, 3, 4), 2, affine=False, seed=5)),
    _gn_case(GN("(N, C) = (4, 12) input, G=3", (4, 12), 3, seed=6)),
    _gn_case(GN("batch of one (1, 6, 4): fine for GN", (1, 6, 4), 2, seed=7)),
    _gn_case(GN("float64, tiny variance: eps matters (1e-3)", (3, 4, 6), 2, F64, eps=1e-3, scale=1e-2, seed=8)),
    _gn_case(GN("bf16, mean ~50: compute in float32", (4, 8, 6, 6), 4, BF16, offset=50.0, seed=9)),
    _gn_case(GN("fp16 |x| ~ 300, G=2: squares overflow fp16", (2, 6, 5), 2, F16, scale=300.0, seed=22)),
    _gn_case(GN("gradients (float64), G=2, affine", (3, 4, 5), 2, F64, grad=True, seed=10)),
    _gn_case(GN("weight only (bias=None), G=2, (3, 4, 5)", (3, 4, 5), 2, params="weight", seed=17)),
    _gn_case(GN("bias only (weight=None), G=3, (2, 6, 4)", (2, 6, 4), 3, params="bias", seed=18)),
    _gn_case(GN("channels_last memory (2, 6, 4, 5), G=3", (2, 6, 4, 5), 3, channels_last=True, seed=23)),
    _gn_case(GN("bf16, no affine (weight = bias = None), G=3: y in bf16 too", (2, 6, 5), 3, BF16, affine=False,
                seed=24)),
    _gn_bad_case("C=6 not divisible by G=4: ValueError", (2, 6, 2), 4,
                 "GroupNorm with 6 channels and 4 groups; (N, 4, -1) reshapes fine but mixes groups",
                 must_say="divisible", seed=11),
    _gn_bad_case("weight per group (G,) instead of per channel: ValueError", (2, 6, 3), 3,
                 "a weight of shape (3,) for 6 channels (the given check_channels_input call raises)",
                 seed=12, weight_shape=(3,)),
    _gn_case(GN("instance_norm (2, 3, 7), no affine", (2, 3, 7), None, affine=False, seed=13)),
    _gn_case(GN("instance_norm 2d (2, 4, 5, 5), affine", (2, 4, 5, 5), None, seed=14)),
    _gn_case(GN("instance_norm float64 gradients", (2, 3, 6), None, F64, grad=True, seed=15)),
    _gn_bad_case("instance_norm of (N, C, 1): ValueError", (3, 4, 1), None,
                 "one spatial element per instance; F.instance_norm raises ValueError('Expected more than 1 "
                 "spatial element when training, ...')", must_say="spatial", seed=16),
    _gn_bad_case("instance_norm of (N, C) = (4, 3): ValueError", (4, 3), None,
                 "no spatial dims, one element per instance; F.instance_norm raises ValueError('Expected more than "
                 "1 spatial element when training, ...')", must_say="spatial", seed=19),
    _gn_case(GN("instance_norm (2, 3, 5, 1): 5 spatial elements, fine", (2, 3, 5, 1), None, seed=20)),
    _gn_case(GN("instance_norm (2, 3, 1, 5): 5 spatial elements, fine", (2, 3, 1, 5), None, seed=21)),
    _gn_case(GN("instance_norm eps=1e-2 on |x| ~ 0.1 (pass eps on)", (2, 3, 6), None, eps=1e-2, scale=0.1, seed=25)),
    _empty_batch_case("group_norm", "an empty batch (0, 6, 5), G=3, bf16: an empty y", (0, 6, 5), 3, BF16, seed=26),
    _empty_batch_case("instance_norm", "instance_norm of an empty batch (0, 3, 4): an empty y", (0, 3, 4), seed=27),
]

_exercise("group_norm", "group_norm, and instance_norm through it", ("group_norm", "instance_norm"), GN_CASES,
          error_hints=(BROADCAST_HINT, VIEW_HINT))


# -------------------------------------------------------------------------------- 6. normalize
def _norm_ref(x, dims, eps, center):
    xd = x.to(F64)
    if center:
        v, m = torch.var_mean(xd, dim=dims, keepdim=True, correction=0)
        return (xd - m) / torch.sqrt(v + eps)
    return xd / torch.sqrt(xd.square().mean(dim=dims, keepdim=True) + eps)


def _normalize_case(name, shape, dims, dtype=F32, eps=1e-5, center=True, scale=1.0, offset=0.0, grad=False,
                    seed=0, permuted=False) -> Case:
    def body(ns):
        fn = ns["normalize"]
        x0 = _x(shape, dtype, _gen(seed), scale, offset)
        if permuted:     # a non-contiguous view with the same values
            x0 = x0.transpose(0, 1).contiguous().transpose(0, 1)
        x = x0.clone().requires_grad_(grad)
        y = _call("normalize", fn, x, dims, eps, center)
        nd = len(shape)
        cd = tuple(sorted(d % nd for d in ((dims,) if isinstance(dims, int) else dims)))
        yd = _norm_ref(x0, cd, eps, center)
        xd = x0.to(F64)
        alts = []
        if center:
            mean = xd.mean(cd, keepdim=True)
            alts.append(((xd - mean) / torch.sqrt(xd.var(cd, keepdim=True, correction=1) + eps),
                         "normalizing with the unbiased variance (divides by m - 1): use correction=0"))
            alts.append(((xd - mean) / (torch.sqrt(xd.var(cd, keepdim=True, correction=0)) + eps),
                         "eps added outside the square root: use (x - mean) / sqrt(var + eps)"))
            alts.append((_norm_ref(x0, cd, eps, False), "center=False: with center=True, subtract the mean"))
            alts += _order_alts(xd, mean, xd.var(cd, keepdim=True, correction=0), eps, None, None, lambda t: t)
        else:
            alts.append((_norm_ref(x0, cd, eps, True), "center=True: with center=False, do not subtract the mean "
                                                       "(RMS: x / sqrt(mean(x^2) + eps))"))
            alts.append((xd / (torch.sqrt(xd.square().mean(cd, keepdim=True)) + eps),
                         "eps added outside the square root: use x / sqrt(mean(x^2) + eps)"))
        alts.append((_norm_ref(x0, cd, 0.0, center), "no eps: it belongs inside the square root, sqrt(" +
                     ("var" if center else "mean(x^2)") + " + eps)"))
        hint = None
        if offset and dtype == BF16:
            hint = "bf16 inputs with a large mean: compute in float32 (x.to(compute_dtype(x))), return out.to(x.dtype)"
        if dtype == F16:
            hint = F16_HINT
        _judge(y, yd, dtype, "y", alts=alts, extra_hint=hint)
        if grad:
            xdg = x0.to(F64).requires_grad_(True)
            _backward_and_compare(y, _norm_ref(xdg, cd, eps, center), seed, [("x.grad", x, xdg)])
        return True, "ok"
    return Case(name, _run(body))


def _normalize_bad_case(name, dims, seed) -> Case:
    def body(ns):
        _sanity(lambda: _normalize_case("sanity", (3, 8), -1, seed=seed).run(ns), "x of 3x8")
        x = _x((3, 4, 5), F32, _gen(seed))
        return True, _expect_error("normalize", lambda: ns["normalize"](x, dims, 1e-5, True),
                                   f"dims={dims!r} for x of 3 dims (keep the given canonical_dims call first)")
    return Case(name, _run(body))


@dataclass
class VIA:
    name: str
    kind: str
    shape: tuple
    dtype: torch.dtype = F32
    affine: bool = True
    eps: float = 1e-5
    groups: int | None = None
    nshape: object = None
    scale: float = 1.0             # |x| ~ scale: with scale ~ sqrt(eps), a dropped eps shows
    seed: int = 0


def _via_case(s: VIA) -> Case:
    def body(ns):
        fn = ns["norm_via_normalize"]
        g = _gen(s.seed)
        x0 = _x(s.shape, s.dtype, g, s.scale)
        xd = x0.to(F64)
        per_channel = s.kind in ("batch", "instance", "group")
        pshape = (s.shape[1],) if per_channel else _tuple_shape(s.nshape)
        w = b = None
        if s.affine:
            w, b = _affine_params(pshape, s.dtype, g)
            if s.kind == "rms":
                b = None
        wd = None if w is None else w.to(F64)
        bd = None if b is None else b.to(F64)
        with _calls_of(ns, "normalize", "norm_via_normalize") as calls:
            y = _call("normalize", fn, s.kind, x0.clone(), w, b, s.eps, num_groups=s.groups,
                      normalized_shape=s.nshape, names=("kind", "x", "weight", "bias"))
        dims_seen = []
        for a, k in calls:
            xa, da = (list(a) + [k.get("x"), k.get("dims")][len(a):])[:2]
            dims_seen.append((tuple(xa.shape) if isinstance(xa, torch.Tensor) else None, da))
        def reference(eps):
            if s.kind == "batch":
                return F.batch_norm(xd, None, None, wd, bd, True, 0.1, eps)
            if s.kind == "layer":
                return F.layer_norm(xd, _tuple_shape(s.nshape), wd, bd, eps)
            if s.kind == "rms":
                return F.rms_norm(xd, _tuple_shape(s.nshape), wd, eps)
            if s.kind == "instance":
                return F.instance_norm(xd, weight=wd, bias=bd, eps=eps)
            return F.group_norm(xd, s.groups, wd, bd, eps)
        yd = reference(s.eps)
        k = len(_tuple_shape(s.nshape)) if s.nshape is not None else 0   # layer and rms: dims normalized
        sset = {"batch": "every dim except the channels, [0, 2, 3, ...]",
                "layer": f"the last len(normalized_shape) = {k} dims",
                "rms": f"the last {k} dims, with center=False (RMSNorm subtracts no mean)",
                "instance": "the spatial dims, [2, 3, ...]",
                "group": "the last dim of x.reshape(N, num_groups, -1) (each group's consecutive channels and "
                         "positions)"}[s.kind]
        alts = [(reference(1e-300), "no eps anywhere: normalize adds eps inside the square root, sqrt(var + eps) "
                                 "(or sqrt(mean(x^2) + eps)), and norm_via_normalize passes it on")]
        if s.eps != 1e-5:
            alts.append((reference(1e-5), "normalize's default eps, 1e-5: pass eps on to normalize"))
        if s.kind == "group":
            alts += _gn_alts(x0, s.groups, w, b, s.eps)
        seen = f" (normalize was called with dims={dims_seen[0][1]!r} on a {dims_seen[0][0]} tensor)" \
            if dims_seen else ""
        _judge(y, yd, s.dtype, f"y of kind={s.kind!r}", alts=alts,
               extra_hint=f"For {s.kind} norm, S_i is {sset}{seen}")
        if not dims_seen:
            raise Fail(f"norm_via_normalize({s.kind!r}, ...) gave the right numbers but never called normalize: "
                       "express it as one call of normalize with the right dims")
        if len(dims_seen) > 1:
            raise Fail(f"norm_via_normalize({s.kind!r}, ...) called normalize {len(dims_seen)} times (dims "
                       f"{', '.join(repr(d) for _, d in dims_seen)}): every norm of this lesson is ONE normalize "
                       "over its reduce set S_i; find the dims (or the reshaped view) that make it one call")
        return True, "ok"
    return Case(s.name, _run(body))


NORMALIZE_CASES = [
    _normalize_case("dims=-1 (an int), (4, 33)", (4, 33), -1, seed=1),
    _normalize_case("dims=(0, 2): BatchNorm's set on (5, 3, 7)", (5, 3, 7), (0, 2), seed=2),
    _normalize_case("dims=[-2, -1] on (2, 3, 4, 5)", (2, 3, 4, 5), [-2, -1], seed=3),
    _normalize_case("center=False (RMS) over (1, 2)", (3, 6, 5), (1, 2), center=False, seed=4),
    _normalize_case("float64, eps matters (1e-3, |x| ~ 1e-2)", (4, 30), (1,), F64, eps=1e-3, scale=1e-2, seed=5),
    _normalize_case("bf16, mean ~50: compute in float32", (8, 64), -1, BF16, offset=50.0, seed=6),
    _normalize_case("fp16 |x| ~ 300: squares overflow fp16", (6, 40), -1, F16, scale=300.0, seed=17),
    _normalize_case("gradients (float64), dims (0, 2)", (4, 3, 5), (0, 2), F64, grad=True, seed=7),
    _normalize_case("non-contiguous x (a transposed view), dims -1", (4, 3, 16), -1, permuted=True, seed=20),
    _normalize_bad_case("bad dims: () must raise, not reduce over everything", (), 8),
    _normalize_bad_case("bad dims: a repeated dim (1, -2)", (1, -2), 9),
    _via_case(VIA("via: batch (N, C, H, W), affine", "batch", (4, 3, 5, 5), seed=10)),
    _via_case(VIA("via: batch (N, C, L), no affine", "batch", (6, 4, 3), affine=False, seed=11)),
    _via_case(VIA("via: layer, normalized_shape (5, 6)", "layer", (3, 4, 5, 6), nshape=(5, 6), seed=12)),
    _via_case(VIA("via: layer, eps=1e-2 on |x| ~ 1e-2 (eps matters)", "layer", (3, 4, 5, 6), nshape=(5, 6),
                  eps=1e-2, scale=1e-2, seed=18)),
    _via_case(VIA("via: batch 3d (2, 3, 2, 3, 4), eps=1e-2 on |x| ~ 0.1", "batch", (2, 3, 2, 3, 4), affine=False,
                  eps=1e-2, scale=0.1, seed=19)),
    _via_case(VIA("via: rms, normalized_shape 32, eps 1e-6", "rms", (4, 7, 32), nshape=32, eps=1e-6, seed=13)),
    _via_case(VIA("via: instance (2, 3, 4, 4), affine", "instance", (2, 3, 4, 4), seed=14)),
    _via_case(VIA("via: group G=3 on (2, 6, 5), affine", "group", (2, 6, 5), groups=3, seed=15)),
    _via_case(VIA("via: group G=2 on 3d (2, 4, 2, 3, 3)", "group", (2, 4, 2, 3, 3), groups=2, affine=False,
                  seed=16)),
    _via_case(VIA("via: instance (N, C, L) = (3, 4, 6), eps=1e-2 on |x| ~ 0.1", "instance", (3, 4, 6), eps=1e-2,
                  scale=0.1, seed=21)),
    _via_case(VIA("via: group G=2 on (2, 4, 5), eps=1e-2 on |x| ~ 0.1", "group", (2, 4, 5), groups=2, eps=1e-2,
                  scale=0.1, seed=22)),
    _via_case(VIA("via: rms, normalized_shape (6,) of (2, 3, 4, 6), eps=1e-2 on |x| ~ 0.1", "rms", (2, 3, 4, 6),
                  nshape=(6,), eps=1e-2, scale=0.1, seed=23)),
    _via_case(VIA("via: rms, normalized_shape (4, 6) of (2, 3, 4, 6) (two dims)", "rms", (2, 3, 4, 6),
                  nshape=(4, 6), seed=24)),
]

_exercise("normalize", "normalize: the one function behind every norm", ("normalize", "norm_via_normalize"),
          NORMALIZE_CASES, error_hints=(BROADCAST_HINT, VIEW_HINT))
