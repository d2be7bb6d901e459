"""Deliberately wrong versions of the lesson 03 solution (CUDA C; see tests/mutants_04.py for the format).

Most are caught only by running the kernel (NEEDS = "cuda": `make test-gpu` runs them, through the
CLI so that a kernel fault stays in its own process); the ones marked "nvcc" fail to compile and are
caught on any machine with nvcc.
"""
LESSON = "03_pycuda_layernorm"
NEEDS = "cuda"

RMS_HEAD = ("extern \"C\" __global__ void rmsnorm_warp(float* __restrict__ y, float* __restrict__ rstd_out,\n"
            "                                        const float* __restrict__ x, const float* __restrict__ weight,\n"
            "                                        int M, int C, float eps) {\n"
            "    cg::thread_block block = cg::this_thread_block();\n"
            "    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);\n")
RMS_SQ = "sq += v * v; }\n    float rstd = rsqrtf(cg::reduce(warp, sq, cg::plus<float>()) / C + eps);"
RMS_LAUNCH = "    kernel = load_module(RMSNORM_WARP_SRC).get_function(\"rmsnorm_warp\")\n"
REGS_D = ("int c = 4 * (k * 32 + lane);\n#pragma unroll\n        for (int j = 0; j < 4; ++j) {\n"
          "            float d = c + j < C ? v[4 * k + j] - mean : 0.f;\n            sq += d * d;")
REGS_RSTD = "    }\n    float rstd = rsqrtf(cg::reduce(warp, sq, cg::plus<float>()) / C + eps);"
REGS_STATS = "        }\n    }\n    if (lane == 0) { mean_out[row] = mean; rstd_out[row] = rstd; }"
BLOCK_D = ("int c = 4 * (k * T + t);\n#pragma unroll\n        for (int j = 0; j < 4; ++j) {\n"
           "            float d = c + j < C ? v[4 * k + j] - mean : 0.f;")
FIRST_SYNC = "    block.sync();                                   // every partial written before anyone reads\n"
SECOND_SYNC = "    block.sync();                                   // every partial read before the next call overwrites\n"

REGS_LOADS = ("        int c = 4 * (k * 32 + lane);\n        if (VEC) {\n"
              "            float4 q = c < C ? __ldcs(reinterpret_cast<const float4*>(xr + c)) : make_float4(0.f, 0.f, 0.f, 0.f);\n"
              "            v[4 * k] = q.x; v[4 * k + 1] = q.y; v[4 * k + 2] = q.z; v[4 * k + 3] = q.w;\n"
              "        } else {\n#pragma unroll\n"
              "            for (int j = 0; j < 4; ++j) v[4 * k + j] = c + j < C ? __ldcs(xr + c + j) : 0.f;\n"
              "        }\n#pragma unroll\n        for (int j = 0; j < 4; ++j) sum += v[4 * k + j];\n")
REGS_VEC_WB = ("        int c = 4 * (k * 32 + lane);\n        if (VEC) {\n            if (c < C) {\n"
               "                float4 w = weight ? __ldg(reinterpret_cast<const float4*>(weight + c)) : make_float4(1.f, 1.f, 1.f, 1.f);\n"
               "                float4 b = bias ? __ldg(reinterpret_cast<const float4*>(bias + c)) : make_float4(0.f, 0.f, 0.f, 0.f);\n")

MUTANTS = [
    # --- rmsnorm_warp (v2)
    ("rmsnorm_warp", "eps outside the rsqrt", [(RMS_SQ, RMS_SQ.replace("/ C + eps)", "/ C) + eps"))], "constant factor"),
    ("rmsnorm_warp", "sum instead of mean", [(RMS_SQ, RMS_SQ.replace(" / C + eps", " + eps"))], "constant factor"),
    ("rmsnorm_warp", "wrong warp index (threads, not warps, per block)",
     [(RMS_HEAD + "    int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();",
       RMS_HEAD + "    int row = blockIdx.x * blockDim.x + warp.meta_group_rank();")], "never written"),
    ("rmsnorm_warp", "rstd never stored", [("    if (lane == 0) rstd_out[row] = rstd;\n", "")], "never written"),
    ("rmsnorm_warp", "grid of M // 8 blocks (drops the last rows)",
     [("kernel(y, rstd, x2, weight, np.int32(M), np.int32(C), np.float32(eps),\n           grid=(cdiv(M, WARPS_PER_BLOCK),)",
       "kernel(y, rstd, x2, weight, np.int32(M), np.int32(C), np.float32(eps),\n           grid=(max(1, M // WARPS_PER_BLOCK),)")],
     "never written"),
    ("rmsnorm_warp", "weight ignored", [("yr[i] = weight ? v * weight[i] : v;", "yr[i] = v;")], "elements off"),
    ("rmsnorm_warp", "calls F.rms_norm instead of the kernel",
     [(RMS_LAUNCH, "    y.view(M, C).copy_(torch.nn.functional.rms_norm(x2, (C,), weight, eps))\n"
                   "    rstd.copy_(torch.rsqrt(x2.pow(2).mean(-1) + eps))\n"
                   "    return y.view(x.shape), rstd.view(x.shape[:-1])\n" + RMS_LAUNCH)], "rms_norm"),
    ("rmsnorm_warp", "kernel not extern \"C\" (C++ mangles its name)",
     [("extern \"C\" __global__ void rmsnorm_warp(", "__global__ void rmsnorm_warp(")], "no kernel named", "nvcc"),
    # --- layernorm_regs (v3)
    ("layernorm_regs", "masked lanes in the variance",
     [(REGS_D, REGS_D.replace("float d = c + j < C ? v[4 * k + j] - mean : 0.f;", "float d = v[4 * k + j] - mean;"))],
     "rstd"),
    ("layernorm_regs", "one-pass variance E[x^2] - E[x]^2",
     [(REGS_D, REGS_D.replace("float d = c + j < C ? v[4 * k + j] - mean : 0.f;", "float d = v[4 * k + j];")),
      (REGS_RSTD, REGS_RSTD.replace("/ C + eps)", "/ C - mean * mean + eps)"))], "cancellation"),
    ("layernorm_regs", "eps outside the rsqrt", [(REGS_RSTD, REGS_RSTD.replace("/ C + eps)", "/ C) + eps"))],
     "constant factor"),
    ("layernorm_regs", "mean never stored",
     [(REGS_STATS, REGS_STATS.replace("mean_out[row] = mean; ", ""))], "never written"),
    ("layernorm_regs", "K too small: half the row never loaded",
     [("    while 128 * K < C:\n", "    while 256 * K < C:\n")], "never written"),
    ("layernorm_regs", "no tail check on the scalar store",
     [("                int i = c + j;\n                if (i < C) {\n                    float o = (v[4 * k + j] - mean) * rstd;\n"
       "                    if (weight) o *= weight[i];\n                    if (bias) o += bias[i];\n                    __stcs(yr + i, o);\n"
       "                }\n            }\n        }\n    }\n    if (lane == 0)",
       "                int i = c + j;\n                {\n                    float o = (v[4 * k + j] - mean) * rstd;\n"
       "                    __stcs(yr + i, o);\n"
       "                }\n            }\n        }\n    }\n    if (lane == 0)")], ""),
    ("layernorm_regs", "float4 path when only x is aligned",
     [("    vec = C % 4 == 0 and aligned16(x2, y, weight, bias)\n    name = ",
       "    vec = C % 4 == 0 and aligned16(x2)\n    name = ")], "misaligned address"),
    ("layernorm_regs", "float4 load of a float pointer (a type error)",
     [("int c = 4 * (k * 32 + lane);\n        if (VEC) {\n            float4 q = c < C ? __ldcs(reinterpret_cast<const float4*>(xr + c))",
       "int c = 4 * (k * 32 + lane);\n        if (VEC) {\n            float4 q = c < C ? __ldcs(xr + c)")], "nvcc", "nvcc"),
    # --- layernorm_block (v4)
    ("layernorm_block", "missing block.sync() between writing and reading the partials", [(FIRST_SYNC, "")], ""),
    # right numbers in 200 of 200 runs on an H100: only racecheck sees it
    ("layernorm_block", "missing the second block.sync() (the next call writes partials another warp still reads)",
     [(SECOND_SYNC, "")], "racecheck"),
    ("layernorm_block", "float4 path when x and y are aligned but weight and bias are not",
     [("    vec = C % 4 == 0 and aligned16(x2, y, weight, bias)\n    kernel = load_module(LAYERNORM_BLOCK_SRC)",
       "    vec = C % 4 == 0 and aligned16(x2, y)\n    kernel = load_module(LAYERNORM_BLOCK_SRC)")], "misaligned address"),
    ("layernorm_block", "wrong warp index for the partial (lane, not warp)",
     [("if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = v;",
       "if (warp.thread_rank() == 0) partial[warp.thread_rank()] = v;")], ""),
    ("layernorm_block", "masked lanes in the variance",
     [(BLOCK_D, BLOCK_D.replace("float d = c + j < C ? v[4 * k + j] - mean : 0.f;", "float d = v[4 * k + j] - mean;"))],
     "rstd"),
    ("layernorm_block", "sum instead of mean",
     [("float mean = block_sum(sum, block, warp, partial) / C;", "float mean = block_sum(sum, block, warp, partial);")],
     "mean"),
    ("layernorm_block", "eps outside the rsqrt",
     [("float rstd = rsqrtf(block_sum(sq, block, warp, partial) / C + eps);",
       "float rstd = rsqrtf(block_sum(sq, block, warp, partial) / C) + eps;")], "constant factor"),
    ("layernorm_block", "threads rounded down: the row's tail never loaded",
     [("threads = max(32, cdiv(cdiv(C, 4 * K), 32) * 32)", "threads = max(32, cdiv(C, 4 * K) // 32 * 32)")],
     "never written"),
    # --- layernorm_welford (v5)
    ("layernorm_welford", "Chan merge with equal weights", [("float wb = b.n / n;", "float wb = 0.5f;")], "mean"),
    ("layernorm_welford", "Chan merge without the between-set term",
     [("a.m2 + b.m2 + delta * delta * a.n * wb}", "a.m2 + b.m2}")], "elements off"),
    ("layernorm_welford", "shfl_down instead of shfl_xor (only lane 0 gets the total)",
     [("Stats o = {warp.shfl_xor(s.n, offset), warp.shfl_xor(s.mean, offset), warp.shfl_xor(s.m2, offset)};",
       "Stats o = {warp.shfl_down(s.n, offset), warp.shfl_down(s.mean, offset), warp.shfl_down(s.m2, offset)};")], ""),
    ("layernorm_welford", "missing block.sync() before reading the warps' statistics",
     [("    block.sync();\n    Stats w = ", "    Stats w = ")], ""),
    ("layernorm_welford", "unbiased variance (C - 1)",
     [("float rstd = rsqrtf(s.m2 / C + eps);", "float rstd = rsqrtf(s.m2 / (C - 1) + eps);")],
     "the unbiased variance, torch.var's default"),
    ("layernorm_welford", "scalar path drops the last element",
     [("for (int c = t; c < C; c += T) s = chan_merge(s, {1.f, __ldcg(xr + c), 0.f});",
       "for (int c = t; c < C - 1; c += T) s = chan_merge(s, {1.f, __ldcg(xr + c), 0.f});")], "mean"),
    # --- softmax_online (v6)
    ("softmax_online", "no max subtracted (naive exp)",
     [("        if (v > m) { l = l * expf(m - v) + 1.f; m = v; }\n        else if (v != -INFINITY) l += expf(v - m);",
       "        l += expf(v); m = 0.f;")], "NaN"),
    ("softmax_online", "merge without rescaling l", [("l = l * expf(m - mn) + l2 * expf(m2 - mn);", "l = l + l2;")],
     ""),
    ("softmax_online", "shfl_down instead of shfl_xor",
     [("float m2 = warp.shfl_xor(m, offset), l2 = warp.shfl_xor(l, offset);",
       "float m2 = warp.shfl_down(m, offset), l2 = warp.shfl_down(l, offset);")], ""),
    ("softmax_online", "no guard for two empty sets (exp(-inf - -inf) = NaN)",
     [("    if (mn == -INFINITY) return;                  // both empty (or all -inf): nothing to add\n", "")], "NaN"),
    ("softmax_online", "-inf element into an empty lane",
     [("else if (v != -INFINITY) l += expf(v - m);", "else l += expf(v - m);")], "NaN"),
    ("softmax_online", "grid of M // 8 blocks (drops the last rows)",
     [("kernel(y, x2, np.int32(M), np.int32(C), grid=(cdiv(M, WARPS_PER_BLOCK),)",
       "kernel(y, x2, np.int32(M), np.int32(C), grid=(max(1, M // WARPS_PER_BLOCK),)")], "never written"),
    # --- from review 03b: right numbers that a sanitizer, a case or a launch check must catch
    ("layernorm_regs", "float4 load without its c < C guard, the padded lanes masked only in the sum",
     [(REGS_LOADS, REGS_LOADS.replace("float4 q = c < C ? __ldcs(reinterpret_cast<const float4*>(xr + c)) : "
                                      "make_float4(0.f, 0.f, 0.f, 0.f);",
                                      "float4 q = __ldcs(reinterpret_cast<const float4*>(xr + c));")
                   .replace("sum += v[4 * k + j];", "sum += c + j < C ? v[4 * k + j] : 0.f;"))], "memcheck"),
    ("layernorm_regs", "float4 path: weight and bias loaded together, only when a weight is given",
     [(REGS_VEC_WB, REGS_VEC_WB.replace(
         "                float4 w = weight ? __ldg(reinterpret_cast<const float4*>(weight + c)) : make_float4(1.f, 1.f, 1.f, 1.f);\n"
         "                float4 b = bias ? __ldg(reinterpret_cast<const float4*>(bias + c)) : make_float4(0.f, 0.f, 0.f, 0.f);\n",
         "                float4 w = make_float4(1.f, 1.f, 1.f, 1.f), b = make_float4(0.f, 0.f, 0.f, 0.f);\n"
         "                if (weight) { w = __ldg(reinterpret_cast<const float4*>(weight + c)); "
         "b = __ldg(reinterpret_cast<const float4*>(bias + c)); }\n"))], "bias given without a weight"),
    ("softmax_online", "running max started at 0, not -inf",
     [("    float m = -INFINITY, l = 0.f;\n", "    float m = 0.f, l = 0.f;\n")], "start the running max m at -INFINITY"),
    ("layernorm_block", "1024 threads for every row (the K = 4 kernels allow 512)",
     [("           grid=(M,), block=(threads,))\n", "           grid=(M,), block=(1024,))\n")], "takes at most 512"),
    ("layernorm_block", "threads not rounded up to whole warps",
     [("    K, threads = block_config(C)\n", "    K, _ = block_config(C)\n    threads = cdiv(C, 4 * K)\n")],
     "not a multiple of 32"),
    ("rmsnorm_warp", "eps passed as np.float64",
     [("kernel(y, rstd, x2, weight, np.int32(M), np.int32(C), np.float32(eps),",
       "kernel(y, rstd, x2, weight, np.int32(M), np.int32(C), np.float64(eps),")], "8 bytes"),
    # --- from review 03c: passes over x (counted by Nsight Compute), persistent blocks, offsets, copies
    ("rmsnorm_warp", "int32 row offsets as in the seed: x[row * C + i] (wraps past 2**31 elements)",
     [('    for (int i = lane; i < C; i += 32) { float v = xr[i]; sq += v * v; }\n',
       '    for (int i = lane; i < C; i += 32) { float v = x[row * C + i]; sq += v * v; }\n'),
      ('        float v = xr[i] * rstd;\n        yr[i] = weight ? v * weight[i] : v;\n',
       '        float v = x[row * C + i] * rstd;\n        y[row * C + i] = weight ? v * weight[i] : v;\n')],
     'size_t', 'gpu'),
    ("rmsnorm_warp", "launcher copies x first: x2.clone() (an extra read and write of x)",
     [('    x2 = x.reshape(M, C).contiguous()\n    y = torch.empty_like(x2)\n    rstd = torch.empty(M, device=x.device, dtype=torch.float32)\n    ### BEGIN SOLUTION\n    kernel = load_module(RMSNORM_WARP_SRC)',
       '    x2 = x.reshape(M, C).contiguous()\n    y = torch.empty_like(x2)\n    rstd = torch.empty(M, device=x.device, dtype=torch.float32)\n    ### BEGIN SOLUTION\n    x2 = x2.clone()\n    kernel = load_module(RMSNORM_WARP_SRC)')],
     'read a copy of x'),
    ("rmsnorm_warp", "the kernel launched twice per call",
     [('    kernel(y, rstd, x2, weight, np.int32(M), np.int32(C), np.float32(eps),\n           grid=(cdiv(M, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,))\n',
       '    kernel(y, rstd, x2, weight, np.int32(M), np.int32(C), np.float32(eps),\n           grid=(cdiv(M, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,))\n    kernel(y, rstd, x2, weight, np.int32(M), np.int32(C), np.float32(eps),\n           grid=(cdiv(M, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,))\n')],
     "x's bytes"),
    ("layernorm_regs", "row kept in registers, but y's pass reads x again from global memory",
     [('                o.x = (v[4 * k] - mean) * rstd * w.x + b.x;\n                o.y = (v[4 * k + 1] - mean) * rstd * w.y + b.y;\n                o.z = (v[4 * k + 2] - mean) * rstd * w.z + b.z;\n                o.w = (v[4 * k + 3] - mean) * rstd * w.w + b.w;\n                __stcs(reinterpret_cast<float4*>(yr + c), o);\n            }\n        } else {\n#pragma unroll\n            for (int j = 0; j < 4; ++j) {\n                int i = c + j;\n                if (i < C) {\n                    float o = (v[4 * k + j] - mean) * rstd;\n                    if (weight) o *= weight[i];\n                    if (bias) o += bias[i];\n                    __stcs(yr + i, o);\n                }\n            }\n        }\n    }\n    if (lane == 0) { mean_out[row] = mean; rstd_out[row] = rstd; }',
       '                float4 q = *reinterpret_cast<const float4*>(xr + c);\n                o.x = (q.x - mean) * rstd * w.x + b.x;\n                o.y = (q.y - mean) * rstd * w.y + b.y;\n                o.z = (q.z - mean) * rstd * w.z + b.z;\n                o.w = (q.w - mean) * rstd * w.w + b.w;\n                __stcs(reinterpret_cast<float4*>(yr + c), o);\n            }\n        } else {\n#pragma unroll\n            for (int j = 0; j < 4; ++j) {\n                int i = c + j;\n                if (i < C) {\n                    float o = (xr[i] - mean) * rstd;\n                    if (weight) o *= weight[i];\n                    if (bias) o += bias[i];\n                    __stcs(yr + i, o);\n                }\n            }\n        }\n    }\n    if (lane == 0) { mean_out[row] = mean; rstd_out[row] = rstd; }')],
     "x's bytes"),
    ("layernorm_welford", "persistent blocks reuse the shared partials for the next row without a barrier",
     [('    int row = blockIdx.x;\n    const float* xr = x + (size_t)row * C;\n    float* yr = y + (size_t)row * C;\n    int t = block.thread_rank(), T = block.size();\n    // ### BEGIN SOLUTION\n    Stats s = {0.f, 0.f, 0.f};',
       '    int t = block.thread_rank(), T = block.size();\n    // ### BEGIN SOLUTION\n  for (int row = blockIdx.x; row < M; row += gridDim.x) {\n    const float* xr = x + (size_t)row * C;\n    float* yr = y + (size_t)row * C;\n    Stats s = {0.f, 0.f, 0.f};'),
      ('    if (t == 0) { mean_out[row] = mean; rstd_out[row] = rstd; }\n    // ### END SOLUTION\n}\n"""',
       '    if (t == 0) { mean_out[row] = mean; rstd_out[row] = rstd; }\n  }\n    // ### END SOLUTION\n}\n"""'),
      ('           grid=(M,), block=(welford_threads(C),))\n',
       '           grid=(min(M, 264),), block=(welford_threads(C),))\n')],
     'hazard'),
    ('layernorm_block', 'review 03d B21: __shared__ float partial[16] (sized for 512 threads: 640 and 1024 threads overflow it)',
     [('    __shared__ float partial[32];\n', '    __shared__ float partial[16];\n')],
     'outside shared memory'),
    ('layernorm_welford', 'review 03d W32: grid=(min(M, 65535),) with no loop over rows',
     [('grid=(M,), block=(welford_threads(C),))', 'grid=(min(M, 65535),), block=(welford_threads(C),))')],
     'missing from row 65535'),
    # Caught without a GPU (nvcc only): the compile case, or the launcher called with its kernels compiled, not run
    ("layernorm_block", "block_sum without its return (nvcc's warning #940 is an error here)",
     [("    return t;\n", "")], "missing return statement", "nvcc"),
    ("rmsnorm_warp", "launcher: Python ints and float for M, C, eps",
     [("    kernel(y, rstd, x2, weight, np.int32(M), np.int32(C), np.float32(eps),\n",
       "    kernel(y, rstd, x2, weight, M, C, eps,\n")], "give it its C type", "nvcc"),
    ("layernorm_regs", "launcher: eps and C swapped",
     [("    kernel = load_module(LAYERNORM_REGS_SRC).get_function(name)\n"
       "    kernel(y, mean, rstd, x2, weight, bias, np.int32(M), np.int32(C), np.float32(eps),\n",
       "    kernel = load_module(LAYERNORM_REGS_SRC).get_function(name)\n"
       "    kernel(y, mean, rstd, x2, weight, bias, np.int32(M), np.float32(eps), np.int32(C),\n")],
     "in the kernel's order", "nvcc"),
    ("layernorm_block", "launcher: bias left out of the launch",
     [("    kernel(y, mean, rstd, x2, weight, bias, np.int32(M), np.int32(C), np.float32(eps),\n"
       "           grid=(M,), block=(threads,))",
       "    kernel(y, mean, rstd, x2, weight, np.int32(M), np.int32(C), np.float32(eps),\n"
       "           grid=(M,), block=(threads,))")], "the launch passes 8", "nvcc"),
    ("layernorm_welford", "launcher: a kernel name that the source does not export",
     [('get_function("layernorm_welford")', 'get_function("layernorm_welford_kernel")')], "no kernel named",
     "nvcc"),
    ("softmax_online", "launcher: launches nothing",
     [("    kernel(y, x2, np.int32(M), np.int32(C), grid=(cdiv(M, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,))\n",
       "")], "no CUDA kernel was launched", "nvcc"),
]
