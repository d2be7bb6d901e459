"""Deliberately wrong versions of the lesson 05 solution (see tests/mutants_04.py for the format)."""
LESSON = "05_triton_layernorm"

TILE_STORE_MEAN = "    tl.store(MEAN + rows, mean, mask=row_mask)\n"
FIXED_STORE = "tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=cols < N)"
LOOPED_STORE = "tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)"
DISPATCH = ("    if row_bytes < 2048 or (x.element_size() == 4 and row_bytes <= 8192):\n"
            "        return layernorm_fwd(x, weight, bias, eps)\n")

FAR_ROWS = "past what an int32 offset reaches"

FIXED_P3 = ("        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)\n        y = (x - mean) * rstd\n"
            "        if HAS_WEIGHT:\n            y = y * tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)\n"
            "        if HAS_BIAS:\n            y = y + tl.load(B + cols, mask=cols < N, other=0.0).to(tl.float32)\n"
            "        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=cols < N)")   # the fixed kernel's pass 3

LOOPED_HEAD = ("    # Launcher: one program per row, chunks of BLOCK_N, N passed as a compile-time constant.\n"
               "    M, N = helpers.check_rows_input(x, weight, eps, bias=bias)\n")
MUTANTS = [
    ("layernorm_fwd", "mean and variance summed in x's 16-bit dtype (no float32 upcast)",
     [("    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_last\").to(tl.float32)\n"
       "    mean = tl.sum(x, axis=1) / N\n",
       "    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_last\")\n"
       "    mean = tl.sum(x, axis=1) / N\n")], "accumulate in float32"),
    # --- layernorm_fwd: a tile of rows in registers
    ("layernorm_fwd", "loads without the row mask (the stores keep it): rows past M are read",
     [('    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)\n', '    x = tl.load(x_ptrs, mask=col_mask[None, :], other=0.0, eviction_policy="evict_last").to(tl.float32)\n'),
      ('    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)\n', '    x = tl.load(x_ptrs, mask=col_mask[None, :], other=0.0, eviction_policy="evict_first").to(tl.float32)\n')], "read out of bounds"),
    ("layernorm_fwd", "mean over BLOCK_N instead of N",
     [("mean = tl.sum(x, axis=1) / N", "mean = tl.sum(x, axis=1) / BLOCK_N")], "mean"),
    ("layernorm_fwd", "masked lanes included in the variance",
     [("xc = tl.where(mask, x - mean[:, None], 0.0)", "xc = x - mean[:, None]")], "rstd"),
    ("layernorm_fwd", "unbiased variance (N - 1)",
     [("rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)", "rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / (N - 1) + eps)")],
     "the unbiased variance, torch.var's default"),
    ("layernorm_fwd", "one-pass variance E[x^2] - E[x]^2",
     [("rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)",
       "rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N - mean * mean + eps)")], "cancellation"),
    ("layernorm_fwd", "x.contiguous() first: a strided x is copied before the kernel",
     [("    ### BEGIN SOLUTION\n    x2 = x.reshape(M, N)\n    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n"
       "    mean = torch.empty(M, dtype=torch.float32, device=x.device)\n    rstd = torch.empty(M, dtype=torch.float32, "
       "device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n    _layernorm_fwd_kernel",
       "    ### BEGIN SOLUTION\n    x2 = x.contiguous().view(M, N)\n    y = torch.empty((M, N), dtype=x.dtype, "
       "device=x.device)\n    mean = torch.empty(M, dtype=torch.float32, device=x.device)\n    rstd = torch.empty(M, "
       "dtype=torch.float32, device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n    _layernorm_fwd_kernel")],
     "read a copy of x"),
    ("layernorm_fwd", "mean and rstd cached across calls (a backward pass would read the next call's statistics)",
     [("    mean = torch.empty(M, dtype=torch.float32, device=x.device)\n    rstd = torch.empty(M, dtype=torch.float32, "
       "device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n    _layernorm_fwd_kernel",
       "    if getattr(layernorm_fwd, \"stats\", (None,))[0] is None or layernorm_fwd.stats[0].shape != (M,) "
       "or layernorm_fwd.stats[0].device != x.device:\n        layernorm_fwd.stats = (torch.empty(M, dtype=torch.float32, "
       "device=x.device), torch.empty(M, dtype=torch.float32, device=x.device))\n    mean, rstd = layernorm_fwd.stats\n"
       "    BLOCK_N = triton.next_power_of_2(N)\n    _layernorm_fwd_kernel")],
     "overwrote the first call's mean, rstd"),
    ("layernorm_fwd", "mean never stored", [(TILE_STORE_MEAN, "")], "never written"),
    ("layernorm_fwd", "eps squared: rstd passes its own tolerance where var >> eps, y does not",
     [("rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)", "rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps * eps)")],
     "pass their own tolerance, but y formed from them"),
    ("layernorm_fwd", "divides by rstd: y formed wrongly from right statistics",
     [("    y = (x - mean[:, None]) * rstd[:, None]\n", "    y = (x - mean[:, None]) / rstd[:, None]\n")],
     "right: the error is in how y is formed"),
    ("layernorm_fwd", "ignores the row stride",
     [("M, N, x2.stride(0), y.stride(0), eps,\n        BLOCK_M=BLOCK_M", "M, N, N, N, eps,\n        BLOCK_M=BLOCK_M")],
     "row stride"),
    # --- layernorm_fwd_fixed: each of the seed's bugs put back
    ("layernorm_fwd_fixed", "mean divided by BLOCK_N",
     [("mean = tl.sum(acc, axis=0) / N", "mean = tl.sum(acc, axis=0) / BLOCK_N")], "mean"),
    ("layernorm_fwd_fixed", "padded lanes in the variance",
     [("d = tl.where(cols < N, x - mean, 0.0)", "d = x - mean")], "rstd"),
    ("layernorm_fwd_fixed", "last chunk stored without a mask",
     [(FIXED_STORE, "tl.store(y_row + cols, y.to(Y.dtype.element_ty))")], "out of bounds"),
    ("layernorm_fwd_fixed", "rstd never stored",
     [(FIXED_STORE + "\n    tl.store(MEAN + row, mean)\n    tl.store(RSTD + row, rstd)\n",
       FIXED_STORE + "\n    tl.store(MEAN + row, mean)\n")], "never written"),
    ("layernorm_fwd_fixed", "eps outside the sqrt",
     [("acc += d * d\n    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)",
       "acc += d * d\n    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N) + eps")],
     "rstd"),
    ("layernorm_fwd_fixed", "row stride ignored",
     [("### BEGIN SOLUTION\n    row = tl.program_id(0).to(tl.int64)\n    x_row = X + row * stride_x",
       "### BEGIN SOLUTION\n    row = tl.program_id(0).to(tl.int64)\n    x_row = X + row * N")], "row stride"),
    # --- layernorm_fwd_looped: two passes, Chan's merge
    ("layernorm_fwd_looped", "Chan merge without the between-chunk term",
     [("m2 = m2 + m2_c + delta * delta * (n * n_c / n_new)", "m2 = m2 + m2_c")], "rstd"),
    ("layernorm_fwd_looped", "Chan merge whose between-chunk term does not vanish from the empty state (n = 0)",
     [("m2 = m2 + m2_c + delta * delta * (n * n_c / n_new)", "m2 = m2 + m2_c + delta * delta * n_c")],
     "first chunk must come out as its own mean and M2"),
    ("layernorm_fwd_looped", "Chan merge with equal weights",
     [("mean = mean + delta * (n_c / n_new)", "mean = mean + delta * 0.5")], "mean"),
    ("layernorm_fwd_looped", "exercise 2's three loops (mean, then variance, then normalise): x read three times",
     [('    n = 0.0\n    mean = 0.0\n    m2 = 0.0\n    for off in range(0, N, BLOCK_N):\n'
       '        cols = off + tl.arange(0, BLOCK_N)\n        mask = cols < N\n'
       '        x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)\n'
       '        n_c = tl.minimum(N - off, BLOCK_N).to(tl.float32)\n        mean_c = tl.sum(x, axis=0) / n_c\n'
       '        d = tl.where(mask, x - mean_c, 0.0)\n        m2_c = tl.sum(d * d, axis=0)\n        n_new = n + n_c\n'
       '        delta = mean_c - mean\n        mean = mean + delta * (n_c / n_new)\n'
       '        m2 = m2 + m2_c + delta * delta * (n * n_c / n_new)\n        n = n_new\n'
       '    rstd = tl.rsqrt(m2 / N + eps)\n',
       '    acc = tl.zeros([BLOCK_N], dtype=tl.float32)\n    for off in range(0, N, BLOCK_N):\n'
       '        cols = off + tl.arange(0, BLOCK_N)\n'
       '        acc += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)\n'
       '    mean = tl.sum(acc, axis=0) / N\n    acc = tl.zeros([BLOCK_N], dtype=tl.float32)\n'
       '    for off in range(0, N, BLOCK_N):\n        cols = off + tl.arange(0, BLOCK_N)\n'
       '        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)\n'
       '        acc += tl.where(cols < N, x - mean, 0.0) * tl.where(cols < N, x - mean, 0.0)\n'
       '    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)\n')], "read x 3 times"),
    ("layernorm_fwd_looped", "chunk tail dropped (last chunk counted as full)",
     [("n_c = tl.minimum(N - off, BLOCK_N).to(tl.float32)", "n_c = BLOCK_N * 1.0")], "mean"),
    ("layernorm_fwd_looped", "masked lanes in a chunk's M2",
     [("d = tl.where(mask, x - mean_c, 0.0)", "d = x - mean_c")], "rstd"),
    ("layernorm_fwd_looped", "shifted sums (x - x[first]) without a cancellation check",
     [("        mean_c = tl.sum(x, axis=0) / n_c\n        d = tl.where(mask, x - mean_c, 0.0)\n"
       "        m2_c = tl.sum(d * d, axis=0)\n",
       "        k = tl.load(x_row + off).to(tl.float32)\n        d = tl.where(mask, x - k, 0.0)\n"
       "        s1 = tl.sum(d, axis=0)\n        mean_c = k + s1 / n_c\n"
       "        m2_c = tl.sum(d * d, axis=0) - s1 * (s1 / n_c)\n")], "far from the rest"),
    ("layernorm_fwd_looped", "unbiased variance (N - 1)",
     [("rstd = tl.rsqrt(m2 / N + eps)", "rstd = tl.rsqrt(m2 / (N - 1) + eps)")],
     "the unbiased variance, torch.var's default"),
    ("layernorm_fwd_looped", "no mask on the store",
     [(LOOPED_STORE, "tl.store(y_row + cols, y.to(Y.dtype.element_ty))")], "out of bounds"),
    # --- layernorm: the dispatcher
    ("layernorm", "always the tile kernel",
     [(DISPATCH, "    if True:\n        return layernorm_fwd(x, weight, bias, eps)\n")], "too large"),
    ("layernorm", "always the looped kernel",
     [(DISPATCH, "    if False:\n        return layernorm_fwd(x, weight, bias, eps)\n")], "should launch"),
    ("layernorm", "forgets the bias on short rows",
     [(DISPATCH, DISPATCH.replace("(x, weight, bias, eps)", "(x, weight, None, eps)"))], ""),
    ("layernorm", "drops eps on the looped path",
     [("layernorm_fwd_looped(x, weight, bias, eps, block_n=", "layernorm_fwd_looped(x, weight, bias, block_n=")],
     ""),
    ("layernorm", "the same crossover (2 KB) for fp32 rows",
     [(DISPATCH, "    if row_bytes < 2048:\n        return layernorm_fwd(x, weight, bias, eps)\n")],
     "should launch _layernorm_fwd_kernel"),
    ("layernorm", "every row up to 8 KB to the tile kernel, 16-bit too",
     [(DISPATCH, "    if row_bytes <= 8192:\n        return layernorm_fwd(x, weight, bias, eps)\n")],
     "should launch _layernorm_fwd_looped_kernel"),
    ("layernorm", "crossover by N instead of bytes per row",
     [(DISPATCH, "    if N <= 512:\n        return layernorm_fwd(x, weight, bias, eps)\n")],
     "should launch"),
    ("layernorm", "two chunks only from 64 KB (16-bit rows of 32-64 KB as one chunk)",
     [("if x.element_size() == 2 and row_bytes > 32768:", "if x.element_size() == 2 and row_bytes >= 65536:")],
     "this call must use BLOCK_N=16384"),
    ("layernorm", "long rows to the looped kernel, not the split one",
     [("    return layernorm_fwd_split(x, weight, bias, eps)\n",
       "    return layernorm_fwd_looped(x, weight, bias, eps)\n")],
     "should launch _layernorm_fwd_split_kernel"),
    ("layernorm", "calls F.layer_norm",
     [(DISPATCH, "    if N <= 32768:\n        return (torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias,"
                 " eps),) + layernorm_fwd(x, weight, bias, eps)[1:]\n")], "layer_norm"),
    # --- kernels the interpreter runs but a GPU's compiler rejects (the "compiles for a GPU" case)
    ("layernorm_fwd", "xc ** 2 (no power operator on a GPU)",
     [("rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)", "rstd = tl.rsqrt(tl.sum(xc ** 2, axis=1) / N + eps)")],
     "Triton tensors have no ** operator"),
    ("layernorm_fwd_fixed", "offs of the first loop used in the second",
     [("        cols = off + tl.arange(0, BLOCK_N)\n        acc += tl.load(x_row + cols, mask=cols < N, other=0.0)"
       ".to(tl.float32)\n    mean = tl.sum(acc, axis=0) / N",
       "        offs = off + tl.arange(0, BLOCK_N)\n        acc += tl.load(x_row + offs, mask=offs < N, other=0.0)"
       ".to(tl.float32)\n    mean = tl.sum(acc, axis=0) / N"),
      ("        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)\n        d = tl.where(cols < N",
       "        x = tl.load(x_row + cols, mask=offs < N, other=0.0).to(tl.float32)\n        d = tl.where(cols < N")],
     "does not exist after it in a compiled kernel"),
    ("layernorm_fwd_fixed", "torch.sum inside the kernel (the seed's bug)",
     [("    mean = tl.sum(acc, axis=0) / N\n    acc = tl.zeros([BLOCK_N], dtype=tl.float32)\n"
       "    for off in range(0, N, BLOCK_N):\n        cols = off + tl.arange(0, BLOCK_N)\n"
       "        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)\n        d = tl.where",
       "    mean = torch.sum(acc) / N\n    acc = tl.zeros([BLOCK_N], dtype=tl.float32)\n"
       "    for off in range(0, N, BLOCK_N):\n        cols = off + tl.arange(0, BLOCK_N)\n"
       "        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)\n        d = tl.where")],
     "a PyTorch function was called on a Triton tensor inside a @triton.jit kernel"),
    ("layernorm_fwd_looped", "running n, mean, m2 started as int 0",
     [("    n = 0.0\n    mean = 0.0\n    m2 = 0.0\n", "    n = 0\n    mean = 0\n    m2 = 0\n")], "start a float as 0.0"),
    ("layernorm_fwd_looped", "Python min and float on a tensor",
     [("n_c = tl.minimum(N - off, BLOCK_N).to(tl.float32)", "n_c = float(min(N - off, BLOCK_N))")],
     "Python's min, max, float"),
    ("layernorm", "split kernel: Python min and float on a tensor",
     [("n_c = tl.minimum(N - part * CHUNK, CHUNK).to(tl.float32)", "n_c = float(min(N - part * CHUNK, CHUNK))")],
     "does not compile for a GPU"),
    # --- the dispatcher's chunk choices (the launch's BLOCK_N, recorded by the harness) and fp16 routing
    ("layernorm", "16-bit rows over 32 KB in one chunk (no halving)",
     [("        if x.element_size() == 2 and row_bytes > 32768:\n"
       "            block_n //= 2                                # 16-bit rows over 32 KB: two chunks\n", "")],
     "two chunks"),
    ("layernorm", "looped kernel with its default 16 KB chunks",
     [("return layernorm_fwd_looped(x, weight, bias, eps, block_n=block_n)",
       "return layernorm_fwd_looped(x, weight, bias, eps)")], "a row is one chunk"),
    ("layernorm", "fp16 rows up to 8 KB to the tile kernel, like fp32",
     [("(x.element_size() == 4 and row_bytes <= 8192)", "(x.dtype != torch.bfloat16 and row_bytes <= 8192)")],
     "should launch _layernorm_fwd_looped_kernel"),
    ("layernorm", "fp16 rows over 32 KB in one chunk (only bf16 halved)",
     [("        if x.element_size() == 2 and row_bytes > 32768:\n",
       "        if x.dtype == torch.bfloat16 and row_bytes > 32768:\n")],
     "this call must use BLOCK_N=16384: 16-bit rows over 32 KB"),
    ("layernorm", "16-bit rows of exactly 32 KB halved too (>= instead of >)",
     [("        if x.element_size() == 2 and row_bytes > 32768:\n",
       "        if x.element_size() == 2 and row_bytes >= 32768:\n")], "must use BLOCK_N=16384"),
    ("layernorm", "fp32 chunks capped at 16384",
     [("        return layernorm_fwd_looped(x, weight, bias, eps, block_n=block_n)\n",
       "        return layernorm_fwd_looped(x, weight, bias, eps, block_n=min(block_n, 16384))\n")],
     "must use BLOCK_N=32768"),
    ("layernorm", "drops eps on the split path",
     [("    return layernorm_fwd_split(x, weight, bias, eps)\n", "    return layernorm_fwd_split(x, weight, bias)\n")],
     "Is eps inside the square root"),
    # --- exercise 3's launcher: the chunk it is given
    ("layernorm_fwd_looped", "launches the whole row as one chunk (exercise 1's BLOCK_N)",
     [("    _layernorm_fwd_looped_kernel[(M,)](\n        x2, y, x2 if weight is None else weight, x2 if bias is None "
       "else bias, mean, rstd,\n        x2.stride(0), y.stride(0), eps, N=N,\n        BLOCK_N=BLOCK_N,",
       "    _layernorm_fwd_looped_kernel[(M,)](\n        x2, y, x2 if weight is None else weight, x2 if bias is None "
       "else bias, mean, rstd,\n        x2.stride(0), y.stride(0), eps, N=N,\n        BLOCK_N=triton.next_power_of_2(N),")],
     "the block_n given is the chunk"),
    ("layernorm_fwd_looped", "a whole-row default chunk",
     [("    BLOCK_N = block_n_for(N, x.element_size()) if block_n is None else block_n\n    if not isinstance"
       "(BLOCK_N, int) or BLOCK_N < 1 or BLOCK_N & (BLOCK_N - 1):\n        raise ValueError(f\"block_n must be a "
       "power of two >= 1, got {block_n!r}\")\n    ### BEGIN SOLUTION\n    x2 = x.reshape(M, N)\n    y = torch."
       "empty((M, N), dtype=x.dtype, device=x.device)\n    mean = torch.empty(M, dtype=torch.float32, device=x.device)"
       "\n    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    _layernorm_fwd_looped_kernel",
       "    BLOCK_N = triton.next_power_of_2(N) if block_n is None else block_n\n    if not isinstance"
       "(BLOCK_N, int) or BLOCK_N < 1 or BLOCK_N & (BLOCK_N - 1):\n        raise ValueError(f\"block_n must be a "
       "power of two >= 1, got {block_n!r}\")\n    ### BEGIN SOLUTION\n    x2 = x.reshape(M, N)\n    y = torch."
       "empty((M, N), dtype=x.dtype, device=x.device)\n    mean = torch.empty(M, dtype=torch.float32, device=x.device)"
       "\n    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    _layernorm_fwd_looped_kernel")],
     "block_n_for(N, 2) = 8192"),
    ("layernorm_fwd", "casts the caller's weight and bias in place (.data)",
     [("    M, N = helpers.check_rows_input(x, weight, eps, bias=bias, max_n=MAX_FUSED_N)\n    BLOCK_M = ",
       "    M, N = helpers.check_rows_input(x, weight, eps, bias=bias, max_n=MAX_FUSED_N)\n"
       "    if weight is not None and weight.dtype != x.dtype:\n        weight.data = weight.data.to(x.dtype)\n"
       "    BLOCK_M = ")], "modified its input weight (now bfloat16)"),
    ("layernorm_fwd", "statistics in NumPy, the kernel only normalizes with them",
     [("    M, N = helpers.check_rows_input(x, weight, eps, bias=bias, max_n=MAX_FUSED_N)\n    BLOCK_M = ",
       "    M, N = helpers.check_rows_input(x, weight, eps, bias=bias, max_n=MAX_FUSED_N)\n    x.reshape(-1, N).detach().cpu().float()"
       ".numpy().mean(axis=1)\n    BLOCK_M = ")], "took the data out of torch (Tensor.numpy"),
    # --- int32 row offsets: only the GPU case with rows past 2**31 elements catches them
    ("layernorm_fwd", "row indices left int32 (rows * stride_x wraps past 2**31 elements)",
     [("rows = tl.program_id(0).to(tl.int64) * BLOCK_M", "rows = tl.program_id(0) * BLOCK_M")], FAR_ROWS, "gpu"),
    ("layernorm_fwd_looped", "row index left int32",
     [("an int 0 that becomes a float is an error.)\n    row = tl.program_id(0).to(tl.int64)\n",
       "an int 0 that becomes a float is an error.)\n    row = tl.program_id(0)\n")], FAR_ROWS, "gpu"),
    # --- from review 05c: the dispatcher launches one kernel, once, with its own launch choices
    ("layernorm", "if/if instead of if/elif: short rows run the tile kernel, then the looped kernel's result wins",
     [("    if row_bytes < 2048 or (x.element_size() == 4 and row_bytes <= 8192):\n"
       "        return layernorm_fwd(x, weight, bias, eps)\n",
       "    out = None\n    if row_bytes < 2048 or (x.element_size() == 4 and row_bytes <= 8192):\n"
       "        out = layernorm_fwd(x, weight, bias, eps)\n"),
      ("        return layernorm_fwd_looped(x, weight, bias, eps, block_n=block_n)\n"
       "    return layernorm_fwd_split(x, weight, bias, eps)\n",
       "        out = layernorm_fwd_looped(x, weight, bias, eps, block_n=block_n)\n    else:\n"
       "        out = layernorm_fwd_split(x, weight, bias, eps)\n    return out\n")],
     "a dispatcher launches one kernel, once"),
    ("layernorm", "a throw-away tile launch before the looped kernel",
     [("        return layernorm_fwd_looped(x, weight, bias, eps, block_n=block_n)\n",
       "        if N <= MAX_FUSED_N:\n            layernorm_fwd(x, weight, bias, eps)   # a sanity run\n"
       "        return layernorm_fwd_looped(x, weight, bias, eps, block_n=block_n)\n")],
     "a dispatcher launches one kernel, once"),
    ("layernorm", "rows over 128 KB to the split kernel with one whole-row chunk (one program per row)",
     [("    return layernorm_fwd_split(x, weight, bias, eps)\n",
       "    return layernorm_fwd_split(x, weight, bias, eps, chunk=triton.next_power_of_2(N))\n")],
     "CHUNK=8192"),
    ("layernorm", "the tile kernel with one row per program",
     [("        return layernorm_fwd(x, weight, bias, eps)\n",
       "        return layernorm_fwd(x, weight, bias, eps, rows_per_program=1)\n")],
     "rows per program"),
    # --- from review 05d: one fused kernel launched once, outliers anywhere in the row, the tile's columns
    ("layernorm_fwd", "a warm-up launch before the real one (the kernel twice per call)",
     [("    _layernorm_fwd_kernel[(triton.cdiv(M, BLOCK_M),)](\n",
       "    for _ in range(2):\n      _layernorm_fwd_kernel[(triton.cdiv(M, BLOCK_M),)](\n")],
     "this exercise is one fused kernel, _layernorm_fwd_kernel, launched once per call"),
    ("layernorm_fwd_looped", "the looped kernel launched twice per call",
     [("    _layernorm_fwd_looped_kernel[(M,)](\n", "    for _ in range(2):\n      _layernorm_fwd_looped_kernel[(M,)](\n")],
     "this exercise is one fused kernel, _layernorm_fwd_looped_kernel"),
    ("layernorm_fwd", "one-pass variance of sums shifted by the row's last element (x[N-1])",
     [("    mean = tl.sum(x, axis=1) / N\n    xc = tl.where(mask, x - mean[:, None], 0.0)\n"
       "    rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)\n",
       "    k = tl.sum(tl.where(cols[None, :] == N - 1, x, 0.0), axis=1)\n"
       "    xk = tl.where(mask, x - k[:, None], 0.0)\n    s1 = tl.sum(xk, axis=1)\n    s2 = tl.sum(xk * xk, axis=1)\n"
       "    mean = tl.sum(x, axis=1) / N\n    rstd = tl.rsqrt((s2 - s1 * s1 / N) / N + eps)\n")],
     "around one element k of the row"),
    ("layernorm_fwd", "short rows padded to 1024 lanes",
     [("    BLOCK_N = triton.next_power_of_2(N)\n    _layernorm_fwd_kernel",
       "    BLOCK_N = max(1024, triton.next_power_of_2(N))\n    _layernorm_fwd_kernel")],
     "this call must use BLOCK_N=64"),
    ("layernorm_fwd_fixed", "the normalising loop's loads masked by the lanes, not by the chunk's columns",
     [(FIXED_P3, FIXED_P3.replace("x = tl.load(x_row + cols, mask=cols < N,",
                                  "x = tl.load(x_row + cols, mask=tl.arange(0, BLOCK_N) < N,"))],
     "read out of bounds"),
    ("layernorm", "short rows go to the tile kernel only from 8 rows on",
     [("    if row_bytes < 2048 or (x.element_size() == 4 and row_bytes <= 8192):\n",
       "    if x.numel() >= 8 * x.shape[-1] and (row_bytes < 2048 or (x.element_size() == 4 and row_bytes <= 8192)):\n")],
     "the dispatcher should launch _layernorm_fwd_kernel"),
    ("layernorm_fwd", "y stored in float32, converted to x's dtype in the launcher (y's bytes moved again)",
     [("    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n    mean = torch.empty(M, dtype=torch.float32, "
       "device=x.device)\n    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n"
       "    BLOCK_N = triton.next_power_of_2(N)\n    _layernorm_fwd_kernel",
       "    y = torch.empty((M, N), dtype=torch.float32, device=x.device)\n    mean = torch.empty(M, dtype=torch.float32, "
       "device=x.device)\n    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n"
       "    BLOCK_N = triton.next_power_of_2(N)\n    _layernorm_fwd_kernel"),
      ("        num_warps=num_warps_for(BLOCK_M * BLOCK_N, x.element_size()))\n    return y.reshape(x.shape), mean",
       "        num_warps=num_warps_for(BLOCK_M * BLOCK_N, x.element_size()))\n    return y.to(x.dtype).reshape(x.shape), mean")],
     "from memory no kernel was given"),
    # review 05e
    ("layernorm_fwd_looped", "default chunk of 16 KB whatever the row (a row of 100 gets 8192 lanes)",
     [(LOOPED_HEAD + "    BLOCK_N = block_n_for(N, x.element_size()) if block_n is None else block_n\n",
       LOOPED_HEAD + "    BLOCK_N = 16384 // x.element_size() if block_n is None else block_n\n")],
     "not 16 KB of them"),
    ("layernorm_fwd_looped", "default chunk sized for 2-byte elements whatever x's dtype",
     [(LOOPED_HEAD + "    BLOCK_N = block_n_for(N, x.element_size()) if block_n is None else block_n\n",
       LOOPED_HEAD + "    BLOCK_N = block_n_for(N, 2) if block_n is None else block_n\n")],
     "the element size is x's, not 2"),
    ("layernorm_fwd_looped", "a scalar load of x[off] per chunk (shifted sums): a few loads more than two reads",
     [("        mean_c = tl.sum(x, axis=0) / n_c\n        d = tl.where(mask, x - mean_c, 0.0)\n",
       "        k = tl.load(x_row + off).to(tl.float32)\n"
       "        mean_c = k + tl.sum(tl.where(mask, x - k, 0.0), axis=0) / n_c\n        d = tl.where(mask, x - mean_c, 0.0)\n")],
     "a few extra loads"),
    ("layernorm", "N taken as x.numel() // x.shape[0] (a 3-D x routed by its last two dims together)",
     [("    N = x.shape[-1]\n", "    N = x.numel() // x.shape[0]\n")],
     "for N=300 the dispatcher should launch _layernorm_fwd_kernel"),
    ("layernorm_fwd", "eps left out of the stored rstd (only y has it)",
     [("    rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)\n",
       "    var = tl.sum(xc * xc, axis=1) / N\n    rstd = tl.rsqrt(var)\n"),
      ("    y = (x - mean[:, None]) * rstd[:, None]\n", "    y = (x - mean[:, None]) * tl.rsqrt(var + eps)[:, None]\n")],
     "Inf: the rsqrt of 0"),
    ("layernorm_fwd", "mean and rstd stored into each other's buffers",
     [(TILE_STORE_MEAN + "    tl.store(RSTD + rows, rstd, mask=row_mask)\n",
       "    tl.store(MEAN + rows, rstd, mask=row_mask)\n    tl.store(RSTD + rows, mean, mask=row_mask)\n")],
     "mean holds rstd's values"),
    ("layernorm_fwd", "mean and rstd returned with a trailing 1 (keepdim, as torch.native_layer_norm)",
     [("        num_warps=num_warps_for(BLOCK_M * BLOCK_N, x.element_size()))\n"
       "    return y.reshape(x.shape), mean.reshape(x.shape[:-1]), rstd.reshape(x.shape[:-1])\n",
       "        num_warps=num_warps_for(BLOCK_M * BLOCK_N, x.element_size()))\n"
       "    return y.reshape(x.shape), mean.reshape(*x.shape[:-1], 1), rstd.reshape(*x.shape[:-1], 1)\n")],
     "a trailing 1 (keepdim)"),
    ("layernorm_fwd", "the tile loaded again for the variance (three reads: mean, variance, y)",
     [("    mean = tl.sum(x, axis=1) / N\n    xc = tl.where(mask, x - mean[:, None], 0.0)\n",
       "    mean = tl.sum(x, axis=1) / N\n"
       "    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_last\").to(tl.float32)\n"
       "    xc = tl.where(mask, x - mean[:, None], 0.0)\n")],
     "the kernels read x 3 times"),
    ("layernorm", "the tile's rows per program sized for 2-byte elements whatever x's dtype",
     [("        return layernorm_fwd(x, weight, bias, eps)\n",
       "        return layernorm_fwd(x, weight, bias, eps, rows_per_program=rows_per_program_for(N, 2))\n")],
     "rows_per_program_for(N, x.element_size())"),
]
