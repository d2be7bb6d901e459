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

Measured (explore_cluster.py stage "lngroups", runs #51-#58, H100, % of the fp32 copy; every form passed the
numerics on the GPU):
- y in pieces one after the other (_normalise_row): correct, and no faster. 32K bf16 91.6 / 92.0 at best (one
  reduce, two pieces, 16 warps) against the dispatcher's 92.0 / 92.3, and the unguarded shifted pair of
  ln_pair.py 94.5 in run #52's machine session; 32K fp16 and 16K bf16 ties; 64K bf16 85.5 against 85.8; 8K bf16
  96.4 against 97.1; fp32 1-4 points behind; y in one piece (52 registers, one program per SM) 90.8-91.1. So one
  round of cross-thread reduction is not what the pair saves: compiled for sm_90, the grouped kernel has fewer
  barriers than the pair (2 against 5) and 5 % more instructions.
- y's next piece loaded before this piece is computed and stored (_normalise_row_ahead, "/a"; 4 pieces, 32 warps,
  32 registers): "two" 92.3-92.8 at 32K bf16 against 92.1-92.3, 93.1 in fp16 against 92.9-93.0, 86.8-87.4 at 64K
  bf16 against 85.6-86.0; "one" (wrong in the interpreter) 92.7-93.0, 93.5-93.6, 87.5-87.8; both 91.0-95.5 at
  16K bf16 against 96.1-96.3 (runs #53-#56).
- What the weight and bias cost (run #54, "probe", w = 1 and b = 0 so that y is the same): the same kernel that
  does not load b reaches 95.3 at 32K bf16, and without w and b 96.2, against 92.5-92.9 when both are loaded;
  at 64K bf16 92.4 and 89.2 against 87.5. Each program reads the whole weight and bias from L2 for its row.
- Keeping them in L1 does not help (run #55): weight and bias .ca 92.9 at 32K bf16 (the same as without; 90.1
  at 64K bf16), x .cg (L2 only) 81-90. Nor does sharing them between two rows of a program (run #56,
  ln_groups_pair: each piece of w and b read once for both rows): 70-81 at 32K bf16, 70-85 in fp16, 59-76 at 64K.
- Nor does putting R rows side by side in one program (run #58, ln_groups_rows: both rows' [G, S] tiles loaded
  and merged together, then [R, piece] pieces of y with each piece of w and b loaded once for all R rows, so that
  unlike ln_groups_pair no row waits for the other): 72-88 at 32K bf16 (the dispatcher 92.3, "one/a" 93.0),
  74-91 in fp16, 63-78 at 64K bf16, 65-91 at 16K bf16; the best form is R = 2 with 16 warps and y in 8 pieces
  (85 registers at 32K bf16, one program per SM). 32 warps with y in 16 pieces and maxnreg=32 (two programs,
  four rows per SM, as many as "one/a" with 16 warps) reaches 74. Why it loses was not profiled.
- L1 is already as large as it gets (run #57, set_carveout): a preferred carveout of 0 % (most L1) times the
  same as the driver's choice, 100 % (most shared memory) loses 10-20 points; without evict_last on x's first
  load 1-2 points are lost, without it on the weight and bias nothing changes (92.8 against 92.3 at 32K bf16).
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
def _normalise_row_ahead(x_row, y_row, W, B, mean, rstd, N: tl.constexpr, PIECE: tl.constexpr,
                         PIECES: tl.constexpr, HAS_W: tl.constexpr = True, HAS_B: tl.constexpr = True,
                         X_CACHE: tl.constexpr = "", X_HINT: tl.constexpr = "evict_first",
                         WB_CACHE: tl.constexpr = "", WB_HINT: tl.constexpr = "evict_last"):
    # y in PIECES pieces with the next piece's x, w, b loads issued before this piece is computed and stored, so
    # that one piece is always in flight (written out in order: loads are never moved past the stores)
    c = tl.arange(0, PIECE)
    m = c < N
    xa = tl.load(x_row + c, mask=m, other=0.0, cache_modifier=X_CACHE, eviction_policy=X_HINT)
    wa = tl.load(W + c, mask=m, other=0.0, cache_modifier=WB_CACHE, eviction_policy=WB_HINT) if HAS_W else 1.0
    ba = tl.load(B + c, mask=m, other=0.0, cache_modifier=WB_CACHE, eviction_policy=WB_HINT) if HAS_B else 0.0
    for p in tl.static_range(PIECES):
        if p + 1 < PIECES:
            cn = (p + 1) * PIECE + tl.arange(0, PIECE)
            mn = cn < N
            xn = tl.load(x_row + cn, mask=mn, other=0.0, cache_modifier=X_CACHE, eviction_policy=X_HINT)
            wn = tl.load(W + cn, mask=mn, other=0.0, cache_modifier=WB_CACHE, eviction_policy=WB_HINT) if HAS_W else 1.0
            bn = tl.load(B + cn, mask=mn, other=0.0, cache_modifier=WB_CACHE, eviction_policy=WB_HINT) if HAS_B else 0.0
        y = (xa.to(tl.float32) - mean) * rstd * tl.cast(wa, tl.float32) + tl.cast(ba, tl.float32)
        tl.store(y_row + c, y.to(y_row.dtype.element_ty), mask=m)
        if p + 1 < PIECES:
            c, m, xa, wa, ba = cn, mn, xn, wn, bn


@triton.jit
def _group_stats(x_row, N: tl.constexpr, BLOCK_N: tl.constexpr, S: tl.constexpr, ONE_REDUCE: tl.constexpr,
                 X_CACHE: tl.constexpr, X_HINT1: tl.constexpr):
    # mean and M2 of one row, loaded as a [G, S] tile (a group of S values per thread), one cross-thread reduction
    G: tl.constexpr = BLOCK_N // S
    g = tl.arange(0, G)
    cols = g[:, None] * S + tl.arange(0, S)[None, :]
    mask = cols < N
    x = tl.load(x_row + cols, mask=mask, other=0.0, cache_modifier=X_CACHE,
                eviction_policy=X_HINT1).to(tl.float32)
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
    return total / N, m2


@triton.jit
def _ln_groups_kernel(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, eps, N: tl.constexpr, BLOCK_N: tl.constexpr,
                      S: tl.constexpr, Y_BLOCK: tl.constexpr, ONE_REDUCE: tl.constexpr, AHEAD: tl.constexpr = False,
                      HAS_W: tl.constexpr = True, HAS_B: tl.constexpr = True, X_CACHE: tl.constexpr = "",
                      X_HINT1: tl.constexpr = "evict_last", X_HINT2: tl.constexpr = "evict_first",
                      WB_CACHE: tl.constexpr = "", WB_HINT: tl.constexpr = "evict_last", TAG: tl.constexpr = 0):
    # TAG: unused; a distinct value gives a distinct compiled kernel (one whose carveout set_carveout changes)
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    mean, m2 = _group_stats(x_row, N, BLOCK_N, S, ONE_REDUCE, X_CACHE, X_HINT1)
    rstd = tl.rsqrt(m2 / N + eps)
    # y in pieces of Y_BLOCK (x again, from L2): one piece's x, w, b at a time keeps the program at 32 registers
    if AHEAD:
        _normalise_row_ahead(x_row, y_row, W, B, mean, rstd, N, Y_BLOCK, BLOCK_N // Y_BLOCK, HAS_W, HAS_B,
                             X_CACHE, X_HINT2, WB_CACHE, WB_HINT)
    else:
        _normalise_row(x_row, y_row, W, B, mean, rstd, N, Y_BLOCK)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


def ln_groups(x, w, b, y, mean, rstd, eps, y_pieces=2, group=None, one_reduce=False, ahead=False, warps=32,
              maxnreg=None, skip="", x_cache="", wb_cache="", x_hint=None, wb_hint=None, carveout=None):
    """skip: "b" or "wb", the bias (or weight and bias) taken as 0 (1) without loading them (ahead only: a
    probe of what their L2 reads cost). x_cache=".cg": x's loads cached in L2 only (no eviction hints: ptxas
    refuses .cg with them), wb_cache=".ca": weight and bias cached in L1 as well (ahead only). x_hint, wb_hint:
    the eviction policy of x's first load and of the weight and bias ("" = none). carveout: the kernel's
    preferred shared-memory carveout in % (0: as much L1 as possible), set on its own compiled kernel."""
    if not ahead and (skip or wb_cache or wb_hint is not None):
        raise ValueError("skip, wb_cache and wb_hint apply to the pieces loaded ahead only (ahead=True)")
    M, N = x.shape
    S = 16 // x.element_size() if group is None else group
    block = max(triton.next_power_of_2(N), S)
    k = _ln_groups_kernel[(M,)](x, y, w, b, mean, rstd, x.stride(0), y.stride(0), eps, N=N, BLOCK_N=block, S=S,
                                Y_BLOCK=max(block // y_pieces, 1), ONE_REDUCE=one_reduce, AHEAD=ahead,
                                HAS_W="w" not in skip, HAS_B="b" not in skip, X_CACHE=x_cache, WB_CACHE=wb_cache,
                                X_HINT1=("" if x_cache else "evict_last") if x_hint is None else x_hint,
                                X_HINT2="" if x_cache else "evict_first",
                                WB_HINT=("" if wb_cache else "evict_last") if wb_hint is None else wb_hint,
                                TAG=0 if carveout is None else carveout + 1, num_warps=warps,
                                **({"maxnreg": maxnreg} if maxnreg else {}))
    if carveout is not None and k.function not in _CARVED:
        set_carveout(k.function, carveout)
        _CARVED.add(k.function)
    return y


_CARVED = set()


def set_carveout(function, percent):
    """cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) on a compiled kernel's CUfunction,
    checked by reading it back."""
    import ctypes
    cuda = ctypes.CDLL("libcuda.so.1")
    attr = 9                                     # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    err = cuda.cuFuncSetAttribute(ctypes.c_void_p(function), ctypes.c_int(attr), ctypes.c_int(percent))
    assert err == 0, f"cuFuncSetAttribute: CUDA error {err}"
    got = ctypes.c_int()
    err = cuda.cuFuncGetAttribute(ctypes.byref(got), ctypes.c_int(attr), ctypes.c_void_p(function))
    assert err == 0 and got.value == percent, f"cuFuncGetAttribute: CUDA error {err}, carveout {got.value}"


@triton.jit
def _piece_cols(p, PIECE: tl.constexpr, N: tl.constexpr):
    # piece p's columns and their mask
    c = p * PIECE + tl.arange(0, PIECE)
    return c, c < N


@triton.jit
def _ln_groups_pair_kernel(X, Y, W, B, MEAN, RSTD, M, stride_x, stride_y, eps, N: tl.constexpr,
                           BLOCK_N: tl.constexpr, S: tl.constexpr, PIECE: tl.constexpr, ONE_REDUCE: tl.constexpr):
    # Two rows per program, so that each piece of the weight and bias is read from L2 once for two rows (the probe
    # "probe/b" / "probe/wb" of stage "lngroups": not reading them is worth 2.5-3.5 points at 32K bf16). Each row's
    # statistics as _ln_groups_kernel's; then y of both rows in pieces, the next piece's loads issued first.
    r0 = tl.program_id(0).to(tl.int64) * 2
    r1 = tl.minimum(r0 + 1, M - 1)            # an odd M: the last program does its one row twice, stores it once
    x0_row = X + r0 * stride_x
    x1_row = X + r1 * stride_x
    mean0, m2_0 = _group_stats(x0_row, N, BLOCK_N, S, ONE_REDUCE, "", "evict_last")
    mean1, m2_1 = _group_stats(x1_row, N, BLOCK_N, S, ONE_REDUCE, "", "evict_last")
    rstd0 = tl.rsqrt(m2_0 / N + eps)
    rstd1 = tl.rsqrt(m2_1 / N + eps)
    PIECES: tl.constexpr = BLOCK_N // PIECE
    c, m = _piece_cols(0, PIECE, N)
    xa = tl.load(x0_row + c, mask=m, other=0.0, eviction_policy="evict_first")
    xb = tl.load(x1_row + c, mask=m, other=0.0, eviction_policy="evict_first")
    wa = tl.load(W + c, mask=m, other=0.0, eviction_policy="evict_last")
    ba = tl.load(B + c, mask=m, other=0.0, eviction_policy="evict_last")
    for p in tl.static_range(PIECES):
        if p + 1 < PIECES:
            cn, mn = _piece_cols(p + 1, PIECE, N)
            xan = tl.load(x0_row + cn, mask=mn, other=0.0, eviction_policy="evict_first")
            xbn = tl.load(x1_row + cn, mask=mn, other=0.0, eviction_policy="evict_first")
            wn = tl.load(W + cn, mask=mn, other=0.0, eviction_policy="evict_last")
            bn = tl.load(B + cn, mask=mn, other=0.0, eviction_policy="evict_last")
        wf = wa.to(tl.float32)
        bf = ba.to(tl.float32)
        tl.store(Y + r0 * stride_y + c, ((xa.to(tl.float32) - mean0) * rstd0 * wf + bf).to(Y.dtype.element_ty), mask=m)
        tl.store(Y + r1 * stride_y + c, ((xb.to(tl.float32) - mean1) * rstd1 * wf + bf).to(Y.dtype.element_ty), mask=m)
        if p + 1 < PIECES:
            c, m, xa, xb, wa, ba = cn, mn, xan, xbn, wn, bn
    tl.store(MEAN + r0, mean0)
    tl.store(RSTD + r0, rstd0)
    tl.store(MEAN + r1, mean1)
    tl.store(RSTD + r1, rstd1)


def ln_groups_pair(x, w, b, y, mean, rstd, eps, y_pieces=8, one_reduce=True, warps=32, maxnreg=None):
    M, N = x.shape
    S = 16 // x.element_size()
    block = max(triton.next_power_of_2(N), S)
    _ln_groups_pair_kernel[(triton.cdiv(M, 2),)](x, y, w, b, mean, rstd, M, x.stride(0), y.stride(0), eps, N=N,
                                                BLOCK_N=block, S=S, PIECE=max(block // y_pieces, 1),
                                                ONE_REDUCE=one_reduce, num_warps=warps,
                                                **({"maxnreg": maxnreg} if maxnreg else {}))
    return y


@triton.jit
def _ln_groups_rows_kernel(X, Y, W, B, MEAN, RSTD, M, stride_x, stride_y, eps, N: tl.constexpr,
                           BLOCK_N: tl.constexpr, S: tl.constexpr, R: tl.constexpr, PIECE: tl.constexpr):
    # R rows side by side in one program, as [R, G, S] tiles that are loaded together and reduced together (one
    # tuple reduce gives the R rows' statistics), then y of the R rows in [R, PIECE] pieces, each piece of the
    # weight and bias loaded once for all R rows (the next piece's loads issued first). Unlike ln_groups_pair,
    # which does its two rows' statistics one after the other, nothing here is serialised by the second row.
    # Rows past M repeat the last row (the same values written twice).
    rows = tl.minimum(tl.program_id(0) * R + tl.arange(0, R), M - 1).to(tl.int64)
    x_rows = X + rows * stride_x                                   # [R]
    y_rows = Y + rows * stride_y
    G: tl.constexpr = BLOCK_N // S
    g = tl.arange(0, G)
    cols = g[:, None] * S + tl.arange(0, S)[None, :]               # [G, S]
    mask = (cols < N)[None, :, :]
    x = tl.load(x_rows[:, None, None] + cols[None, :, :], mask=mask, other=0.0,
                eviction_policy="evict_last").to(tl.float32)     # [R, G, S]
    n_g = tl.minimum(tl.maximum(N - g * S, 0), S).to(tl.float32)  # [G]
    s_g = tl.sum(x, axis=2)                                        # [R, G]
    mean_g = s_g / tl.maximum(n_g, 1.0)[None, :]
    d = tl.where(mask, x - mean_g[:, :, None], 0.0)
    m2_g = tl.sum(d * d, axis=2)
    s0 = tl.arange(0, S)
    k = tl.sum(tl.load(x_rows[:, None] + s0[None, :], mask=(s0 < N)[None, :], other=0.0).to(tl.float32),
               axis=1) / min(N, S)                                 # [R]: each row's first group's mean
    n_b = tl.zeros([R, G], dtype=tl.float32) + n_g[None, :]
    _n, _m, m2 = tl.reduce((n_b, mean_g - k[:, None], m2_g), 1, _chan_combine)
    mean = tl.sum(s_g, axis=1) / N
    rstd = tl.rsqrt(m2 / N + eps)
    PIECES: tl.constexpr = BLOCK_N // PIECE
    c, m = _piece_cols(0, PIECE, N)
    xa = tl.load(x_rows[:, None] + c[None, :], mask=m[None, :], other=0.0, eviction_policy="evict_first")
    wa = tl.load(W + c, mask=m, other=0.0, eviction_policy="evict_last")
    ba = tl.load(B + c, mask=m, other=0.0, eviction_policy="evict_last")
    for p in tl.static_range(PIECES):
        if p + 1 < PIECES:
            cn, mn = _piece_cols(p + 1, PIECE, N)
            xn = tl.load(x_rows[:, None] + cn[None, :], mask=mn[None, :], other=0.0, eviction_policy="evict_first")
            wn = tl.load(W + cn, mask=mn, other=0.0, eviction_policy="evict_last")
            bn = tl.load(B + cn, mask=mn, other=0.0, eviction_policy="evict_last")
        y = ((xa.to(tl.float32) - mean[:, None]) * rstd[:, None] * wa.to(tl.float32)[None, :]
             + ba.to(tl.float32)[None, :])
        tl.store(y_rows[:, None] + c[None, :], y.to(Y.dtype.element_ty), mask=m[None, :])
        if p + 1 < PIECES:
            c, m, xa, wa, ba = cn, mn, xn, wn, bn
    tl.store(MEAN + rows, mean)
    tl.store(RSTD + rows, rstd)


def ln_groups_rows(x, w, b, y, mean, rstd, eps, rows=2, y_pieces=4, warps=32, maxnreg=None):
    """R = rows rows side by side per program (_ln_groups_rows_kernel)."""
    M, N = x.shape
    S = 16 // x.element_size()
    block = max(triton.next_power_of_2(N), S)
    _ln_groups_rows_kernel[(triton.cdiv(M, rows),)](x, y, w, b, mean, rstd, M, x.stride(0), y.stride(0), eps, N=N,
                                                    BLOCK_N=block, S=S, R=rows, PIECE=max(block // y_pieces, 1),
                                                    num_warps=warps, **({"maxnreg": maxnreg} if maxnreg else {}))
    return y
