"""How fast can a one-program-per-row kernel with LayerNorm's bytes be at all? (H100, 16-bit, N = 16K and 32K)

Kernels that move exactly LayerNorm's bytes (x read, y written, the weight and bias read by every program) with
less and less of LayerNorm's work, one program per row and the row as one chunk held in registers, timed like the
course's benchmark and credited with the benchmark's byte model (so each % says what a LayerNorm as fast as that
kernel would score):
- "copy": y = x (no weight, no bias: fewer bytes than credited, an upper bound);
- "affine": y = x * w + b (no statistics);
- "mean": one reduction, y = (x - mean) * w + b;
- "layernorm": mean, then the squared deviations (two dependent reductions), y; mean and rstd stored;
- "layernorm/reload": the same with x read twice (the second read from L2), as lesson 05's looped kernel does;
- "mean/wb-early", "layernorm/wb-early": "mean" and "layernorm" with the weight and bias loaded before the
  reductions (held in their own dtype until y);
- "layernorm/packed" (16-bit only): LayerNorm holding the row in its own dtype, half the registers, widened to
  float32 at each use by inline PTX the compiler cannot merge; "/rNN": launched with maxnreg=NN, so that two
  1024-thread programs fit an SM at 32;
next to lesson 05's dispatcher and a torch copy of the same dtype and bytes.

    python benchmarks/explore/explore_cluster.py lnbound       (BOUND_POINTS=N:dtype,...)

(Runs #60-#62 were timed by a driver of this file's own, with the same rule; it is that stage now.)

Results: explore_cluster_H100.jsonl, stage "lnbound" (runs #60-#61, H100, % of the fp32 copy, best warps): at
N = 32768 in bf16 y = x 97.4-97.5, affine 97.9-98.0, mean 92.0-92.1, layernorm 88.8-88.9, layernorm/reload
90.3-90.4, the dispatcher 91.9-92.0, torch's bf16 copy 96.9-97.0; at N = 16384 97.7, 97.6, 95.8, 95.3, 95.8, 95.8,
96.9-97.0. The wb-early kinds spill and lose 6-19 points. Run #62: layernorm/packed reaches 91.3 at 32K bf16 (91.7
fp16) with 32 warps uncapped, against the dispatcher's 91.7 (92.7), and capped at 32 or 40 registers (two programs
per SM) it spills: 27-65 (bf16), 38-72 (fp16). Run #64 (the stage, 32K bf16) reproduces #60-#62 within 0.6 and
records the packed kernel's registers: 60 uncapped, the same as the float32 row's "mean" probe. A reduction before the first store, in a program that
holds its whole row (one program per SM), is what costs at the benchmark's 2048 rows; the weight's and bias's bytes
alone do not. (With 4 or 8 times the rows the dispatcher reaches 99.3-99.6 % of a same-bytes copy, stage "lnsize":
the wait costs most in a short launch.)
"""
import triton
import triton.language as tl

# What each probe does: REDUCTIONS before y (0, the mean, or the mean then the squared deviations, with mean and
# rstd stored), AFFINE (y = x without w and b), RELOAD (x read again for y), WB_EARLY (w and b loaded before the
# reductions). "layernorm/packed" is _packed_kernel (16-bit only).
KINDS = {"copy": dict(REDUCTIONS=0, AFFINE=False), "affine": dict(REDUCTIONS=0), "mean": dict(REDUCTIONS=1),
         "layernorm": dict(REDUCTIONS=2), "layernorm/reload": dict(REDUCTIONS=2, RELOAD=True),
         "mean/wb-early": dict(REDUCTIONS=1, WB_EARLY=True), "layernorm/wb-early": dict(REDUCTIONS=2, WB_EARLY=True)}
IS_LAYERNORM = ("layernorm", "layernorm/reload", "layernorm/wb-early", "layernorm/packed")   # checked as LayerNorms


@triton.jit
def _widen(x):
    # x (bf16 or fp16) to float32 by inline PTX with side effects: the compiler cannot merge two of these, so it
    # converts at every use instead of keeping a float32 copy of the row alive
    if x.dtype == tl.bfloat16:
        return tl.inline_asm_elementwise("cvt.f32.bf16 $0, $1;", "=r,h", [x], dtype=tl.float32, is_pure=False,
                                         pack=1)
    else:
        return tl.inline_asm_elementwise("cvt.f32.f16 $0, $1;", "=r,h", [x], dtype=tl.float32, is_pure=False,
                                         pack=1)


@triton.jit
def _bound_kernel(X, Y, W, B, MEAN, RSTD, eps, N: tl.constexpr, BLOCK_N: tl.constexpr, REDUCTIONS: tl.constexpr,
                  AFFINE: tl.constexpr, RELOAD: tl.constexpr, WB_EARLY: tl.constexpr):
    # one program per row, the row one chunk, with as much of LayerNorm's work as the flags say
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if WB_EARLY:   # kept in their own dtype until y
        w_early = tl.load(W + cols, mask=mask, other=0.0)
        b_early = tl.load(B + cols, mask=mask, other=0.0)
    mean = 0.0
    rstd = 1.0
    if REDUCTIONS >= 1:
        mean = tl.sum(x, axis=0) / N
    if REDUCTIONS >= 2:
        d = tl.where(mask, x - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(d * d, axis=0) / N + eps)
    if RELOAD:
        x = tl.load(X + row * N + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    if not AFFINE:
        y = x
    elif WB_EARLY:
        y = (x - mean) * rstd * w_early.to(tl.float32) + b_early.to(tl.float32)
    else:
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
    tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)
    if REDUCTIONS >= 2:
        tl.store(MEAN + row, mean)
        tl.store(RSTD + row, rstd)


@triton.jit
def _packed_kernel(X, Y, W, B, MEAN, RSTD, eps, N: tl.constexpr, BLOCK_N: tl.constexpr):
    # LayerNorm holding the row in its 16-bit dtype (half the registers of float32), widened at each use
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    xh = tl.load(X + row * N + cols, mask=mask, other=0.0)
    mean = tl.sum(_widen(xh), axis=0) / N
    d = tl.where(mask, _widen(xh) - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, axis=0) / N + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * N + cols, ((_widen(xh) - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=mask)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


def ln_bound(kind, x, w, b, y, mean, rstd, eps, warps, maxnreg=None):
    """Launch probe `kind` (a KINDS name or "layernorm/packed") over the rows of x (M, N), contiguous; returns the
    compiled kernel (its n_regs and n_spills)."""
    M, N = x.shape
    launch = dict(num_warps=warps, **({"maxnreg": maxnreg} if maxnreg else {}))
    if kind == "layernorm/packed":
        return _packed_kernel[(M,)](x, y, w, b, mean, rstd, eps, N=N, BLOCK_N=triton.next_power_of_2(N), **launch)
    flags = {"AFFINE": True, "RELOAD": False, "WB_EARLY": False, **KINDS[kind]}
    return _bound_kernel[(M,)](x, y, w, b, mean, rstd, eps, N=N, BLOCK_N=triton.next_power_of_2(N), **flags,
                               **launch)
