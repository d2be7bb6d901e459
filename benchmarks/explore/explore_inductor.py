"""What does torch.compile generate for RMSNorm at N = 32K (where it beats a one-row kernel)?"""
import os, torch, triton, triton.language as tl
from triton.testing import do_bench
from torch._inductor.utils import run_and_get_code
from explore_rmsnorm import ref

@triton.jit
def _one_row_1d(X, Y, W, R, N, sx, sy, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(X + row * sx + cols, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(W + cols, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(Y + row * sy + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=m)
    tl.store(R + row, rstd)

eps = 1e-6
def composite(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)

total = 64 * 1024 * 1024
bench = lambda fn: do_bench(fn, warmup=10, rep=40, return_mode="median")
for dt in (torch.bfloat16, torch.float32):
    for N in (32768, 65536):
        M = total // N
        x = torch.randn(M, N, device="cuda", dtype=dt); w = torch.randn(N, device="cuda", dtype=dt)
        comp = torch.compile(composite, dynamic=False)
        _, codes = run_and_get_code(comp, x, w)
        if dt == torch.bfloat16 or N == 32768:
            src = codes[0]
            i = src.find("@triton.jit"); j = src.find("def call(")
            print("=" * 30, dt, N); print(src[max(0, i - 1600):j][:5000])
            k = src.find(".run(", j); print(src[k - 200:k + 300])
        nbytes = 2 * x.numel() * x.element_size() + N * w.element_size()
        y = torch.empty_like(x); r = torch.empty(M, device="cuda")
        res = [("compile", nbytes / bench(lambda: comp(x, w)) * 1e-6)]
        for nw in (8, 16, 32):
            for ns in (1, 2):
                _one_row_1d[(M,)](x, y, w, r, N, N, N, eps, BLOCK_N=N, num_warps=nw, num_stages=ns)
                assert (y[:8].double() - ref(x[:8], w, eps).double()).abs().max() < 0.05
                res.append((f"1d/w{nw}/s{ns}", nbytes / bench(lambda: _one_row_1d[(M,)](x, y, w, r, N, N, N, eps, BLOCK_N=N, num_warps=nw, num_stages=ns)) * 1e-6))
        print("RESULT", dt, N, " ".join(f"{n}:{g:.0f}" for n, g in res), flush=True)
