"""Deliberately wrong versions of the lesson 04 solution, as exact text edits of its code cells.

Each mutant: (exercise id, name, [(old, new), ...], substring expected in a failing case's message).
The edits must match the solution exactly once (tests fail loudly if the solution drifts).
Every lesson has a `tests/mutants_NN.py` like this one, naming its solution notebook in LESSON.
"""
LESSON = "04_triton_rmsnorm"

FWD_LOAD = ("x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0, eviction_policy=\"evict_last\")"
            ".to(tl.float32)")
FWD_RELOAD = FWD_LOAD.replace("evict_last", "evict_first")
FWD_STORE = "tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)"
ROWS_LOAD = "x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_last\").to(tl.float32)"
FAR_ROWS = "past what an int32 offset reaches"
LOOP_P2 = ("            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy=\"evict_first\")"
           ".to(tl.float32)")

MUTANTS = [
    # --- rmsnorm_fwd: one row per program
    ("rmsnorm_fwd", "output buffers cached across calls (a second call overwrites the first's y and rstd)",
     [("    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n"
       "    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n"
       "    _rmsnorm_fwd_kernel[(M,)](\n",
       "    bufs = rmsnorm_fwd.__dict__.setdefault(\"bufs\", {})\n    if (M, N, x.dtype, x.device) not in bufs:\n"
       "        bufs[M, N, x.dtype, x.device] = (torch.empty((M, N), dtype=x.dtype, device=x.device),\n"
       "                                          torch.empty(M, dtype=torch.float32, device=x.device))\n"
       "    y, rstd = bufs[M, N, x.dtype, x.device]\n    BLOCK_N = triton.next_power_of_2(N)\n"
       "    _rmsnorm_fwd_kernel[(M,)](\n")],
     "a second call on other values of x overwrote the first call's y, rstd"),
    ("rmsnorm_fwd", "x.contiguous() first: a strided x is copied before the kernel",
     [("    ### BEGIN SOLUTION\n    x2 = x.reshape(M, N)\n    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n"
       "    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n"
       "    _rmsnorm_fwd_kernel[(M,)]",
       "    ### BEGIN SOLUTION\n    x2 = x.contiguous().view(M, N)\n    y = torch.empty((M, N), dtype=x.dtype, "
       "device=x.device)\n    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n"
       "    BLOCK_N = triton.next_power_of_2(N)\n    _rmsnorm_fwd_kernel[(M,)]")],
     "read a copy of x"),
    ("rmsnorm_fwd", "eps outside the sqrt",
     [("rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)\n    x = tl.load(",
       "rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N) + eps\n    x = tl.load(")], "constant factor"),
    ("rmsnorm_fwd", "missing mask",
     [(FWD_LOAD, "x = tl.load(X + row * stride_x + cols).to(tl.float32)"),
      (FWD_RELOAD, "x = tl.load(X + row * stride_x + cols).to(tl.float32)"),
      (FWD_STORE, "tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty))")], "mask"),
    ("rmsnorm_fwd", "fp16 accumulation",
     [(FWD_LOAD, FWD_LOAD.replace("tl.float32", "tl.float16"))], "overflow"),
    ("rmsnorm_fwd", "sums in x's 16-bit dtype (no float32 upcast, no overflow)",
     [(FWD_LOAD, FWD_LOAD.replace(".to(tl.float32)", ""))], "accumulate in float32"),
    ("rmsnorm_fwd", "mean over the block instead of N",
     [("rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)\n    x = tl.load(",
       "rstd = tl.rsqrt(tl.sum(x * x, axis=0) / BLOCK_N + eps)\n    x = tl.load(")], "constant factor"),
    ("rmsnorm_fwd", "ignores the row stride",
     [("x2.stride(0), y.stride(0), N, eps,\n        BLOCK_N=BLOCK_N, HAS_WEIGHT",
       "N, N, N, eps,\n        BLOCK_N=BLOCK_N, HAS_WEIGHT")], "row stride"),
    ("rmsnorm_fwd", "x itself with x.stride(-2) instead of x.reshape(M, N)",
     [("        x2, y, weight if weight is not None else x2, rstd,\n        x2.stride(0), y.stride(0), N, eps,\n"
       "        BLOCK_N=BLOCK_N, HAS_WEIGHT",
       "        x, y, weight if weight is not None else x, rstd,\n        x.stride(-2) if x.dim() > 1 else N, y.stride(0), "
       "N, eps,\n        BLOCK_N=BLOCK_N, HAS_WEIGHT")], "x.reshape(M, N)"),
    ("rmsnorm_fwd", "calls F.rms_norm instead of a kernel",
     [("    x2 = x.reshape(M, N)\n    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n"
       "    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n"
       "    _rmsnorm_fwd_kernel",
       "    y = torch.nn.functional.rms_norm(x, (N,), weight, eps)\n"
       "    return y, torch.rsqrt(x.float().pow(2).mean(-1) + eps)\n    _rmsnorm_fwd_kernel")], "rms_norm"),
    ("rmsnorm_fwd", "rstd never stored",
     [(FWD_STORE + "\n    tl.store(RSTD + row, rstd)\n", FWD_STORE + "\n")], "never written"),
    ("rmsnorm_fwd", "launches the kernel, then computes y with PyTorch in the launcher",
     [("    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n"
       "    _rmsnorm_fwd_kernel[(M,)](\n",
       "    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n"
       "    x32 = x2.float()\n    y.copy_(x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps))\n"
       "    _rmsnorm_fwd_kernel[(M,)](\n")],
     "computed with PyTorch outside the kernel"),
    # --- rmsnorm_fwd_rows: several rows per program
    ("rmsnorm_fwd_rows", "no row mask",
     [("    mask = row_mask[:, None] & col_mask[None, :]\n", "    mask = col_mask[None, :] & (rows >= 0)[:, None]\n"),
      ("    tl.store(RSTD + rows, rstd, mask=row_mask)\n", "    tl.store(RSTD + rows, rstd)\n")], "mask"),
    ("rmsnorm_fwd_rows", "loads without the row mask (the stores keep it): rows past M are read",
     [('    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)\n', '    x = tl.load(x_ptrs, mask=col_mask[None, :], other=0.0, eviction_policy="evict_last").to(tl.float32)\n'),
      ('    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)\n', '    x = tl.load(x_ptrs, mask=col_mask[None, :], other=0.0, eviction_policy="evict_first").to(tl.float32)\n')], "read out of bounds"),
    ("rmsnorm_fwd_rows", "reduces over the wrong axis",
     [("rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)", "rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)")], ""),
    ("rmsnorm_fwd_rows", "validates rows_per_program, then launches one row per program",
     [("_rmsnorm_fwd_rows_kernel[(triton.cdiv(M, BLOCK_M),)](", "BLOCK_M = 1\n    _rmsnorm_fwd_rows_kernel[(M,)](")],
     "triton.cdiv(M, rows_per_program) programs"),
    ("rmsnorm_fwd_rows", "fp16 accumulation",
     [(ROWS_LOAD, ROWS_LOAD.replace("tl.float32", "tl.float16"))], "overflow"),
    ("rmsnorm_fwd_rows", "grid of M // BLOCK_M programs (drops the remainder)",
     [("_rmsnorm_fwd_rows_kernel[(triton.cdiv(M, BLOCK_M),)]", "_rmsnorm_fwd_rows_kernel[(max(1, M // BLOCK_M),)]")],
     "never written"),
    ("rmsnorm_fwd_rows", "eps outside the sqrt",
     [("rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)", "rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N) + eps")],
     "constant factor"),
    ("rmsnorm_fwd_rows", "accepts any rows_per_program",
     [("    if not isinstance(BLOCK_M, int) or BLOCK_M < 1 or BLOCK_M & (BLOCK_M - 1):\n"
       "        raise ValueError(f\"rows_per_program must be a power of two >= 1, got {rows_per_program!r}\")\n", "")],
     ""),
    ("rmsnorm_fwd_rows", "rows_per_program checked for oddness only (accepts 6 and 0)",
     [("    if not isinstance(BLOCK_M, int) or BLOCK_M < 1 or BLOCK_M & (BLOCK_M - 1):\n",
       "    if BLOCK_M != 1 and BLOCK_M % 2 == 1:\n")], "rows_per_program=6"),
    ("rmsnorm_fwd_rows", "default rows_per_program chosen by M instead of N",
     [("rows_per_program_for(N) if", "rows_per_program_for(M) if")], "rows_per_program_for(N) = 4"),
    # --- rmsnorm_fwd_looped: persistent, two passes
    ("rmsnorm_fwd_looped", "writes only the first block of a row",
     [("        for off in range(0, N, BLOCK_N):\n            cols = off + tl.arange(0, BLOCK_N)\n            mask = cols < N\n",
       "        for off in range(0, BLOCK_N, BLOCK_N):\n            cols = off + tl.arange(0, BLOCK_N)\n            mask = cols < N\n")],
     "covers only the first"),
    ("rmsnorm_fwd_looped", "the store loop stops a chunk early (its bound is N - BLOCK_N)",
     [("        for off in range(0, N, BLOCK_N):\n            cols = off + tl.arange(0, BLOCK_N)\n            mask = cols < N\n",
       "        for off in range(0, N - BLOCK_N, BLOCK_N):\n            cols = off + tl.arange(0, BLOCK_N)\n            mask = cols < N\n")],
     "a loop over the row that stops early"),
    ("rmsnorm_fwd_looped", "chunk tail dropped (no mask in pass 1)",
     [("x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy=\"evict_last\")",
       "x = tl.load(x_row + cols, eviction_policy=\"evict_last\")")], ""),
    ("rmsnorm_fwd_looped", "eps outside the sqrt",
     [("rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)", "rstd = tl.rsqrt(tl.sum(acc, axis=0) / N) + eps")],
     "constant factor"),
    ("rmsnorm_fwd_looped", "mean over one block instead of N",
     [("rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)", "rstd = tl.rsqrt(tl.sum(acc, axis=0) / BLOCK_N + eps)")],
     "constant factor"),
    ("rmsnorm_fwd_looped", "only the first num_programs rows (no loop over rows)",
     [("    for row in range(pid, M, tl.num_programs(0)):\n", "    for row in range(pid, pid + 1):\n")],
     "never written"),
    ("rmsnorm_fwd_looped", "num_programs not validated (0 launches nothing)",
     [("    if not isinstance(programs, int) or programs < 1:\n"
       "        raise ValueError(f\"num_programs must be a positive int, got {num_programs!r}\")\n", "")],
     "accepted num_programs=0 without an error"),
    ("rmsnorm_fwd_looped", "one program per row (not a persistent grid)",
     [("_rmsnorm_fwd_looped_kernel[(min(programs, M),)](", "_rmsnorm_fwd_looped_kernel[(M,)](")],
     "a persistent grid of num_programs programs"),
    ("rmsnorm_fwd_looped", "y as scratch: pass 1 stores x into y, pass 2 reloads y and scales it",
     [("            x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy=\"evict_last\").to(tl.float32)\n"
       "            acc += x * x\n",
       "            x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy=\"evict_last\").to(tl.float32)\n"
       "            acc += x * x\n"
       "            tl.store(y_row + cols, x.to(Y.dtype.element_ty), mask=cols < N)\n"),
      ("            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy=\"evict_first\").to(tl.float32)\n"
       "            y = x * rstd\n",
       "            x = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)\n"
       "            y = x * rstd\n")], "loaded y back"),
    ("rmsnorm_fwd_looped", "fp16 accumulation",
     [(LOOP_P2, LOOP_P2.replace("tl.float32", "tl.float16")),
      ("x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy=\"evict_last\").to(tl.float32)",
       "x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy=\"evict_last\").to(tl.float16)")],
     "overflow"),
    ("rmsnorm_fwd_looped", "default grid of one program per row (num_programs=None)",
     [("    programs = default_num_programs(M) if num_programs is None else num_programs\n",
       "    programs = M if num_programs is None else num_programs\n")], "default_num_programs(M)"),
    ("rmsnorm_fwd_looped", "default chunk of the whole row (block_n=None)",
     [("    BLOCK_N = block_n_for(N, x.element_size()) if block_n is None else block_n\n",
       "    BLOCK_N = triton.next_power_of_2(N) if block_n is None else block_n\n")], "block_n_for(N, 2) = 16384"),
    # --- from review 04c
    ("rmsnorm_fwd", "x.float() in the launcher: the kernel reads an fp32 copy of a 16-bit x",
     [("    ### BEGIN SOLUTION\n    x2 = x.reshape(M, N)\n    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n"
       "    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n"
       "    _rmsnorm_fwd_kernel[(M,)]",
       "    ### BEGIN SOLUTION\n    x2 = x.reshape(M, N).float()\n    y = torch.empty((M, N), dtype=x.dtype, "
       "device=x.device)\n    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n"
       "    BLOCK_N = triton.next_power_of_2(N)\n    _rmsnorm_fwd_kernel[(M,)]")],
     "read a copy of x"),
    ("rmsnorm_fwd_rows", "M programs through a grid function (most of them idle)",
     [("_rmsnorm_fwd_rows_kernel[(triton.cdiv(M, BLOCK_M),)](", "_rmsnorm_fwd_rows_kernel[lambda meta: (M,)](")],
     "this call must launch (2,)"),
    ("rmsnorm_fwd_looped", "one program per row through a grid function (not persistent)",
     [("_rmsnorm_fwd_looped_kernel[(min(programs, M),)](", "_rmsnorm_fwd_looped_kernel[lambda meta: (M,)](")],
     "a persistent grid of num_programs programs"),
    ("rmsnorm_fwd_looped", "block_n checked, then ignored (always the default chunk)",
     [("    BLOCK_N = block_n_for(N, x.element_size()) if block_n is None else block_n\n",
       "    BLOCK_N = block_n_for(N, x.element_size())\n")], "is the chunk (BLOCK_N) the kernel loops in"),
    # --- int32 row offsets: only the GPU case with rows past 2**31 elements catches them
    ("rmsnorm_fwd", "row index left int32 (row * stride_x wraps past 2**31 elements)",
     [("    row = tl.program_id(0).to(tl.int64)\n", "    row = tl.program_id(0)\n")], FAR_ROWS, "gpu"),
    ("rmsnorm_fwd_rows", "row indices left int32",
     [("rows = tl.program_id(0).to(tl.int64) * BLOCK_M", "rows = tl.program_id(0) * BLOCK_M")], FAR_ROWS, "gpu"),
    ("rmsnorm_fwd_looped", "program id left int32 (the rows it loops over too)",
     [("pid = tl.program_id(0).to(tl.int64)", "pid = tl.program_id(0)")], FAR_ROWS, "gpu"),
    # --- kernels the interpreter runs but a GPU's compiler rejects (the "compiles for a GPU" case)
    ("rmsnorm_fwd", "x ** 2 (no power operator on a GPU)",
     [("    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)\n", "    rstd = tl.rsqrt(tl.sum(x ** 2, axis=0) / N + eps)\n")],
     "Triton tensors have no ** operator"),
    ("rmsnorm_fwd_rows", "a plain float global read in the kernel",
     [("    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)\n", "    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps + EXTRA)\n"),
      ("@triton.jit\ndef _rmsnorm_fwd_rows_kernel", "EXTRA = 0.0\n\n\n@triton.jit\ndef _rmsnorm_fwd_rows_kernel")],
     "globals that are tl.constexpr"),
    ("rmsnorm_fwd_looped", "scalar accumulator that becomes a block in the loop",
     [("        acc = tl.zeros([BLOCK_N], dtype=tl.float32)\n        for off", "        acc = 0.0\n        for off")],
     "must keep the type and shape"),
    # --- from review 04d: the launches, the chunked loads, a second call, the caller's tensors
    ("rmsnorm_fwd", "a warm-up launch before the real one (the kernel twice per call)",
     [("    _rmsnorm_fwd_kernel[(M,)](\n", "    for _ in range(2):\n      _rmsnorm_fwd_kernel[(M,)](\n")],
     "this exercise is one fused kernel, _rmsnorm_fwd_kernel, launched once per call"),
    ("rmsnorm_fwd", "results memoised by shape (a second call on other values gets the first call's)",
     [("    x2 = x.reshape(M, N)\n    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n"
       "    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n"
       "    _rmsnorm_fwd_kernel[(M,)](\n",
       "    memo = rmsnorm_fwd.__dict__.setdefault(\"memo\", {})\n    key = (tuple(x.shape), x.dtype, weight is None)\n"
       "    if key in memo:\n        return tuple(t.clone() for t in memo[key])\n"
       "    x2 = x.reshape(M, N)\n    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n"
       "    rstd = torch.empty(M, dtype=torch.float32, device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n"
       "    memo[key] = (y.reshape(x.shape), rstd.reshape(x.shape[:-1]))\n"
       "    _rmsnorm_fwd_kernel[(M,)](\n")],
     "the second call, on other values of x of the same shape, came back wrong"),
    ("rmsnorm_fwd", "x.data = x.contiguous() (the caller's x re-pointed at a copy)",
     [("    ### BEGIN SOLUTION\n    x2 = x.reshape(M, N)\n    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n",
       "    ### BEGIN SOLUTION\n    x.data = x.contiguous()\n    x2 = x.reshape(M, N)\n"
       "    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n")],
     "re-pointed the caller's x at other memory"),
    ("rmsnorm_fwd", "short rows padded to 1024 lanes",
     [("    BLOCK_N = triton.next_power_of_2(N)\n    _rmsnorm_fwd_kernel[(M,)](\n",
       "    BLOCK_N = max(1024, triton.next_power_of_2(N))\n    _rmsnorm_fwd_kernel[(M,)](\n")],
     "this call must use BLOCK_N=8"),
    ("rmsnorm_fwd_rows", "short rows padded to 1024 lanes",
     [("    BLOCK_N = triton.next_power_of_2(N)\n    _rmsnorm_fwd_rows_kernel",
       "    BLOCK_N = max(1024, triton.next_power_of_2(N))\n    _rmsnorm_fwd_rows_kernel")],
     "this call must use BLOCK_N=64"),
    ("rmsnorm_fwd_looped", "pass 2's loads masked by the lanes, not by the chunk's columns",
     [("            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy=\"evict_first\")",
       "            x = tl.load(x_row + cols, mask=tl.arange(0, BLOCK_N) < N, other=0.0, eviction_policy=\"evict_first\")")],
     "read out of bounds"),
    ("rmsnorm_fwd_looped", "a third loop over x (max|x| first)",
     [("        acc = tl.zeros([BLOCK_N], dtype=tl.float32)\n        for off",
       "        big = tl.zeros([BLOCK_N], dtype=tl.float32)\n        for off in range(0, N, BLOCK_N):\n"
       "            cols = off + tl.arange(0, BLOCK_N)\n"
       "            big = tl.maximum(big, tl.abs(tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)))\n"
       "        acc = big * 0.0\n        for off")],
     "the kernels read x 3 times"),
    ("rmsnorm_fwd_looped", "rstd in its own kernel, then the normalising kernel (x read from HBM twice)",
     [("    _rmsnorm_fwd_looped_kernel[(min(programs, M),)](\n",
       "    _rmsnorm_fwd_looped_kernel[(min(programs, M),)](\n        x2, y, weight if weight is not None else x2, rstd,\n"
       "        M, N, x2.stride(0), y.stride(0), eps,\n        BLOCK_N=BLOCK_N, HAS_WEIGHT=weight is not None)\n"
       "    _rmsnorm_fwd_looped_kernel[(min(programs, M),)](\n")],
     "this exercise is one fused kernel"),
    ("rmsnorm_fwd", "y allocated without device= (in CPU memory while x is on the GPU)",
     [("    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n    rstd = torch.empty(M, dtype=torch.float32, "
       "device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n    _rmsnorm_fwd_kernel",
       "    y = torch.empty((M, N), dtype=x.dtype)\n    rstd = torch.empty(M, dtype=torch.float32, "
       "device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n    _rmsnorm_fwd_kernel")],
     "Allocate the outputs on x's device", "gpu"),
    ("rmsnorm_fwd", "y stored in float32, converted to x's dtype in the launcher (y's bytes moved again)",
     [("    y = torch.empty((M, N), dtype=x.dtype, device=x.device)\n    rstd = torch.empty(M, dtype=torch.float32, "
       "device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n    _rmsnorm_fwd_kernel[(M,)](\n"
       "        x2, y, weight if weight is not None else x2, rstd,\n        x2.stride(0), y.stride(0), N, eps,\n"
       "        BLOCK_N=BLOCK_N, HAS_WEIGHT=weight is not None,\n"
       "        num_warps=num_warps_for(BLOCK_N, x.element_size()))\n    return y.reshape(x.shape)",
       "    y = torch.empty((M, N), dtype=torch.float32, device=x.device)\n    rstd = torch.empty(M, dtype=torch.float32, "
       "device=x.device)\n    BLOCK_N = triton.next_power_of_2(N)\n    _rmsnorm_fwd_kernel[(M,)](\n"
       "        x2, y, weight if weight is not None else x2, rstd,\n        x2.stride(0), y.stride(0), N, eps,\n"
       "        BLOCK_N=BLOCK_N, HAS_WEIGHT=weight is not None,\n"
       "        num_warps=num_warps_for(BLOCK_N, x.element_size()))\n    return y.to(x.dtype).reshape(x.shape)")],
     "from memory no kernel was given"),
]
