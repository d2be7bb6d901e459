"""Lesson 05's tile kernel at short rows by rows per program and warps, on whatever GPU runs it, next to the
lesson's dispatcher: does the H100-measured table (one warp per KB of tile, `num_warps_for`) suit this GPU?

    python benchmarks/explore/tile_warps.py        # from the repository root, PYTHONPATH=.

On an NVIDIA H200 (2026-11-22, 0.5.11 kernels, % of the fp32 copy, best of two do_bench medians) it does not:
- N = 512 bf16: 4 rows with 2 warps 93.4, 2 rows with 2 warps 93.1, against the dispatcher's 83.7 (4 rows, 4 warps);
- N = 512 fp16: 4 rows with 2 warps 93.4, against 85.6;
- N = 1024 bf16: the tile with 2 rows and 4 warps 94.0, against the dispatcher's 84.1 (its looped kernel);
- N = 2048 bf16: 93.9 at best, against the dispatcher's 94.4: the table holds there.
The same day's `make bench` on the H200 has torch.compile at 95.3 / 94.3 at N = 512 / 1024 bf16 (README). On the
H200, at N = 512 the best tiles have half the warps that the H100 table gives, and at N = 1024 the tile (2 rows,
the table's 4 warps) beats the looped kernel that the table picks. Lesson 05's section 5 now autotunes the tile on
the student's GPU (`helpers.bench_layernorm.autotune_demo`). Since 0.5.14 the H200 has entries of its own in lesson 05's
launch helpers, chosen from the wider sweep of `ln_configs.py` (tiles and looped launches, every benchmark point).
"""
import torch, triton
import helpers  # noqa: F401
from helpers import bench
from autograder.notebook import load
ns, e = load("solutions/05_triton_layernorm.ipynb"); assert not e, e
K = ns["_layernorm_fwd_kernel"]
copy = bench.copy_gbs()
print(torch.cuda.get_device_name(), "copy fp32", round(copy))
TOTAL = 64 * 2**20
for N, dt in ((512, torch.bfloat16), (1024, torch.bfloat16), (512, torch.float16), (2048, torch.bfloat16)):
    M = TOTAL // N
    x = torch.randn(M, N, device="cuda", dtype=dt); w = torch.randn(N, device="cuda", dtype=dt); b = torch.randn(N, device="cuda", dtype=dt)
    y = torch.empty_like(x); mean = torch.empty(M, device="cuda"); rstd = torch.empty(M, device="cuda")
    nbytes = 2 * M * N * x.element_size() + 2 * N * w.element_size()
    out = []
    for r in (1, 2, 4, 8, 16):
        for wp in (1, 2, 4, 8, 16):
            fn = lambda r=r, wp=wp: K[(triton.cdiv(M, r),)](x, y, w, b, mean, rstd, M, N, x.stride(0), y.stride(0), 1e-5,
                                                           BLOCK_M=r, BLOCK_N=N, HAS_WEIGHT=True, HAS_BIAS=True, num_warps=wp)
            fn(); ms = min(bench.time_ms(fn), bench.time_ms(fn))
            out.append((f"r{r}w{wp}", round(100 * nbytes / ms / 1e6 / copy, 1)))
    out.sort(key=lambda t: -t[1])
    print(N, str(dt)[6:], "best:", out[:6], "default dispatcher:", round(100 * nbytes / min(bench.time_ms(lambda: ns["layernorm"](x, w, b)) for _ in range(2)) / 1e6 / copy, 1), flush=True)
