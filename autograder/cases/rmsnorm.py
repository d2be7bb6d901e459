"""Hidden cases of lesson 04 (Triton fused RMSNorm forward).

Every case builds its inputs from a fixed seed, places them in NaN-guarded buffers, runs the
student's launcher inside `student_call()` and compares y and rstd with the float64 reference.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from helpers.compare import compare, tolerance_for
from helpers.env import device, on_gpu
from helpers.reference import rmsnorm_ref

from ..harness import guarded_input, student_call
from ..registry import Case, Exercise, register

LESSON = "04_triton_rmsnorm"


@dataclass
class Spec:
    name: str
    shape: tuple
    dtype: torch.dtype = torch.float32
    eps: float = 1e-6
    weight: str = "randn"          # randn | none | fp32 (fp32 weight with a low-precision x)
    scale: float = 1.0
    offset: float = 0.0
    zero_rows: tuple = ()
    const: float | None = None
    row_pad: int = 0
    kwargs: dict = field(default_factory=dict)
    bad: str | None = None         # weight_shape | int_dtype | last_dim_stride | too_long | kwarg
    seed: int = 0


def _inputs(s: Spec):
    g = torch.Generator().manual_seed(1000 + s.seed)
    x = torch.randn(s.shape, generator=g) * s.scale + s.offset
    if s.const is not None:
        x.fill_(s.const)
    if s.zero_rows:
        x.view(-1, s.shape[-1])[list(s.zero_rows)] = 0.0
    x = x.to(s.dtype).to(device())
    N = s.shape[-1]
    w = None
    if s.weight != "none":
        w = (torch.randn(N, generator=g) * 0.5 + 1.0)
        w = w.to(torch.float32 if s.weight == "fp32" else s.dtype).to(device())
    return x, w


def _sync():
    if on_gpu():
        torch.cuda.synchronize()


def _call(fn, x, w, eps, kwargs):
    with student_call() as spy:
        out = fn(x, w, eps, **kwargs)
        _sync()
    return out, spy


def _judge_run(ex: Exercise, s: Spec, fn) -> tuple[bool, str]:
    x0, w0 = _inputs(s)
    x = guarded_input(x0, s.row_pad)
    w = None if w0 is None else guarded_input(w0)
    x_before = x.clone()
    out, spy = _call(fn, x, w, s.eps, s.kwargs)
    if spy.forbidden:
        return False, (f"called {spy.forbidden[0]}: this exercise is about writing the kernel; "
                       f"launch {ex.kernels[0]} instead (scores zero)")
    if not any(spy.launches.get(k) for k in ex.kernels):
        return False, (f"no Triton kernel was launched: {ex.functions[0]} must launch "
                       f"{' or '.join(ex.kernels)} (a PyTorch composite scores zero)")
    if not (isinstance(out, tuple) and len(out) == 2):
        got = "None" if out is None else type(out).__name__
        return False, f"must return a tuple (y, rstd), got {got}"
    oob = spy.oob_report()
    if oob:
        return False, oob
    if not torch.equal(x, x_before):
        return False, "modified its input x: write only into y and rstd"
    y, rstd = out
    y_ref, rstd_ref = rmsnorm_ref(x0, w0, s.eps)
    r = compare(y, y_ref, tolerance_for("rmsnorm", s.dtype), name="y", dtype=s.dtype, device=device())
    if not r:
        return False, r.message
    r2 = compare(rstd, rstd_ref, tolerance_for("stat", torch.float32), name="rstd", dtype=torch.float32,
                 device=device())
    if not r2:
        return False, r2.message + " (rstd = 1/sqrt(mean(x^2) + eps), one float32 per row)"
    return True, f"ok (max abs err y {r.max_abs_err:.1e}, rstd {r2.max_abs_err:.1e})"


def _judge_bad(ex: Exercise, s: Spec, fn) -> tuple[bool, str]:
    # First a valid call must work: an untouched stub must not earn points for the given validation.
    ok, msg = _judge_run(ex, Spec(name="sanity", shape=(3, 33), seed=s.seed), fn)
    if not ok:
        return False, f"a valid call failed first: {msg}"
    x, w = _inputs(Spec(name="bad", shape=s.shape, dtype=s.dtype, seed=s.seed))
    kwargs = dict(s.kwargs)
    if s.bad == "weight_shape":
        w = torch.ones(s.shape[-1] + 1, dtype=x.dtype, device=x.device)
    elif s.bad == "int_dtype":
        x = torch.ones(s.shape, dtype=torch.int32, device=x.device)
    elif s.bad == "last_dim_stride":
        x = x.t()  # the last dimension now has stride != 1
    try:
        with student_call():
            fn(x, w, s.eps, **kwargs)
            _sync()
    except (ValueError, TypeError) as e:
        return True, f"ok: {type(e).__name__}: {str(e)[:90]}"
    except Exception as e:
        return False, (f"raised {type(e).__name__} from deep inside; validate first and raise a clear "
                       f"ValueError/TypeError (helpers.check_rows_input does it)")
    return False, "accepted bad input without an error: validate before launching (helpers.check_rows_input)"


def _case(ex: Exercise, s: Spec) -> Case:
    entry = ex.functions[0]

    def run(ns):
        fn = ns[entry]
        return (_judge_bad if s.bad else _judge_run)(ex, s, fn)
    return Case(s.name, run)


def _exercise(id, title, functions, kernels, specs) -> Exercise:
    ex = Exercise(id=id, lesson=LESSON, title=title, functions=functions, kernels=kernels)
    ex.cases = [_case(ex, s) for s in specs]
    return register(ex)


F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16

COMMON = [
    Spec("1x1: a single element", (1, 1)),
    Spec("N=7, one row (N not a power of two)", (1, 7), seed=1),
    Spec("1823x781 fp32", (1823, 781), seed=2),
    Spec("257x781 fp16", (257, 781), F16, seed=3),
    Spec("64x1151 bf16, fp32 weight", (64, 1151), BF16, weight="fp32", seed=4),
    Spec("fp16 whose squares overflow fp16 (|x|~300)", (33, 1600), F16, scale=300.0, seed=5),
    Spec("eps matters: |x|~1e-3, eps=1e-3", (16, 500), eps=1e-3, scale=1e-3, seed=6),
    Spec("zero rows (y=0, rstd=1/sqrt(eps))", (9, 100), zero_rows=(2, 5), seed=7),
    Spec("3-D input (4, 9, 300) bf16", (4, 9, 300), BF16, seed=8),
    Spec("non-contiguous rows (row stride N+37)", (50, 781), row_pad=37, seed=9),
    Spec("no weight (weight=None), N=4097 fp16", (6, 4097), F16, weight="none", seed=10),
    Spec("constant rows, large values (x = 1e4)", (8, 333), const=1e4, seed=11),
    Spec("1-D input: a single row of 640", (640,), seed=12),
    Spec("bad input: weight of the wrong shape", (4, 64), bad="weight_shape", seed=13),
    Spec("bad input: integer x", (4, 64), bad="int_dtype", seed=14),
    Spec("bad input: last dim not contiguous", (64, 8), bad="last_dim_stride", seed=15),
]

_exercise(
    "rmsnorm_fwd", "RMSNorm forward: one row per program",
    ("rmsnorm_fwd", "_rmsnorm_fwd_kernel"), ("_rmsnorm_fwd_kernel",),
    COMMON + [
        Spec("N=65536, the largest single block", (2, 65536), seed=20),
        Spec("bad input: N=65537 is too long for one block", (2, 65537), bad="too_long", seed=21),
    ])

_exercise(
    "rmsnorm_fwd_rows", "RMSNorm forward: several rows per program",
    ("rmsnorm_fwd_rows", "_rmsnorm_fwd_rows_kernel"), ("_rmsnorm_fwd_rows_kernel",),
    COMMON + [
        Spec("rows_per_program=4, M=5 (last program half empty)", (5, 33), kwargs={"rows_per_program": 4}, seed=30),
        Spec("rows_per_program=8, M=1023, N=64", (1023, 64), kwargs={"rows_per_program": 8}, seed=31),
        Spec("rows_per_program=16, N=1, M=37", (37, 1), kwargs={"rows_per_program": 16}, seed=32),
        Spec("rows_per_program=2, bf16 300x512, strided", (300, 512), BF16, row_pad=8,
             kwargs={"rows_per_program": 2}, seed=33),
        Spec("bad input: rows_per_program=3 (not a power of two)", (6, 64), kwargs={"rows_per_program": 3},
             bad="kwarg", seed=34),
    ])

_exercise(
    "rmsnorm_fwd_looped", "RMSNorm forward: rows of any length (persistent, looped)",
    ("rmsnorm_fwd_looped", "_rmsnorm_fwd_looped_kernel"), ("_rmsnorm_fwd_looped_kernel",),
    COMMON + [
        Spec("block_n=256, N=1000 (a partial last chunk)", (12, 1000), kwargs={"block_n": 256}, seed=40),
        Spec("block_n=1024, N=4097 (one element in the last chunk)", (5, 4097), F16,
             kwargs={"block_n": 1024}, seed=41),
        Spec("N=131072 (longer than any single block)", (2, 131072), BF16, seed=42),
        Spec("num_programs=3 for M=10 rows (each program loops)", (10, 300),
             kwargs={"num_programs": 3, "block_n": 128}, seed=43),
        Spec("bad input: block_n=1000 (not a power of two)", (3, 2000), kwargs={"block_n": 1000},
             bad="kwarg", seed=44),
    ])
