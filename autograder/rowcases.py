"""Hidden-case machinery shared by the row-wise kernel lessons (03 CUDA C, 04 RMSNorm, 05 LayerNorm).

Every case builds its inputs from a fixed seed, places them in NaN-guarded buffers, runs the
student's launcher inside `student_call()` and compares every output with the float64 reference.
An `Op` says how to call the launcher, what it returns and how to judge each output.
"""
from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from helpers.compare import NOTHING_STORED, compare_outputs
from helpers.env import device, on_gpu
from helpers.reference import layernorm_ref, rmsnorm_ref, softmax_ref

from .gpu_compile import known_failure
from .harness import guarded_input, student_call
from .registry import Case, Exercise, register
from .runner import holds_stub, source_of


TRITON_COMPILE_POINTS = 2     # the "compiles for a GPU" case of a Triton exercise
ROWS_GRID = "one program per block of rows_per_program rows, triton.cdiv(M, rows_per_program) programs"
SWAPPED = ("the rows of this view are not x.stride(-2) apart (row r of dims (4, 9) sits at i*stride(0) + j*stride(1)): "
           "launch on x.reshape(M, N), which copies such a view, with that tensor's stride(0)")


@dataclass
class Spec:
    name: str
    shape: tuple
    dtype: torch.dtype = torch.float32
    eps: float = 1e-6
    weight: str = "randn"          # randn | none | fp32 (fp32 weight with a low-precision x) | bias_only (LayerNorm)
    bias: bool = True              # LayerNorm only: pass a bias
    scale: float = 1.0
    offset: float = 0.0
    zero_rows: tuple = ()
    const: float | None = None
    row_pad: int = 0
    misalign: str = ""              # "x" | "weight": x, or weight and bias, start 4 bytes past a 16-byte boundary
    swap01: bool = False           # x is a view with its first two dims swapped: no one row stride reaches every row
    neg_inf_every: int = 0         # softmax: every k-th column is -inf (masked positions)
    spike_every: int = 0           # every k-th column (from column 0) is set to `spike`: lone outliers
    spike: float = 0.0
    spike_cols: tuple = ()         # row r (of x as rows) gets `spike` at column spike_cols[r % len] (negative: from the
                                   # end): one outlier per row, wherever a shifted sum may take its shift from
    kwargs: dict = field(default_factory=dict)
    bad: str | None = None         # weight_shape | bias_shape | int_dtype | fp16 | cpu | last_dim_stride | too_long | kwarg
    bad_kwargs: tuple = ()         # kwarg: more keyword sets that must each be refused too
    seed: int = 0
    atol: float | None = None      # a looser y tolerance where fp32 rounding of x itself dominates
    stat_rtol: float | None = None # a looser mean/rstd tolerance (rows with a large mean, many chunk merges)
    launches: str | None = None    # the kernel this call must launch (dispatcher exercises)
    grid: tuple | Callable | None = None   # the grid the exercise's kernel must be launched on (rows per program,
                                           # persistent); or grid(ns, M) -> tuple, None when ns cannot say
    grid_why: str = ""             # said when it was launched on another grid
    launch_args: dict | None = None  # compile-time choices the launch must make ({"BLOCK_N": 32768}), of `launches`
    launch_why: str = ""           # said when it made others
    hint: str = ""                 # said after a numeric failure of this case that its control case passes
    chunked: bool = False          # the hint is about the chunks: the control runs each row as one chunk
    twice: bool = False            # then a second call on other values: the first call's outputs must stay as they were
    one_launch: bool = False       # the call launches the exercise's one kernel, once, and no other Triton kernel

    def control(self) -> "Spec | None":
        """The same case without what makes it special (the large mean, the spikes, the swapped view, several
        chunks): the hint is said only when this control passes, so the special input is the cause. None: no
        control."""
        # a small mean, not 0: padded lanes in a variance add mean^2 each, and must show in the control too
        plain = replace(self, name=f"{self.name} (control)", hint="", offset=3.0 if self.offset else 0.0,
                        spike_every=0, spike_cols=(), swap01=False)
        if self.chunked:
            whole_row = 1 << max(self.shape[-1] - 1, 0).bit_length()   # next_power_of_2(N)
            plain = replace(plain, kwargs={**self.kwargs, "block_n": whole_row}, launch_args=None, chunked=False)
        return None if plain == replace(self, name=plain.name, hint="") else plain


def _affine(xhat: torch.Tensor, w: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor:
    """xhat * w + b in float64, each where given."""
    return xhat * (1.0 if w is None else w.double()) + (0.0 if b is None else b.double())


@dataclass
class Op:
    name: str                                   # tolerance key: rmsnorm | layernorm
    outputs: tuple[str, ...]                    # ("y", "rstd") or ("y", "mean", "rstd")
    call: Callable                              # call(fn, x, w, b, eps, kwargs) -> out
    ref: Callable                               # ref(x, w, b, eps) -> float64 outputs
    stat_hints: dict = field(default_factory=dict)
    y_of_stats: Callable | None = None          # y_of_stats(x, w, b, *stats) -> float64 y from given statistics


RMSNORM = Op("rmsnorm", ("y", "rstd"),
             call=lambda fn, x, w, b, eps, kw: fn(x, w, eps, **kw),
             ref=lambda x, w, b, eps: rmsnorm_ref(x, w, eps),
             stat_hints={"rstd": "rstd = 1/sqrt(mean(x^2) + eps), one float32 per row"},
             y_of_stats=lambda x, w, b, rstd: _affine(x.double() * rstd.unsqueeze(-1), w, None))
LAYERNORM = Op("layernorm", ("y", "mean", "rstd"),
               call=lambda fn, x, w, b, eps, kw: fn(x, w, b, eps, **kw),
               ref=layernorm_ref,
               stat_hints={"mean": "mean = sum(x)/N over the N real elements, one float32 per row",
                           "rstd": "rstd = 1/sqrt(sum((x-mean)^2)/N + eps): biased variance, one float32 per row"},
               y_of_stats=lambda x, w, b, mean, rstd: _affine((x.double() - mean.unsqueeze(-1)) * rstd.unsqueeze(-1),
                                                              w, b))
SOFTMAX = Op("softmax", ("y",),
             call=lambda fn, x, w, b, eps, kw: fn(x, **kw),
             ref=lambda x, w, b, eps: (softmax_ref(x),))


def make_inputs(s: Spec, op: Op):
    g = torch.Generator().manual_seed(1000 + s.seed)
    x = torch.randn(s.shape, generator=g) * s.scale + s.offset
    if s.const is not None:
        x.fill_(s.const)
    if s.zero_rows:
        x.view(-1, s.shape[-1])[list(s.zero_rows)] = 0.0
    if s.neg_inf_every:
        x[..., ::s.neg_inf_every] = float("-inf")
    if s.spike_every:
        x[..., ::s.spike_every] = s.spike
    if s.spike_cols:
        rows = x.view(-1, s.shape[-1])
        for r in range(rows.shape[0]):
            rows[r, s.spike_cols[r % len(s.spike_cols)]] = s.spike
    x = x.to(s.dtype).to(device())
    N = s.shape[-1]
    w = b = None
    pdtype = torch.float32 if s.weight == "fp32" else s.dtype
    if s.weight not in ("none", "bias_only"):
        w = (torch.randn(N, generator=g) * 0.5 + 1.0).to(pdtype).to(device())
    if op is LAYERNORM and s.bias and s.weight != "none":
        b = (torch.randn(N, generator=g) * 0.5).to(pdtype).to(device())
    return x, w, b


def _sync():
    if on_gpu():
        torch.cuda.synchronize()


def judge_run(ex: Exercise, s: Spec, fn, op: Op, ns: dict | None = None) -> tuple[bool, str]:
    x0, w0, b0 = make_inputs(s, op)
    if s.swap01:   # stored as (d1, d0, ..., N), handed over as (d0, d1, ..., N): x.reshape(M, N) must copy
        x = guarded_input(x0.transpose(0, 1).contiguous(), s.row_pad, shift=int(s.misalign == "x")).transpose(0, 1)
    else:
        x = guarded_input(x0, s.row_pad, shift=int(s.misalign == "x"))
    w = None if w0 is None else guarded_input(w0, shift=int(s.misalign == "weight"))
    b = None if b0 is None else guarded_input(b0, shift=int(s.misalign == "weight"))
    before = {name: t.clone() for name, t in (("x", x), ("weight", w), ("bias", b)) if t is not None}
    where = {name: (t.data_ptr(), t.stride()) for name, t in (("x", x), ("weight", w), ("bias", b)) if t is not None}
    with student_call(torch_math=True) as spy:
        for name, t in (("x", x), ("weight", w), ("bias", b)):
            spy.watch(name, t)
        out = op.call(fn, x, w, b, s.eps, s.kwargs)
        _sync()
    if isinstance(out, list):   # [y, mean, rstd]: the same outputs as a tuple (compare_outputs takes both)
        out = tuple(out)
    if spy.forbidden:
        return False, (f"called {spy.forbidden[0]}: this exercise is about writing the kernel; "
                       f"launch {ex.kernels[0]} instead (scores zero)")
    if spy.torch_math:
        ops = ", ".join(dict.fromkeys(spy.torch_math))
        return False, (f"computed with PyTorch outside the kernel (aten {ops} on float tensors): the kernel does "
                       "the math, the launcher only checks the inputs, allocates the outputs and launches "
                       "(a PyTorch composite scores zero)")
    if spy.copied_out:
        return False, (f"took the data out of torch ({spy.copied_out[0]} of a float tensor) to compute on it: the "
                       "kernel does the math, the launcher only checks the inputs, allocates the outputs and launches")
    if not any(spy.launches.get(k) for k in ex.kernels):
        what = "CUDA kernel" if ex.needs_cuda else "Triton kernel"
        others = [k for k in spy.launches if spy.launches[k]]
        must = f"{' or '.join(ex.kernels[:3])}{' ...' if len(ex.kernels) > 3 else ''}"
        if others:
            return False, f"launched {', '.join(others)}, which is not one of {must}: {ex.functions[0]} must launch it"
        return False, f"no {what} was launched: {ex.functions[0]} must launch {must} (a PyTorch composite scores zero)"
    if ns is not None and (failed := known_failure(ns, [k for k in spy.launches if spy.launches[k]])):
        return False, (f"launched {failed[0]}, which does not compile for a GPU (the first case says why): "
                       "the interpreter runs it, a GPU fails this case")
    if s.launches and not spy.launches.get(s.launches):
        ran = ", ".join(sorted(k for k in spy.launches if spy.launches[k])) or "nothing"
        return False, f"for N={s.shape[-1]} the dispatcher should launch {s.launches}; it launched {ran}"
    if not ex.needs_cuda and len(ex.kernels) > 1 and sum(spy.launches.get(k, 0) for k in ex.kernels) > 1:   # dispatcher
        ran = ", ".join(f"{k} ({n}x)" for k in ex.kernels if (n := spy.launches.get(k, 0)))
        return False, (f"one call launched {ran}: a dispatcher launches one kernel, once, the one its rules choose "
                       "for this N and dtype (an if without elif or return runs two paths; a dispatcher that times "
                       "its candidates on the first call runs them all, and the grader cannot tell which result "
                       "it returned)")
    if s.one_launch and not ex.needs_cuda and any(n and (k != ex.kernels[0] or n > 1) for k, n in spy.launches.items()):
        ran = ", ".join(f"{k} ({n}x)" for k, n in spy.launches.items() if n)
        return False, (f"one call launched {ran}: this exercise is one fused kernel, {ex.kernels[0]}, launched once "
                       "per call (a second kernel that normalises with statistics the first one stored reads x "
                       "from HBM again, a launch whose result is thrown away doubles the work, and a second launch "
                       "for the rows left over is not needed: one grid with the row mask covers every row)")
    if s.launch_args:
        kernel = s.launches or ex.kernels[0]
        for got in spy.args.get(kernel, []):
            if any(got.get(k) != v for k, v in s.launch_args.items()):
                made = ", ".join(f"{k}={got.get(k)}" for k in s.launch_args)
                want = ", ".join(f"{k}={v}" for k, v in s.launch_args.items())
                return False, (f"launched {kernel} with {made}; this call must use {want}"
                               + (f": {s.launch_why}" if s.launch_why else ""))
    grid = s.grid(ns or {}, math.prod(s.shape[:-1])) if callable(s.grid) else s.grid
    if grid is not None:
        want = tuple(grid) + (1,) * (3 - len(grid))
        wrong = [g for g in spy.grids.get(ex.kernels[0], []) if g is not None and g != want]
        if wrong:
            shown = wrong[0][:len(grid)] if wrong[0][len(grid):] == (1,) * (3 - len(grid)) else wrong[0]
            return False, (f"launched {ex.kernels[0]} on a grid of {shown}; this call must launch {tuple(grid)}"
                           + (f": {s.grid_why}" if s.grid_why else ""))
    n_out = len(op.outputs)
    if n_out == 1 and isinstance(out, torch.Tensor):
        out = (out,)
    if not (isinstance(out, tuple) and len(out) == n_out):
        got = "None" if out is None else type(out).__name__ + (f" of {len(out)}" if isinstance(out, tuple) else "")
        want = op.outputs[0] if n_out == 1 else f"a tuple ({', '.join(op.outputs)})"
        return False, f"must return {want}, got {got}"
    oob = spy.oob_report()
    if oob:
        return False, oob
    # A load out of bounds whose values reach the outputs shows in the numbers, where the case's own message and
    # hint say more (a wrong stride, say); it is named alone when the numbers are right (a masked store dropped it).
    read = spy.oob_reads[0] if spy.oob_reads else None
    for name, t in (("x", x), ("weight", w), ("bias", b)):
        if t is not None and (t.dtype != before[name].dtype or not torch.equal(t, before[name])):
            return False, (f"modified its input {name}"
                           + (f" (now {str(t.dtype).replace('torch.', '')})" if t.dtype != before[name].dtype else "")
                           + f": the caller's tensors stay as they were; write only into {', '.join(op.outputs)}")
        if t is not None and (t.data_ptr(), t.stride()) != where[name]:
            return False, (f"re-pointed the caller's {name} at other memory ({name}.data = ..., or set_/resize_ on "
                           f"it): the caller's tensor is now a different one. Make a local name for the copy "
                           f"(x2 = x.reshape(M, N)) and leave the caller's tensors as they were")
    refs = op.ref(x0, w0, b0, s.eps)
    errs = []
    results = compare_outputs(op.name, out, refs, s.dtype, names=op.outputs, atol=s.atol, stat_rtol=s.stat_rtol,
                              device=device())
    for name, r in zip(op.outputs, results):
        if not r:
            wrong_kind = r.message.startswith(tuple(f"{name}: {w}" for w in ("shape", "dtype", "on ", "expected a",
                                                                               "got None")))
            hint = None if wrong_kind else op.stat_hints.get(name)   # a shape's failure is not the formula's
            msg = r.message + (f" ({hint})" if hint else "") + _swapped_stats_hint(op, name, out, refs)
            if name == "y" and len(op.outputs) > 1:   # say where the error is: in the statistics, or after them
                stats = list(zip(op.outputs[1:], results[1:]))
                wrong = [_unrepeated(msg, rs.message) for _, rs in stats if not rs]
                if wrong:
                    msg += " | also " + " | ".join(wrong)
                elif " elements off" in r.message:   # wrong values (not a dtype, shape or unwritten y)
                    msg += _y_error_source(op, out, refs, x0, w0, b0)
            if s.swap01 and name == "y" and NOTHING_STORED in msg:   # the kernel stored, into a copy
                msg = msg.replace(NOTHING_STORED, (
                    "torch.empty_like(x) keeps this view's permuted layout, so its reshape to (M, N) is a copy, and "
                    "the kernel wrote the copy: allocate y as torch.empty((M, N), ...) and return y.reshape(x.shape)"))
            elif s.hint and _hint_applies(ex, s, fn, op, ns):
                msg = (msg if msg.endswith("?") else msg.rstrip(".") + ".") + f" {s.hint}"
            if read and ("NaN/Inf" in r.message or "never written" in r.message):   # the guard bands hold NaN and
                # the unwritten outputs' pattern: a read that reached them is the likely cause
                return False, f"{read.partition(' (rows past M')[0]}, the likely cause of: {msg}"
            return False, msg + (f" | also {read.partition(' (rows past M')[0]}" if read else "")
        errs.append(f"{name} {r.max_abs_err:.1e}")
    # A load outside the tensors with right numbers is the loads case's to judge (a GPU cannot see it here)
    # x itself must reach the kernel, except where rows must be copied: a swapped view has no one row stride, and
    # CUDA C kernels take none (the given .contiguous() copies strided rows)
    copies = s.row_pad if ex.needs_cuda else s.swap01
    if not copies and not _launched_on(x, spy.pointers):
        return False, ("the kernel read a copy of x, not x: " + (
            "a clone (or any copy) reads and writes all of x once more before the kernel starts. Launch on "
            "x2 = x.reshape(M, C).contiguous(), which is x itself when its rows are contiguous" if ex.needs_cuda else
            "x.float(), x.to(...), x.contiguous() or a clone reads and writes all of x once more before the kernel "
            "starts (and in fp32, twice its bytes). Launch on x.reshape(M, N), a view for these rows (whatever their "
            "stride(0)), in x's own dtype"))
    if not ex.needs_cuda:   # the outputs returned must be the ones the kernel wrote, not a conversion of them
        made = [name for name, o in zip(op.outputs, out) if isinstance(o, torch.Tensor) and o.numel()
                and not _launched_on(o, spy.pointers)]
        if made:
            return False, (f"returned {', '.join(made)} from memory no kernel was given: a copy of what the kernel "
                           "wrote (y.to(x.dtype) from an fp32 buffer, .clone(), .contiguous()) writes and reads "
                           "the output once more after the kernel. Allocate y in x's dtype (rstd in float32), let "
                           "the kernel store into it, and return it (a reshape of it)")
    if s.twice and (kept := _second_call_overwrites(s, fn, op, out, w, b)):
        return False, kept
    return True, "ok (max abs err " + ", ".join(errs) + ")" + (", and a second call kept them" if s.twice else "")


def _second_call_overwrites(s: Spec, fn, op: Op, out: tuple, w, b) -> str:
    """Call the launcher again on other values of x's shape and dtype: '' when the first call's outputs are
    untouched, else what went wrong (outputs cached across calls and written again, or shared between calls)."""
    first = [t.clone() for t in out]
    x2 = make_inputs(replace(s, seed=s.seed + 500, offset=s.offset + 1.0), op)[0]
    if s.swap01:
        x2 = x2.transpose(0, 1).contiguous().transpose(0, 1)
    with student_call(torch_math=True):
        out2 = op.call(fn, x2, w, b, s.eps, s.kwargs)
        _sync()
    out2 = (out2,) if isinstance(out2, torch.Tensor) else tuple(out2 or ())
    shared = [name for name, t, t2 in zip(op.outputs, out, out2)
              if isinstance(t2, torch.Tensor) and t.untyped_storage().data_ptr() == t2.untyped_storage().data_ptr()]
    changed = [name for name, t, t0 in zip(op.outputs, out, first) if not torch.equal(t, t0)]
    if not (shared or changed):
        results = compare_outputs(op.name, out2, op.ref(x2, w, b, s.eps), s.dtype, names=op.outputs, atol=s.atol,
                                  stat_rtol=s.stat_rtol, device=device())
        wrong = [r.message for r in results if not r]
        if not wrong:
            return ""
        return (f"the second call, on other values of x of the same shape, came back wrong: {wrong[0]}. Results "
                "kept from an earlier call (memoised by shape or by address) are stale once x's values change: "
                "compute every call")
    return (f"a second call on other values of x {'overwrote' if changed else 'returned'} the first call's "
            f"{', '.join(changed or shared)}{'' if changed else ' again (the same memory)'}: outputs cached across "
            "calls are written again by the next call, under the feet of whoever kept the first result (the "
            "backward pass keeps mean and rstd). Allocate the outputs in every call: torch.empty is cheap, "
            "PyTorch's caching allocator reuses freed memory without a cudaMalloc")


Y_FROM_STATS = "the error is in how y is formed from them, or where it is stored (y's offsets and row stride)"


def _y_error_source(op: Op, out: tuple, refs: tuple, x0, w0, b0) -> str:
    """Where y's error comes from when every statistic passed its own tolerance: y formed in float64 from the
    student's statistics is as wrong as the student's y (a small error in them that y magnifies, up to |x - mean|
    * rstd * weight times), or it is right and the error is in how y is formed from them."""
    names = " and ".join(op.outputs[1:])
    try:
        stats = [t.detach().double().cpu().reshape(x0.shape[:-1]) for t in out[1:]]
        x, w, b = (None if t is None else t.cpu() for t in (x0, w0, b0))
        ref = refs[0].cpu()
        from_stats = (op.y_of_stats(x, w, b, *stats) - ref).abs().nan_to_num(float("inf")).max().item()
        yours = (out[0].detach().double().cpu().reshape(x0.shape) - ref).abs().nan_to_num(float("inf")).max().item()
    except (RuntimeError, TypeError, AttributeError):   # shapes or types the comparison has already judged
        return f" ({names} right: {Y_FROM_STATS})"
    if from_stats >= 0.5 * yours:
        return (f" ({names} pass their own tolerance, but y formed from them in float64 is off by up to "
                f"{from_stats:.3g}, as yours is (up to {yours:.3g}): a small error in the statistics grows in y, by "
                "up to |x - mean| * rstd * weight. Is eps added once, inside the root, and are the sums taken in "
                "float32?)")
    return f" ({names} right: {Y_FROM_STATS})"


def _launched_on(x: torch.Tensor, pointers: list[int]) -> bool:
    """Whether a launch was given a tensor that lies in x's storage (x itself, or a view of it)."""
    start = x.untyped_storage().data_ptr()
    return any(start <= p < start + x.untyped_storage().nbytes() for p in pointers)


def _hint_applies(ex: Exercise, s: Spec, fn, op: Op, ns) -> bool:
    """A case's hint names one cause (cancellation at a large mean, an outlier, a swapped view): it applies when
    the same case without that cause passes. Otherwise the error is elsewhere, and the hint would mislead."""
    control = s.control()
    if control is None:
        return True
    try:
        return judge_run(ex, control, fn, op, ns)[0]
    except Exception:
        return False


def judge_bad(ex: Exercise, s: Spec, fn, op: Op, ns: dict | None = None) -> tuple[bool, str]:
    # First a valid call must work: an untouched stub must not earn points for the given validation.
    sanity = Spec(name="sanity", shape=(3, 33), seed=s.seed)
    ok, msg = judge_run(ex, sanity, fn, op, ns)
    if not ok:
        return False, f"a valid call (x of 3x33, {str(sanity.dtype).replace('torch.', '')}) failed first: {msg}"
    x, w, b = make_inputs(Spec(name="bad", shape=s.shape, dtype=s.dtype, seed=s.seed), op)
    if s.bad == "weight_shape":
        w = torch.ones(s.shape[-1] + 1, dtype=x.dtype, device=x.device)
    elif s.bad == "bias_shape":
        b = torch.ones(s.shape[-1] - 1, dtype=x.dtype, device=x.device)
    elif s.bad == "int_dtype":
        x = torch.ones(s.shape, dtype=torch.int32, device=x.device)
    elif s.bad == "fp16":
        x = x.half()
    elif s.bad == "cpu":
        x = x.cpu()
    elif s.bad == "last_dim_stride":
        x = x.t()  # the last dimension now has stride != 1
    # the launcher's own arguments are its to check; the tensors' are helpers.check_rows_input's
    how = ("check it before launching" if s.bad == "kwarg"
           else "validate before launching (helpers.check_rows_input does it)")
    said = []
    for kwargs in (s.kwargs, *s.bad_kwargs):
        what = ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) if s.bad == "kwarg" else "bad input"
        try:
            with student_call():
                op.call(fn, x, w, b, s.eps, dict(kwargs))
                _sync()
        except (ValueError, TypeError) as e:
            text = str(e)   # the pass message quotes the error; a long one is cut at a word, and says so
            said.append(f"{type(e).__name__}: {text if len(text) <= 140 else text[:text.rfind(' ', 0, 140)] + ' ...'}")
            continue
        except Exception as e:
            return False, (f"{what}: raised {type(e).__name__} from deep inside; raise a clear ValueError/TypeError "
                           f"first: {how}")
        return False, f"accepted {what} without an error: {how}"
    return True, "ok: " + " | ".join(said)


def _unrepeated(said: str, more: str) -> str:
    """`more` without its sentences that `said` already holds: a hint that y and a statistic share (a wrong
    normaliser scales both) is said once, for y."""
    parts = re.split(r"(?<=[.?:])\s+", more)
    kept = [p for p in parts if len(p) < 25 or p not in said]
    return " ".join(kept) + (" (the same cause as for y)" if len(kept) < len(parts) else "")


def judge_compile(src, kernels: tuple) -> tuple[bool, str]:
    """A CUDA C source compiles with nvcc for sm_80 and sm_90 and exports every kernel by name."""
    from helpers.cudac import CudaCompileError, compile_check

    if not isinstance(src, str):
        return False, f"the CUDA source must be a string, got {type(src).__name__}"
    if holds_stub(src):
        return False, "the CUDA source still holds its TODO"
    try:
        return True, compile_check(src, kernels)
    except CudaCompileError as e:
        return False, str(e)


# The launch sweep (the "compiles for a GPU" case, tools/compile_targets.py): a row of one element, a short row
# that is not a power of two, and a length of each kind the dispatchers tell apart (a tile of rows, one row per
# program, a 16-bit row in two chunks, a row split over programs), in each dtype.
SWEEP_ROWS = (1, 1000, 4096, 32768, 131072)
SWEEP_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def call_sweep(fn, op: Op, dev, rows=SWEEP_ROWS, dtypes=SWEEP_DTYPES, bias_only: bool = True) -> None:
    """Call a launcher on 4 rows of each length and dtype, with and without weight (and bias; with bias_only,
    for LayerNorm, also a bias without weight). A launcher that refuses a length (a tile kernel for long rows)
    is skipped there."""
    variants = [(True, True), (False, False)] + ([(False, True)] if bias_only and op is LAYERNORM else [])
    g = torch.Generator().manual_seed(0)
    for n in rows:
        for dtype in dtypes:
            x = torch.randn(4, n, generator=g).to(dtype).to(dev)
            for has_w, has_b in variants:
                w = torch.ones(n, dtype=dtype, device=dev) if has_w else None
                b = torch.zeros(n, dtype=dtype, device=dev) if has_b else None
                try:
                    op.call(fn, x, w, b, 1e-5, {})
                except ValueError:
                    pass


def _launch_label(launch: dict) -> str:
    x = launch["types"].get("X", "")
    switches = [f"{k}={v}" for k, v in launch["constexprs"].items() if isinstance(v, bool) or v is None]
    return ", ".join(([f"X {x.lstrip('*')}"] if x else []) + switches)


def judge_gpu_compile(ex: Exercise, ns: dict, op: Op) -> tuple[bool, str]:
    """Every launch the exercise's launcher makes on the sweep compiles for a GPU (sm_80), compiled on the CPU
    by Triton in another process; the kernels are recorded, not run. Verdicts are kept for judge_run."""
    from . import gpu_compile

    with gpu_compile.recording_launches() as launches:
        call_sweep(ns[ex.functions[0]], op, device())
    written = gpu_compile.jit_names(ns)
    mine = gpu_compile.distinct([launch for launch in launches if launch["kernel"] in written])
    if not mine:
        return False, (f"no Triton kernel was launched: {ex.functions[0]} must launch "
                       f"{' or '.join(ex.kernels[:3])}")
    launched = list(dict.fromkeys(launch["kernel"] for launch in mine))
    stubs = [k for k in launched if k in ns and holds_stub(source_of(ns[k]))]
    if stubs:     # a stub compiles, and earns nothing
        return False, f"{', '.join(stubs)} still holds its TODO: nothing to compile yet"
    rows = gpu_compile.compile_elsewhere(gpu_compile.module_text(ns, launched), mine)
    gpu_compile.remember(ns, rows)
    for launch, row in zip(mine, rows):
        if not row["ok"]:
            return False, (f"does not compile for a GPU (sm_80), launched with {_launch_label(launch)}: "
                           f"{row['problem']}")
    return True, f"ok: {len(mine)} launches of {', '.join(launched)} compile for sm_80"


def _own_kernels(ex: Exercise, ns: dict, launched: list[str]) -> tuple[list[str], str | None]:
    """The launched kernels that the notebook defines, and why a case on their loads cannot judge them (None:
    it can)."""
    mine = [k for k in launched if k in ns]
    if not mine:
        return mine, f"no Triton kernel was launched: {ex.functions[0]} must launch {' or '.join(ex.kernels[:3])}"
    stubs = [k for k in mine if holds_stub(source_of(ns[k]))]
    return mine, f"{', '.join(stubs)} still holds its TODO" if stubs else None


# The "loads stay inside the tensors" case: rows past M (5 rows: a tile of 2, 4 or 8 rows ends past them), a row
# of one element, a short row that is not a power of two, a row longer than a 16 KB chunk in bf16 and fp32.
READ_ROWS = (1, 1000, 5000)
READ_CHUNKED_N = 1000   # with a chunk of 256: three whole chunks and a last one of 232
READ_POINTS = 4     # the only case that sees such a read on a GPU: the value cases pass it there, and here too


def judge_reads(ex: Exercise, ns: dict, op: Op, chunked: dict | None = None) -> tuple[bool, str]:
    """No load (or store) of the launcher's kernels leaves the tensors they were given, on 5 rows of each length
    in READ_ROWS, bf16 and fp32, with weight (and bias); with `chunked` (keyword arguments that set a chunk, e.g.
    {"block_n": 256}) also on rows of READ_CHUNKED_N in such chunks, the last one partial (a loop's load masked
    without the chunk's offset reads past the row there). In the interpreter every load of this
    process is checked (harness.Spy); compiled on a GPU the launches are recorded and replayed in the interpreter
    in another process (autograder/loadcheck.py). The numbers are judged by the other cases."""
    from . import loadcheck
    from .harness import read_out_of_bounds

    fn = ns[ex.functions[0]]
    calls = []
    for n in READ_ROWS:
        for dtype in (torch.bfloat16, torch.float32):
            calls.append(Spec(name="reads", shape=(5, n), dtype=dtype, seed=80 + len(calls)))
            if chunked and n == READ_ROWS[-1]:
                calls.append(Spec(name="reads", shape=(5, READ_CHUNKED_N), dtype=dtype, kwargs=dict(chunked),
                                  seed=80 + len(calls)))
    def call_each(watch_into=None):
        for s in calls:
            x0, w0, b0 = make_inputs(s, op)
            x, w, b = (None if t is None else guarded_input(t) for t in (x0, w0, b0))
            if watch_into is not None:
                for name, t in (("x", x), ("weight", w), ("bias", b)):
                    watch_into.watch(name, t)
            try:
                op.call(fn, x, w, b, s.eps, s.kwargs)
            except ValueError:   # a launcher that refuses a length (a tile kernel for long rows)
                pass

    if on_gpu():
        with loadcheck.recording_launches() as launches:
            call_each()
        launched = list(dict.fromkeys(launch["kernel"] for launch in launches))
        problem = None
    else:
        with student_call() as spy:
            call_each(spy)
        launched = list(spy.launches)
        problem = spy.oob_report() or (spy.oob_reads[0] if spy.oob_reads else None)
    mine, unjudged = _own_kernels(ex, ns, launched)
    if unjudged:
        return False, unjudged
    if on_gpu():
        from .gpu_compile import module_text
        found = loadcheck.replay_elsewhere(module_text(ns, mine), launches)
        if found:
            verb, what = found
            problem = (read_out_of_bounds(what) if verb == "tl.load" else
                       f"out-of-bounds write: {what} (replayed in the interpreter): mask every store")
    if problem:
        return False, problem
    lengths = ", ".join(map(str, READ_ROWS))
    if chunked:
        lengths += f"; {READ_CHUNKED_N} in chunks of " + ", ".join(f"{k}={v}" for k, v in chunked.items())
    return True, f"ok: every load of {', '.join(mine)} stays inside its tensors (rows of {lengths})"


X_READS_POINTS = 2


def _swapped_stats_hint(op: Op, name: str, out, refs) -> str:
    """' | mean holds rstd's values ...' where a statistic's values are another statistic's reference: the two
    stores, or the two output arguments of the launch, swapped."""
    if name not in op.outputs[1:] or not isinstance(out, tuple) or len(out) != len(op.outputs):
        return ""
    got = out[op.outputs.index(name)]
    for other in op.outputs[1:]:
        ref = refs[op.outputs.index(other)]
        if (other != name and isinstance(got, torch.Tensor) and got.shape == ref.shape and got.numel()
                and torch.allclose(got.detach().double().cpu(), ref.double().cpu(), rtol=1e-3, atol=1e-6)):
            return (f" | {name} holds {other}'s values: are the two stores (or the launch's {name} and {other} "
                    "arguments) swapped?")
    return ""


def judge_x_reads(ex: Exercise, ns: dict, op: Op, s: Spec, most: int, why: str) -> tuple[bool, str]:
    """The launcher's kernels load each element of a contiguous x at least once and at most `most` times on
    average, counted in the interpreter (here, or for compiled kernels by replaying the recorded launches in
    another process, as judge_reads does). Numbers are the other cases' business: a kernel that rereads its
    row gives the right ones, at a cost only a GPU's clock shows."""
    from . import loadcheck

    fn = ns[ex.functions[0]]
    x, w, b = make_inputs(s, op)
    if on_gpu():
        with loadcheck.recording_launches() as launches:
            out = op.call(fn, x, w, b, s.eps, s.kwargs)
        launched = list(dict.fromkeys(launch["kernel"] for launch in launches))
    else:
        with student_call() as spy:
            spy.count_loads(x)
            spy.count_launched = True   # y's loads too: an output is written, never read back
            out = op.call(fn, x, w, b, s.eps, s.kwargs)
        launched = list(spy.launches)
    y = out[0] if isinstance(out, (tuple, list)) and out else out
    y = y if isinstance(y, torch.Tensor) and y.numel() and y.data_ptr() != x.data_ptr() else None
    mine, unjudged = _own_kernels(ex, ns, launched)
    if unjudged:
        return False, unjudged
    if on_gpu():
        from .gpu_compile import module_text
        per_launch: list[dict] = []
        found = loadcheck.replay_elsewhere(module_text(ns, mine), launches, loads=per_launch)
        if found:
            return False, f"a load or store left its tensor: {found[1]} (the case on loads says more)"

        def loads_of(t):   # element loads through the pointer arguments that point into t
            first, end = t.data_ptr(), t.data_ptr() + t.element_size() * t.numel()
            n = 0
            for launch, counts in zip(launches, per_launch):
                named = zip(launch["arg_names"], launch["args"])
                n += sum(counts.get(name, 0) for name, a in [*named, *launch["kwargs"].items()]
                         if isinstance(a, dict) and first <= a.get("ptr", -1) < end)
            return n
    else:
        loads_of = spy.loads_of
    loads = loads_of(x)
    shape = "x".join(map(str, s.shape))
    reads = loads / x.numel()
    if reads < 1:
        return False, (f"the kernels loaded {loads} elements of x, fewer than its {x.numel()} ({shape}): the kernel "
                       "must read x itself, every element (a copy of x made in the launcher, or a row left out?)")
    if reads > most + 1e-9:
        extra = loads - most * x.numel()
        return False, (f"the kernels read x {reads:.4g} times ({loads} element loads for {shape}: {extra} more than "
                       f"{most} reads of its {x.numel()} elements), at most {most} here: {why}"
                       + (" (a few extra loads: a scalar tl.load of one element per chunk, x[off], counts too; "
                          "take it from the chunk already loaded)" if extra < x.numel() // 100 else ""))
    y_loads = loads_of(y) if y is not None else 0
    if y_loads:
        return False, (f"the kernels loaded y back ({y_loads} element loads for {shape}): y is an output, written "
                       "once and never read. A pass that stores into y and reloads it (y as scratch between the "
                       "loops) moves y's bytes three times where reading x again moves them once")
    return True, f"ok: x read {reads:.3g} times ({s.name})"


# The "offsets past 2**31 elements" case (a GPU with FAR_ROWS_GIB free). Row offsets in int32
# (tl.program_id(0) * stride, both int32) wrap negative there; the lessons widen the row index to int64 first.
FAR_STRIDE = 2**30 + 64     # x's 3 rows this far apart: the third starts 2**31 + 128 elements in
FAR_ROWS_GIB = 9            # one 4 GiB tensor at a time, and room for a launcher that copies it
FAR_ROWS_POINTS = 1
FAR_ROWS_HINT = ("an offset past 2**31 elements is past what an int32 offset reaches: row * stride in int32 wraps "
                 "negative there. Widen the row index before it multiplies a stride: tl.program_id(0).to(tl.int64)")


def far_rows(n: int, eps: float = 1e-6, dtype: torch.dtype = torch.bfloat16) -> Spec:
    """The Spec of an exercise's far-rows case: 3 rows of n (bf16: the 2**31 elements take 4 GiB)."""
    short = {torch.bfloat16: "bf16", torch.float32: "float32"}[dtype]
    return Spec(f"offsets past 2**31 elements in x and y (rows of {n} {short})", (3, n), dtype, eps=eps, seed=90)


def judge_far_rows(ex: Exercise, ns: dict, op: Op, s: Spec, hint: str = FAR_ROWS_HINT) -> tuple[bool, str]:
    """Offsets past 2**31 elements, in x and then in y: two calls on the rows of s (3, N). First x's rows lie
    FAR_STRIDE elements apart in one 4 GiB allocation, handed over as a strided (3, N) view; then x's first row
    is broadcast (stride 0) to enough rows that y's last two start past 2**31 elements, and those are judged.
    A CUDA C launcher's given .contiguous() copies x to contiguous rows (the strided view to 3 rows near its start,
    so that call is left out; the broadcast to as many rows as y, 8 GiB in fp32). Values are compared as in every
    case; a failure is put down to int32 offsets only when the same rows at the start of x pass."""
    fn = ns[ex.functions[0]]
    x0, w, b = make_inputs(s, op)
    M, N = x0.shape
    refs = op.ref(x0, w, b, s.eps)
    tall = -(-2**31 // N) + 2     # rows of the broadcast x: the last two start past 2**31 elements of y

    def call(x, last):   # the outputs, or (last > 0) clones of their last rows: the 4 GiB y is not kept
        with student_call():
            out = op.call(fn, x, w, b, s.eps, s.kwargs)
            _sync()
        if isinstance(out, torch.Tensor) and len(op.outputs) == 1:   # softmax returns y alone
            out = (out,)
        if last and isinstance(out, (tuple, list)):
            out = tuple(o[-last:].clone() if isinstance(o, torch.Tensor) and o.dim() else o for o in out)
        return out

    wrong = []
    try:
        if not ex.needs_cuda:
            far_x = torch.empty((M - 1) * FAR_STRIDE + N, dtype=x0.dtype, device=x0.device)
            far_x = far_x.as_strided((M, N), (FAR_STRIDE, 1)).copy_(x0)
            out = call(far_x, 0)
            del far_x
            torch.cuda.empty_cache()   # its 4 GiB back before the next call's y
            wrong = [r.message for r in compare_outputs(op.name, out, refs, s.dtype, names=op.outputs,
                                                        device=device()) if not r]
            where = "x's third row starts 2**31 + 128 elements in"
        if not wrong:
            out = call(x0[:1].expand(tall, N), 2)
            first = tuple(r[:1].expand(2, *r.shape[1:]) for r in refs)
            wrong = [r.message for r in compare_outputs(op.name, out, first, s.dtype, names=op.outputs,
                                                        device=device()) if not r]
            where = f"x is one row broadcast to {tall:,} rows: y's last two start past 2**31 elements"
    finally:
        try:
            torch.cuda.empty_cache()   # give the memory back (it fails only in a context a fault has broken)
        except RuntimeError:
            pass
    if not wrong:
        if ex.needs_cuda:   # the given .contiguous() copies x: the kernel sees contiguous rows, x's as far in as y's
            return True, f"ok: the last rows of x (as copied) and of y {(tall - 2) * N:,} elements in"
        return True, f"ok: x's rows 2**31 + 128 elements in, and y's rows {(tall - 2) * N:,} elements in"
    try:
        plain = judge_run(ex, replace(s, name="the same rows at the start of x"), fn, op, ns)[0]
    except Exception:
        plain = False
    if not plain:
        return False, f"{wrong[0]} ({where}; the same rows at the start of x fail too, so not the offsets)"
    return False, f"{wrong[0]} ({where}: {hint})"


RACECHECK_POINTS = 2


def _cuda_launches(ex: Exercise, ns: dict, op: Op, cuda_source: str, shapes: tuple,
                   weight: str = "randn", dry: bool = False) -> tuple[list, str | None]:
    """The launches the launcher makes for rows of these shapes (plain tensors, with weight and bias unless
    weight="none"; recorded, not run), and why they cannot be judged (None: they can). dry=True: the kernels are
    compiled by nvcc alone (helpers.cudac.dry_run), so that no GPU is needed."""
    from helpers import cudac

    from . import racecheck

    src = ns[cuda_source]
    if not isinstance(src, str) or holds_stub(src):
        return [], "the CUDA source still holds its TODO"
    with racecheck.recording_cuda_launches() as launches, (cudac.dry_run() if dry else contextlib.nullcontext()):
        for i, shape in enumerate(shapes):
            x, w, b = make_inputs(Spec(name="sanitized", shape=shape, eps=1e-5, weight=weight, seed=70 + i), op)
            op.call(ns[ex.functions[0]], x, w, b, 1e-5, {})
    if not any(launch["name"] in ex.kernels for launch in launches):
        return launches, f"no CUDA kernel was launched: {ex.functions[0]} must launch {' or '.join(ex.kernels[:3])}"
    return launches, None


LAUNCHER_POINTS = 2


def judge_launcher(ex: Exercise, ns: dict, op: Op, cuda_source: str, shapes: tuple) -> tuple[bool, str]:
    """The launcher, called on rows of these shapes with the kernels compiled but not run (no GPU needed): it
    launches the exercise's kernels, under their exported names, with arguments that match each kernel's
    parameters in number and kind (pointer, int, float; helpers.cudac checks each launch) and a grid and block the
    GPU would take."""
    launches, unjudged = _cuda_launches(ex, ns, op, cuda_source, shapes, dry=True)
    if unjudged:
        return False, unjudged
    names = ", ".join(dict.fromkeys(launch["name"] for launch in launches))
    rows = " and ".join("x".join(map(str, shape)) for shape in shapes)
    return True, (f"ok: launched {names} for rows {rows}, its arguments of the kinds the kernel takes (compiled, "
                  "recorded, not run: the values are checked by the cases that run it)")


X_LOADS_POINTS = 2


def judge_cuda_x_reads(ex: Exercise, ns: dict, op: Op, cuda_source: str, shape: tuple, most: int,
                       why: str) -> tuple[bool, str]:
    """The launches the launcher makes for x of `shape` (no weight, no bias; recorded, not run) load at most
    `most` times x's bytes from global memory, counted by Nsight Compute on a replay in another process
    (racecheck.LOAD_METRIC: the bytes each thread's loads ask for, whether L1, L2 or DRAM serves them)."""
    from . import racecheck

    launches, unjudged = _cuda_launches(ex, ns, op, cuda_source, (shape,), weight="none")
    if unjudged:
        return False, unjudged
    loads = racecheck.run_ncu_loads(launches, ex.kernels)
    reads = sum(loads.values()) / (math.prod(shape) * torch.float32.itemsize)   # lesson 03's rows are float32
    rows = "x".join(map(str, shape))
    if reads > most + 0.1:     # requested bytes, not sectors: a right kernel measures exactly 1.00 or 2.00
        return False, (f"the kernels' loads requested x's bytes {reads:.2f} times (x {rows}, no weight or bias; "
                       f"counted by Nsight Compute), at most {most} here: {why}")
    return True, f"ok: x's bytes loaded {reads:.2f} times ({rows}, counted by Nsight Compute)"


MEMCHECK_POINTS = 2
# compute-sanitizer's tools on the recorded launches: what a finding means, and what a clean run says
SANITIZER_SAYS = {
    "racecheck": ("compute-sanitizer racecheck found {n} shared-memory hazards; the first: {first}. Right numbers do "
                  "not prove it safe: between a write of shared memory and another warp's read of it, and between "
                  "that read and the next write of the same place, every warp must pass a block.sync()",
                  "ok: no hazards in {launches} launches ({rows})"),
    "memcheck": ("compute-sanitizer memcheck found {n} accesses outside the tensors; the first: {first}. Right "
                 "numbers do not prove the reads safe: a load past C whose value is left out of the sum still reads "
                 "memory past the row, the next row's or, after the last row, none at all (an illegal address). "
                 "Guard every load, not only the sum: c < C for a float4, c + j < C for a scalar",
                 "ok: every access of {launches} launches ({rows}) stays inside its tensor"),
}


def judge_sanitizer(tool: str, ex: Exercise, ns: dict, op: Op, cuda_source: str, shapes: tuple) -> tuple[bool, str]:
    """The launches the launcher makes for rows of these shapes (recorded here, not run) are clean under
    compute-sanitizer's `tool`, replayed in another process: racecheck (shared-memory hazards) or memcheck
    (accesses outside the tensors, on tensors without the guard bands of the other cases)."""
    from . import racecheck

    launches, unjudged = _cuda_launches(ex, ns, op, cuda_source, shapes)
    if unjudged:
        return False, unjudged
    found, first = getattr(racecheck, f"run_{tool}")(launches)
    fail, ok = SANITIZER_SAYS[tool]
    if found and tool == "memcheck" and "of shared memory" in first:
        return False, (f"compute-sanitizer memcheck found {found} accesses outside shared memory's allocation; the "
                       f"first: {first}. An index past a __shared__ array, or extern __shared__ memory launched "
                       "without its size (shared= bytes in the launch)")
    if found:
        return False, fail.format(n=found, first=first)
    return True, ok.format(launches=len(launches), rows=" and ".join("x".join(map(str, shape)) for shape in shapes))


def exercise(lesson: str, op: Op, id: str, title: str, functions: tuple, kernels: tuple, specs: list[Spec],
             *, cuda_source: str | None = None, compile_points: int = 3, given: tuple = (),
             racecheck: tuple = (), memcheck: tuple = (), x_reads: tuple = (), far_rows: Spec | None = None,
             uses: tuple = (), far_gib: float = FAR_ROWS_GIB, far_hint: str = FAR_ROWS_HINT,
             stat_hints: dict | None = None, read_chunks: dict | None = None, launcher_rows: tuple = ()):
    """Register an exercise whose cases call functions[0] on each Spec (`uses`: see Exercise.uses).

    With `cuda_source` (the name of the student's CUDA C string) the exercise is a CUDA C one: a first
    case compiles that string with nvcc (runs without a GPU), a second calls the launcher on rows of the shapes
    `launcher_rows` (default: memcheck's) with the kernels compiled but not run (judge_launcher, no GPU needed), and
    the Spec cases need CUDA to run.
    With `racecheck` (shapes of x) a second case replays the launches for those rows under compute-sanitizer's
    racecheck (kernels that share memory between warps); with `memcheck` (shapes) a case replays them under its
    memcheck, on tensors without guard bands (a load past the row whose value is masked out later). Otherwise it is a Triton one: a first case compiles the kernels its launcher launches for a GPU (they may
    have run only in the interpreter), and a case whose call launched a kernel that does not compile fails; a
    second case checks that no load leaves the tensors (right numbers do not show a read past the last row); with
    `x_reads` = (case name, spec, most, why) a third counts how many times the kernels read x on that spec's call.
    In a CUDA C exercise `x_reads` = (shape, most, why) adds a case, run once every value case passes, that counts
    with Nsight Compute the bytes the launches for x of that shape load (at most `most` times x's).
    With `far_rows` (a Spec of 3 rows) a last case, on a GPU with `far_gib` free, puts rows of x and of y past
    2**31 elements (int32 row offsets wrap there; `far_hint` says how to widen them in this exercise's language).
    `stat_hints` replace the Op's hints for the named outputs in this exercise (its own way to get a statistic).
    `read_chunks` (keyword arguments of the launcher that set the chunk) adds chunked rows to the loads case.
    """
    if stat_hints:
        op = replace(op, stat_hints={**op.stat_hints, **stat_hints})
    ex = Exercise(id=id, lesson=lesson, title=title, functions=functions, kernels=kernels, given=given, uses=uses)
    entry = functions[0]
    needs = "cuda" if cuda_source else None

    def case(s: Spec) -> Case:
        def run(ns):
            return (judge_bad if s.bad else judge_run)(ex, s, ns[entry], op, ns)
        return Case(s.name, run, needs=needs)

    ex.cases = [case(s) for s in specs]
    launcher_rows = launcher_rows or memcheck or ((5, 1000), (5, 999))
    if cuda_source:
        ex.cases.insert(0, Case("compiles with nvcc for sm_80 and sm_90", lambda ns: judge_compile(ns[cuda_source], kernels),
                                points=compile_points, needs="nvcc"))
        if racecheck:
            ex.cases.insert(1, Case("no shared-memory races (compute-sanitizer racecheck)",
                                    lambda ns: judge_sanitizer("racecheck", ex, ns, op, cuda_source, racecheck),
                                    points=RACECHECK_POINTS, needs="sanitizer"))
        if memcheck:
            ex.cases.insert(1 + bool(racecheck), Case(
                "no access outside the tensors (compute-sanitizer memcheck)",
                lambda ns: judge_sanitizer("memcheck", ex, ns, op, cuda_source, memcheck), points=MEMCHECK_POINTS,
                needs="sanitizer"))
        ex.cases.insert(1, Case("the launcher's launches (kernels compiled, not run)",
                                lambda ns: judge_launcher(ex, ns, op, cuda_source, launcher_rows),
                                points=LAUNCHER_POINTS, needs="nvcc"))
        if x_reads:   # (shape, most, why): counted by Nsight Compute on a replay, once the numbers are right
            shape, most, why = x_reads
            ex.cases.append(Case(
                f"x read at most {most} time{'s' * (most > 1)} (loads counted by Nsight Compute)",
                lambda ns: judge_cuda_x_reads(ex, ns, op, cuda_source, shape, most, why), points=X_LOADS_POINTS,
                needs="ncu", after_passes="the loads are counted once the numbers are right (a replay under "
                                          "Nsight Compute takes seconds)"))
    else:
        ex.cases.insert(0, Case("compiles for a GPU (sm_80)",
                                lambda ns: judge_gpu_compile(ex, ns, op), points=TRITON_COMPILE_POINTS,
                                needs="triton-compile"))
        ex.cases.insert(1, Case("loads stay inside the tensors (rows past M, columns past N)",
                                lambda ns: judge_reads(ex, ns, op, read_chunks), points=READ_POINTS))
        if x_reads:
            name, spec, most, why = x_reads
            ex.cases.insert(2, Case(name, lambda ns: judge_x_reads(ex, ns, op, spec, most, why),
                                    points=X_READS_POINTS))
    if far_rows:    # last: a fault here breaks the CUDA context, and no other case of the exercise after it
        ex.cases.append(Case(
            far_rows.name, lambda ns: judge_far_rows(ex, ns, op, far_rows, far_hint), points=FAR_ROWS_POINTS,
            needs_gpu=True, needs_gib=far_gib, after_passes=True,
            error_hints=(("illegal memory access", f": {far_hint}. The fault breaks this process's "
                          "CUDA context: restart the Python kernel before anything else runs on the GPU"),)))
    return register(ex)
