"""Hidden cases of lesson 03 (CUDA C with PyCUDA and cooperative groups); machinery in autograder/rowcases.py.

Every exercise first compiles the student's CUDA string with nvcc for sm_80 and sm_90 (runs without a
GPU); the numeric cases need a GPU with PyCUDA and are reported as skipped elsewhere. The two kernels that
share memory between warps (v4, v5) are also run under compute-sanitizer's racecheck, and every kernel under its
memcheck (a load past the row whose value is left out of the sum gives right numbers).
"""
from __future__ import annotations

import torch

from ..rowcases import LAYERNORM, RMSNORM, SOFTMAX, Spec, exercise, far_rows

LESSON = "03_pycuda_layernorm"
BIG_MEAN = ("These rows have mean 1e4: E[x^2] - E[x]^2 in float32 cancels every digit of a variance of 1 "
            "(catastrophic cancellation); the row is in registers, so take two passes over them: the mean first, "
            "then the squares of x - mean")
BIG_MEAN_CHAN = ("These rows have mean 1e4: E[x^2] - E[x]^2 in float32 cancels every digit of a variance of 1 "
                 "(catastrophic cancellation); keep (count, mean, M2) per thread and merge with Chan's formula")
MASKED = ("Lanes past C must not count: load them as 0 and leave them out of the variance (each would add "
          "mean^2), and never store past the row")

REGS = tuple(f"layernorm_regs_k{k}{v}" for v in ("", "_vec") for k in (1, 2, 4, 8))
BLOCK = tuple(f"layernorm_block_k{k}{v}" for v in ("", "_vec") for k in (4, 8, 16))

BAD = [
    Spec("bad input: float16 x (these kernels take float32)", (4, 64), bad="fp16", seed=90),
    Spec("bad input: weight of the wrong shape", (4, 64), bad="weight_shape", seed=91),
    Spec("bad input: last dim not contiguous", (64, 8), bad="last_dim_stride", seed=92),
    Spec("bad input: x on the CPU", (4, 64), bad="cpu", seed=93),
]

RMS = [
    Spec("1x1: a single element", (1, 1)),
    Spec("C=7, M=13 (not a multiple of 8 rows per block)", (13, 7), seed=1),
    Spec("C=768 (GPT-2), 37 rows", (37, 768), seed=2),
    Spec("C=1000 (not a multiple of 32)", (37, 1000), seed=3),
    Spec("C=4097", (9, 4097), seed=4),
    Spec("C=65536", (3, 65536), seed=5),
    Spec("3-D input (4, 9, 300), then a second call", (4, 9, 300), seed=6, twice=True),
    Spec("zero rows (y = 0, rstd = 1/sqrt(eps))", (9, 100), zero_rows=(2, 5), seed=7),
    Spec("eps matters: |x|~1e-3, eps=1e-3", (16, 500), eps=1e-3, scale=1e-3, seed=8),
    Spec("non-contiguous rows (row stride C+37)", (50, 781), row_pad=37, seed=10),
    Spec("1-D input: a single row of 640", (640,), seed=11),
    Spec("2000 short rows of 64", (2000, 64), seed=12),
] + BAD + [
    # after the others: a null weight read faults, and the fault breaks every later case of the exercise
    Spec("no weight", (6, 1000), weight="none", seed=9),
]

LN_COMMON = [
    Spec("1x1: a single element (y = bias)", (1, 1), eps=1e-5),
    Spec("C=7, M=13 (not a multiple of 8 rows per block)", (13, 7), eps=1e-5, seed=1),
    Spec("C=768 (GPT-2): float4 path", (37, 768), eps=1e-5, seed=2),
    Spec("C=1000, C % 4 == 0 but not % 32", (37, 1000), eps=1e-5, seed=3),
    Spec("C=999: the scalar path with a tail", (11, 999), eps=1e-5, hint=MASKED, seed=4),
    Spec("zero rows (y = bias, rstd = 1/sqrt(eps))", (9, 100), zero_rows=(2, 5), eps=1e-5, seed=5),
    Spec("constant rows x = 1e4 (variance exactly 0)", (8, 333), const=1e4, eps=1e-5, seed=6),
    Spec("eps matters: |x|~1e-3, eps=1e-3", (16, 500), eps=1e-3, scale=1e-3, seed=7),
    Spec("3-D input (4, 9, 300), then a second call", (4, 9, 300), eps=1e-5, seed=8, twice=True),
    Spec("non-contiguous rows (row stride C+37)", (50, 781), row_pad=37, eps=1e-5, seed=9),
    Spec("1-D input: a single row of 640", (640,), eps=1e-5, seed=12),
    Spec("bad input: bias of the wrong shape", (4, 64), bad="bias_shape", seed=13),
] + BAD

# Each of weight and bias may be None, on both paths. After the other cases (see misaligned below): a kernel that
# reads a null pointer faults, and the fault breaks every later case of the exercise.
BIAS_ONLY = "bias given without a weight: y = (x - mean) * rstd + bias (F.layer_norm(x, shape, None, bias))"
AFFINE = [
    Spec("no weight, no bias, C=999 (the scalar path)", (6, 999), weight="none", eps=1e-5, seed=10),
    Spec("no weight, no bias, C=1000 (the float4 path)", (6, 1000), weight="none", eps=1e-5, seed=14),
    Spec("bias but no weight, C=999 (the scalar path)", (6, 999), weight="bias_only", eps=1e-5, hint=BIAS_ONLY,
         seed=16),
    Spec("bias but no weight, C=1000 (the float4 path)", (6, 1000), weight="bias_only", eps=1e-5, hint=BIAS_ONLY,
         seed=15),
    Spec("weight but no bias, C=781 (the scalar path)", (10, 781), bias=False, eps=1e-5, seed=11),
    Spec("weight but no bias, C=1000 (the float4 path)", (10, 1000), bias=False, eps=1e-5, seed=17),
]


def big_mean(shape, stat_rtol=5e-5, seed=30, hint=BIG_MEAN):
    return Spec(f"rows with mean 1e4, std 1, C={shape[-1]} (one-pass variance fails)", shape, offset=1e4, eps=1e-5,
                atol=1e-2, stat_rtol=stat_rtol, hint=hint, seed=seed)


# Last in each list: a misaligned pointer faults a float4 load ("misaligned address"), which spoils the CUDA
# context for every later case of the exercise.
def misaligned(shape, seed=99, params="weight and bias"):
    return [Spec(f"x 4 bytes past a 16-byte boundary, C={shape[-1]} (no float4 loads)", shape, eps=1e-5,
                 misalign="x", seed=seed),
            Spec(f"{params} 4 bytes past a 16-byte boundary, C={shape[-1]} (no float4 loads of them)", shape,
                 eps=1e-5, misalign="weight", seed=seed + 1)]


# Rows for the racecheck case of the kernels that share memory between warps: the float4 path and the scalar one,
# and more rows than any persistent grid has blocks (a block that moves on to its next row reuses the partials).
RACE_ROWS = ((2, 4096), (2, 4097), (4096, 128))
# x read at most `most` times, counted by Nsight Compute on rows of 1024 (no weight or bias): (shape, most, why)
ONCE = "the row is held in registers: read once, normalised from the registers (a second loop over xr reads x again)"
X_LOADS_SHAPE = (64, 1024)
# Offsets past 2**31 elements (last, on a GPU with 18 GiB free: an 8 GiB x copied by .contiguous() and an 8 GiB y)
FAR_GIB = 18
FAR_HINT = ("row * C in int wraps negative past 2**31 elements: offset rows in size_t ((size_t)row * C, as the given "
            "xr and yr lines do) and index through xr and yr")


def far(n: int, eps: float = 1e-5) -> Spec:
    return far_rows(n, eps, torch.float32)


# Rows for the memcheck case: the float4 path and the scalar one, the last row ending inside a register block
MEMCHECK_ROWS = ((5, 1000), (5, 999))
# The block-per-row kernels also with a full block of 1024 threads (32 warps): shared arrays sized for fewer warps
# (partial[16]) overflow only there, and an overflow of a static __shared__ array still gives right numbers on an H100
MEMCHECK_ROWS_BLOCK = MEMCHECK_ROWS + ((2, 65536),)
MEMCHECK_ROWS_WELFORD = MEMCHECK_ROWS + ((2, 20000),)
# More rows than a grid's y dimension (or a 65535 cap on x) holds: one block per row
MANY_ROWS = "70000 rows of 16 (more blocks than 65535: the grid's x dimension, not y, and no cap)"


exercise(LESSON, RMSNORM, "rmsnorm_warp", "v2 RMSNorm: one warp per row, rsqrtf",
         ("rmsnorm_warp", "RMSNORM_WARP_SRC"), ("rmsnorm_warp",), RMS + misaligned((8, 1000), params="weight"),
         cuda_source="RMSNORM_WARP_SRC", memcheck=MEMCHECK_ROWS,
         x_reads=(X_LOADS_SHAPE, 2, "one loop for the sum of squares, one to scale"),
         far_rows=far(4096, 1e-6), far_gib=FAR_GIB, far_hint=FAR_HINT)

exercise(LESSON, LAYERNORM, "layernorm_regs", "v3 LayerNorm: one warp per row, the row in registers",
         ("layernorm_regs", "LAYERNORM_REGS_SRC"), REGS, LN_COMMON + [
             Spec("C=1024: the longest row a warp holds", (6, 1024), eps=1e-5, seed=20),
             Spec("C=129: one column past K=1", (5, 129), eps=1e-5, seed=21),
             big_mean((64, 1000)),
             Spec("bad input: C=1025 is too long for one warp's registers", (2, 1025), bad="too_long", seed=22),
         ] + AFFINE + misaligned((8, 768)), cuda_source="LAYERNORM_REGS_SRC", memcheck=MEMCHECK_ROWS,
         x_reads=(X_LOADS_SHAPE, 1, ONCE), far_rows=far(1024), far_gib=FAR_GIB, far_hint=FAR_HINT)

exercise(LESSON, LAYERNORM, "layernorm_block", "v4 LayerNorm: one block per row, the row in registers",
         ("layernorm_block", "LAYERNORM_BLOCK_SRC"), BLOCK, LN_COMMON + [
             Spec("C=4097", (9, 4097), eps=1e-5, seed=20),
             Spec("C=16384, 64 rows (K=8, 16 warps of 32 per block)", (64, 16384), eps=1e-5, seed=21),
             Spec("C=40000 (K=16, 640 threads: 20 warps)", (3, 40000), eps=1e-5, seed=22),
             Spec("C=65536, the longest row a block holds", (3, 65536), eps=1e-5, seed=23),
             Spec(MANY_ROWS, (70000, 16), eps=1e-5, seed=25),
             big_mean((32, 20000)),
             Spec("bad input: C=65537 is too long for one block's registers", (2, 65537), bad="too_long", seed=24),
         ] + AFFINE + misaligned((8, 8192)), cuda_source="LAYERNORM_BLOCK_SRC", racecheck=RACE_ROWS,
         memcheck=MEMCHECK_ROWS_BLOCK, x_reads=(X_LOADS_SHAPE, 1, ONCE), far_rows=far(4096), far_gib=FAR_GIB,
         far_hint=FAR_HINT)

exercise(LESSON, LAYERNORM, "layernorm_welford", "v5 LayerNorm: Welford in one pass, Chan merges, any C",
         ("layernorm_welford", "LAYERNORM_WELFORD_SRC"), ("layernorm_welford",), LN_COMMON + [
             Spec("C=4097", (9, 4097), eps=1e-5, seed=20),
             Spec("C=65536", (3, 65536), eps=1e-5, seed=21),
             Spec("C=131072 (longer than any register budget)", (2, 131072), eps=1e-5, seed=22),
             Spec("C=70001 (scalar path, long)", (2, 70001), eps=1e-5, seed=23),
             Spec(MANY_ROWS, (70000, 16), eps=1e-5, seed=25),
             # Chan merges round a running mean near 1e4 to float32 spacing (~1e-3): up to 9.7e-5 measured on an H100.
             big_mean((64, 1600), stat_rtol=3e-4, hint=BIG_MEAN_CHAN),
             big_mean((4, 50000), stat_rtol=3e-4, seed=31, hint=BIG_MEAN_CHAN),
         ] + AFFINE + misaligned((8, 4096)), cuda_source="LAYERNORM_WELFORD_SRC", racecheck=RACE_ROWS,
         memcheck=MEMCHECK_ROWS_WELFORD,
         x_reads=(X_LOADS_SHAPE, 2, "Welford's pass keeps (n, mean, M2) as it reads, once; the second pass "
                                    "writes y (two sums before y are two passes, not Welford)"),
         far_rows=far(4096), far_gib=FAR_GIB, far_hint=FAR_HINT)

exercise(LESSON, SOFTMAX, "softmax_online", "v6 softmax: one warp per row, (m, l) merged across the warp",
         ("softmax_online", "SOFTMAX_ONLINE_SRC"), ("softmax_online",), [
             Spec("1x1: softmax of one element is 1", (1, 1), weight="none"),
             Spec("C=7, M=13 (not a multiple of 8 rows per block)", (13, 7), weight="none", seed=1),
             Spec("C=768, 37 rows", (37, 768), weight="none", seed=2),
             Spec("C=4097", (9, 4097), weight="none", seed=3),
             Spec("C=65536", (3, 65536), weight="none", seed=4),
             Spec("large logits x*100 (exp(x) overflows float32)", (64, 1000), weight="none", scale=100.0, seed=5,
                  hint="subtract the row max before exp: exp(x - m) <= 1"),
             Spec("every 5th logit is -inf (masked positions)", (9, 4097), weight="none", neg_inf_every=5, seed=6,
                  hint="-inf must give exp(-inf) = 0, never exp(-inf - (-inf)) = NaN"),
             Spec("the first logit of each row is -inf, C=7", (16, 7), weight="none", neg_inf_every=7, seed=7,
                  hint="a lane whose values so far are all -inf holds (m, l) = (-inf, 0)"),
             Spec("constant rows (uniform 1/C)", (8, 333), weight="none", const=3.0, seed=8),
             Spec("3-D input (4, 9, 300), then a second call", (4, 9, 300), weight="none", seed=9, twice=True),
             Spec("non-contiguous rows (row stride C+37)", (50, 781), weight="none", row_pad=37, seed=10),
             Spec("1-D input: a single row of 640", (640,), weight="none", seed=11),
             Spec("rows far below zero (x - 1000): every exp(x) underflows", (8, 333), weight="none", offset=-1000.0,
                  seed=12, hint="start the running max m at -INFINITY: from m = 0 every exp(x - m) underflows to 0 "
                                "when all x < -88, and l = 0"),
             Spec("bad input: float16 x", (4, 64), weight="none", bad="fp16", seed=90),
             Spec("bad input: last dim not contiguous", (64, 8), weight="none", bad="last_dim_stride", seed=92),
             Spec("bad input: x on the CPU", (4, 64), weight="none", bad="cpu", seed=93),
         ], cuda_source="SOFTMAX_ONLINE_SRC", memcheck=MEMCHECK_ROWS,
         x_reads=(X_LOADS_SHAPE, 2, "the online pass keeps (m, l) as it reads, once; the second pass writes y (a max "
                                    "pass before the sum pass is the three-pass softmax, not the online one)"),
         far_rows=far(4096), far_gib=FAR_GIB, far_hint=FAR_HINT)
