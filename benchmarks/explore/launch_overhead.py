"""How much of a benchmark point is the host's time to launch, not the GPU's?

`do_bench` times each call between two CUDA events, after flushing L2 with a 256 MB memset. When the host needs
longer to issue one call (validation, allocations, Triton's launch) than the GPU needs for the memset and the
previous call, the GPU waits between the events and the wait is timed. This prints, per point:
- host us per call: wall time of 200 calls on a 4-row input (GPU work negligible, so the host's own cost);
- `helpers.bench.time_ms`'s % of the fp32 copy for the dispatcher and for the same kernel launched directly (buffers allocated
  once), two passes each.

    PYTHONPATH=. python benchmarks/explore/launch_overhead.py

(At N = 512 the dispatcher launches the tile kernel, so there "looped, direct" is another kernel, not the same launch.)
H200, 2026-11-23, before lesson 05 had H200 entries: the host needs 62-77 us per call of `layernorm`, 56-78 of
`rmsnorm`, 46-60 of torch.compile's composite and 14-15 of `F.layer_norm`, while the GPU spends at least 130 us per
timed call (the flush, about 65 us, then the kernel, 65-130 us): the host keeps ahead, and its cost is not timed. In
that run the dispatcher at N = 2048 in bf16 measured 94.3 and 94.3, against 79.8 minutes earlier in the same lease
(ln_configs.py): the H200's disturbed points are not the host's doing on average. At moments they are: in one H200
process of 0.5.15 do_bench's protocol timed the dispatcher at N = 512 in bf16 at 54-55 % and the held timer at 94 %.
Since 0.5.15 `helpers.bench.time_ms` holds the GPU 300 us after each flush, so the timed columns here no longer
show a host that falls behind; the host column still tells how close it comes.
"""
import time

import torch
import triton

import helpers  # noqa: F401
from autograder.notebook import load
from helpers import bench
from helpers.bench_layernorm import make_inputs, n_bytes, peers

TOTAL = 64 * 2**20


def host_us(fn, calls=200):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def main():
    ns, errors = load("solutions/05_triton_layernorm.ipynb")
    assert not errors, errors
    ns4, errors = load("solutions/04_triton_rmsnorm.ipynb")
    assert not errors, errors
    looped, layernorm, rmsnorm = ns["_layernorm_fwd_looped_kernel"], ns["layernorm"], ns4["rmsnorm"]
    tc = peers()["torch.compile"]
    copy = bench.copy_gbs()
    print(torch.cuda.get_device_name(), "copy fp32", round(copy), "GB/s", flush=True)
    for N, dt in ((512, torch.bfloat16), (2048, torch.bfloat16), (2048, torch.float32), (8192, torch.bfloat16)):
        label = str(dt).removeprefix("torch.")
        small, ws, bs = make_inputs(4, N, dt)
        host = {"layernorm": host_us(lambda: layernorm(small, ws, bs)),
                "rmsnorm": host_us(lambda: rmsnorm(small, ws)),
                "torch.compile": host_us(lambda: tc(small, ws, bs)),
                "F.layer_norm": host_us(lambda: torch.nn.functional.layer_norm(small, (N,), ws, bs, 1e-5))}
        M = TOTAL // N
        x, w, b = make_inputs(M, N, dt)
        y, mean, rstd = torch.empty_like(x), torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
        nbytes = n_bytes(M, N, (x, w, b))
        pct = lambda ms: round(100 * nbytes / ms / 1e6 / copy, 1)
        block_n = triton.next_power_of_2(N)
        warps = ns["num_warps_for"](block_n, x.element_size())
        direct = lambda: looped[(M,)](x, y, w, b, mean, rstd, x.stride(0), y.stride(0), 1e-5, N=N, BLOCK_N=block_n,
                                      HAS_WEIGHT=True, HAS_BIAS=True, num_warps=warps)
        timed = {name: [pct(bench.time_ms(f)) for _ in range(bench.REPEATS)]
                 for name, f in (("dispatcher", lambda: layernorm(x, w, b)), ("looped, direct", direct),
                                 ("torch.compile", lambda: tc(x, w, b)))}
        gpu_us = nbytes / (copy * 1e3)   # the kernel's time at 100 % of copy, us
        print(f"{N:6d} {label:9s} host us/call " + ", ".join(f"{k} {v:.0f}" for k, v in host.items())
              + f" | kernel at copy speed {gpu_us:.0f} us | time_ms % " + ", ".join(f"{k} {v}" for k, v in timed.items()),
              flush=True)


if __name__ == "__main__":
    main()
