"""Is the drain at the end of a 32K bf16 LayerNorm launch a matter of scheduling? A persistent grid of P programs
where every program gets the same number of rows (R = M / P, contiguous or interleaved), so that no SM runs out
of rows before another: if the SMs stream at the same speed, they finish together. Lesson 05's looped kernel's
body per row (pass 1 as explore_layernorm._row_stats, the Chan merge; pass 2 re-reads x from L2).
Only for M = R * P (no row masks). Stage "lnstatic" of explore_cluster.py times it.

Measured (run #50, H100, % of a copy of the same bytes): it loses. 32K bf16 at M = 2112: 87.4 at best (264
interleaved programs capped at 32 registers) against the dispatcher's 95.0; 16K bf16 at M = 4224: 93.7 against 99.2.
"""
import triton
import triton.language as tl

from explore_layernorm import _row_stats


@triton.jit
def _normalise_row(x_row, y_row, W, B, mean, rstd, N: tl.constexpr, BLOCK_N: tl.constexpr):
    # the second pass: y = (x - mean) * rstd * w + b in chunks of BLOCK_N, x read again (from L2, evict_first)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(B + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_row.dtype.element_ty), mask=mask)


@triton.jit
def _ln_static_kernel(X, Y, W, B, MEAN, RSTD, R, P, stride_x, stride_y, eps, N: tl.constexpr,
                      BLOCK_N: tl.constexpr, INTERLEAVE: tl.constexpr):
    pid = tl.program_id(0)
    for i in range(0, R):
        if INTERLEAVE:
            row = (i * P + pid).to(tl.int64)
        else:
            row = (pid * R + i).to(tl.int64)
        x_row = X + row * stride_x
        y_row = Y + row * stride_y
        mean, m2 = _row_stats(x_row, N, BLOCK_N)
        rstd = tl.rsqrt(m2 / N + eps)
        _normalise_row(x_row, y_row, W, B, mean, rstd, N, BLOCK_N)
        tl.store(MEAN + row, mean)
        tl.store(RSTD + row, rstd)


def ln_static(x, w, b, y, mean, rstd, eps, programs, block_n, warps, interleave=False, maxnreg=None):
    M, N = x.shape
    assert M % programs == 0, (M, programs)
    _ln_static_kernel[(programs,)](x, y, w, b, mean, rstd, M // programs, programs, x.stride(0), y.stride(0), eps,
                                   N=N, BLOCK_N=block_n, INTERLEAVE=interleave, num_warps=warps,
                                   **({"maxnreg": maxnreg} if maxnreg else {}))
    return y
