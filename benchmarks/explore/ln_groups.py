"""A LayerNorm forward for long rows with ONE cross-thread reduction before y that keeps two-pass accuracy:
the row (one chunk) is loaded as a [G, S] tile of G groups of S consecutive values, S one 16-byte vector, so
that a group lives in one thread. Each group's exact statistics come from its own registers (n_g, mean_g =
sum / n_g, M2_g = sum of (x - mean_g)^2: a two-pass formula with no cross-thread step), and one tuple tl.reduce
merges the G summaries with Chan's rule (count, mean, M2). y is computed from x loaded again (from L2,
evict_first) in Y_BLOCK pieces, as the looped kernel's pass 2 does: with the whole row at once, ptxas keeps x,
w and b of all 32 values per thread live (52 registers at 32K bf16, one program per SM); in two pieces the
program has 32 (sm_90, regs_sm90.compile_sm90), two programs per SM.

Why: the lesson 05 dispatcher's looped kernel makes two dependent reductions (mean, then squared deviations);
one reduction of shifted sums was faster (stage "lnstats", run #2; "lnpair", run #49: 94-95 % at 32K bf16
against 92) but missed the stored mean's tolerance, and Welford per element (stage "lnstats", "welford") paid
a division per value (90.9-93.1). Here the per-value work is an add, a subtract, a multiply-add; divisions
happen once per group and once per merge.

The merge works on the group means minus the first group's mean k, and the stored mean is a plain tl.sum of
the group sums beside the tuple reduce ("two"): the CPU interpreter merges element by element, and there a
merge of raw means (or a sum carried in the tuple, "one") missed y's tolerance on mean-1e4 rows (lesson 05's
"groups/g16" of stage "lnvariants" failed the same way). This form passes every hidden-case kind of lesson 05
in the interpreter up to N = 65536 (block_n cases aside) and the long-row kinds of
explore_cluster.pair_numerics on the GPU.

Measured (explore_cluster.py stage "lngroups", runs #51-#52, H100, % of the fp32 copy): correct, and no faster.
32K bf16: 91.6 / 92.0 at best (one reduce, y in two pieces, 16 warps) against the dispatcher's 92.0 / 92.3, and
the plain shifted pair of ln_pair.py 94.5 in run #52's machine session; 32K fp16 92.8-93.0, a tie; 16K bf16
96.2, a tie; 64K bf16 85.5 against 85.8; 8K bf16 96.4 against 97.1; fp32 1-4 points behind. y in one piece
(52 registers, one program per SM) 90.8-91.1. So one round of cross-thread reduction is not what the pair saves:
compiled for sm_90, the grouped kernel has fewer barriers than the pair (2 against 5) and 5 % more
instructions.
"""
import triton
import triton.language as tl

from ln_static import _normalise_row


@triton.jit
def _chan_combine(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    # Chan's merge of two (count, mean, M2) summaries; an empty side leaves the other unchanged
    n = n_a + n_b
    w_b = tl.where(n > 0, n_b / tl.maximum(n, 1.0), 0.0)
    d = mean_b - mean_a
    return n, mean_a + d * w_b, m2_a + m2_b + d * d * n_a * w_b


@triton.jit
def _chan_merge_sum(n_a, mean_a, m2_a, s_a, n_b, mean_b, m2_b, s_b):
    # the same, carrying the plain sum of x along (one reduction for everything)
    n, mean, m2 = _chan_combine(n_a, mean_a, m2_a, n_b, mean_b, m2_b)
    return n, mean, m2, s_a + s_b


@triton.jit
def _ln_groups_kernel(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, eps, N: tl.constexpr, BLOCK_N: tl.constexpr,
                      S: tl.constexpr, Y_BLOCK: tl.constexpr, ONE_REDUCE: tl.constexpr):
    G: tl.constexpr = BLOCK_N // S
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    g = tl.arange(0, G)
    cols = g[:, None] * S + tl.arange(0, S)[None, :]
    mask = cols < N
    x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    # each group's exact two-pass statistics, inside one thread
    n_g = tl.minimum(tl.maximum(N - g * S, 0), S).to(tl.float32)
    s_g = tl.sum(x, axis=1)
    mean_g = s_g / tl.maximum(n_g, 1.0)
    d = tl.where(mask, x - mean_g[:, None], 0.0)
    m2_g = tl.sum(d * d, axis=1)
    # The merge's running means are kept small, relative to the first group's mean k: a merge rounds its mean
    # to float32 (u |mean|), and those errors enter M2 squared (a sequential merge, as in the CPU interpreter,
    # adds about G u^2 mean^2 / 2 per value: 4e-4 of a variance of 1 at mean 1e4 without the shift).
    s0 = tl.arange(0, S)
    k = tl.sum(tl.load(x_row + s0, mask=s0 < N, other=0.0).to(tl.float32), axis=0) / min(N, S)
    # one cross-thread reduction: Chan's merge of the G summaries (M2); the mean is the plain sum of x
    if ONE_REDUCE:
        _n, _m, m2, total = tl.reduce((n_g, mean_g - k, m2_g, s_g), 0, _chan_merge_sum)
    else:
        _n, _m, m2 = tl.reduce((n_g, mean_g - k, m2_g), 0, _chan_combine)
        total = tl.sum(s_g, axis=0)
    mean = total / N
    rstd = tl.rsqrt(m2 / N + eps)
    # y in pieces of Y_BLOCK (x again, from L2): one piece's x, w, b at a time keeps the program at 32 registers
    _normalise_row(x_row, y_row, W, B, mean, rstd, N, Y_BLOCK)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


def ln_groups(x, w, b, y, mean, rstd, eps, y_pieces=2, group=None, one_reduce=False, warps=32, maxnreg=None):
    M, N = x.shape
    S = 16 // x.element_size() if group is None else group
    block = max(triton.next_power_of_2(N), S)
    _ln_groups_kernel[(M,)](x, y, w, b, mean, rstd, x.stride(0), y.stride(0), eps, N=N, BLOCK_N=block, S=S,
                            Y_BLOCK=max(block // y_pieces, 1), ONE_REDUCE=one_reduce, num_warps=warps,
                            **({"maxnreg": maxnreg} if maxnreg else {}))
    return y
