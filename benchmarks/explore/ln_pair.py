"""A LayerNorm forward for long 16-bit rows with ONE cross-thread reduction before y: the row as one chunk,
sums of d = x - k and d^2 around the shift k = x[0] (two independent tl.sum: a tuple tl.reduce sums element by element in the CPU interpreter, whose
float32 error then misses the mean's tolerance), y from those statistics, and the
statistics that are stored (mean, rstd) summed again exactly around that mean while the row is re-read for y.

Why: lesson 05's looped kernel makes two dependent reductions (mean, then squared deviations) before its
second read; Nsight Compute (run #44) has the 32K bf16 launch losing ~9 us of a 93 us launch at its end.
Shifted sums were measured faster (stage "lnstats", run #2: 95.0 % at 32K bf16, against 90.7) but their mean
k + t1/N missed the stored mean's tolerance (1e-5 relative) on |x|~300 fp16 rows (stage "lnvariants" #12).
Here y uses the shifted statistics (their error is far below a 16-bit y's tolerance; the guard re-sums around
the mean when the shift cancels more than 4 bits) and the stored mean and rstd are two-pass exact:
mean = m + sum(x - m)/N, M2 = sum((x - m)^2) - (sum(x - m))^2/N, summed during pass 2.

Measured (explore_cluster.py stage "lnpair", run #49, H100): it does not work. The plain pair reaches 94.2 % of
copy at 32K bf16 (95.3 fp16; the dispatcher 92.0 / 92.8) and the re-sum costs it 6 points, and in no form does
the stored mean stay within 1e-5 relative on |x|~300 rows: t1 carries N (mean - k), a large number whose rounding
lands in the mean, and x - m rounds the same way for every x of one binade (m is a full float32), so the re-sum
does not cancel its own error either. Summing x itself (the "triple" of stage "lnvariants") is what keeps the
mean, and it is no faster than the dispatcher.
"""
import triton
import triton.language as tl


@triton.jit
def _sums_around(x, mask, k, N: tl.constexpr):
    # mean and M2 of the row from the sums of d = x - k and d^2 (exact algebra; M2 = s2 - s1^2/N loses about
    # log2(s2 / M2) bits), and s2 for the guard
    d = tl.where(mask, x - k, 0.0)
    s1 = tl.sum(d, axis=0)
    s2 = tl.sum(d * d, axis=0)
    return k + s1 / N, s2 - s1 * (s1 / N), s2


@triton.jit
def _ln_pair_kernel(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, eps, N: tl.constexpr, BLOCK_N: tl.constexpr,
                    GUARD: tl.constexpr, REFINE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    mean, m2, s2 = _sums_around(x, mask, tl.load(x_row).to(tl.float32), N)   # shift k = x[0]
    if GUARD:
        if m2 * 16.0 < s2:   # the shift was far from the mean: sum again around the mean (x from L2)
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            mean, m2, s2 = _sums_around(x, mask, mean, N)
    rstd = tl.rsqrt(tl.maximum(m2, 0.0) / N + eps)
    x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(y_row + cols, (tl.where(mask, x - mean, 0.0) * rstd * w + b).to(Y.dtype.element_ty), mask=mask)
    if REFINE:   # the stored statistics: summed again around the mean, from the x just re-read
        mean, m2, s2 = _sums_around(x, mask, mean, N)
        rstd = tl.rsqrt(tl.maximum(m2, 0.0) / N + eps)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


def ln_pair(x, w, b, y, mean, rstd, eps, guard=True, refine=True, warps=32, maxnreg=None):
    M, N = x.shape
    _ln_pair_kernel[(M,)](x, y, w, b, mean, rstd, x.stride(0), y.stride(0), eps, N=N,
                          BLOCK_N=triton.next_power_of_2(N), GUARD=guard, REFINE=refine, num_warps=warps,
                          **({"maxnreg": maxnreg} if maxnreg else {}))
    return y
