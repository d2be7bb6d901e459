"""Lesson 05's dispatcher at benchmark points, for Nsight Compute (ncu): what each launch moves through DRAM
(against the bytes the bench counts), its achieved occupancy, L2 hit rate and duration.

    ncu --clock-control none --kernel-name regex:_layernorm_fwd --metrics <list> \\
        python benchmarks/explore/ncu_layernorm.py 32768:bfloat16 8192:bfloat16 32768:bfloat16:2112 ...

Each point runs the dispatcher three times (the first compiles); the metrics of the last two launches are the
ones to read. A point is N:dtype (the bench's M = 64 Mi / N rows) or N:dtype:M. The script prints each point's M, N
and the compulsory bytes (x read, y written, weight and bias).

Runs #44-#45 on the H100 (ncu_layernorm_H100.txt): at 32K bf16 the launch reads 136 MB from DRAM for 134 MB of x
(the second read of each row comes from L2), runs 93 us against 87-88 us at 8K and 16K bf16 (the same bytes), and
its SMs are busy 94 % of the elapsed cycles (8K: 96 %) with 17K cycles (9 us) between the least and the most busy
SM (8K: 5K). Two 1024-thread programs share an SM (32 registers), so a program lasts about 12 us (93 us x 264
programs at a time / 2048), and the launch ends with a drain of most of that, at any row count: 1848, 2112, 4096
and 4224 rows have the same spread."""
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import helpers.bench as hb  # noqa: E402
import helpers.bench_layernorm as bench_ln  # noqa: E402
from autograder.notebook import load  # noqa: E402


def main(points):
    ns5, errors = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not errors, errors
    for point in points:
        n, dtype, *m = point.split(":")
        N, dtype = int(n), getattr(torch, dtype)
        M = int(m[0]) if m else hb.TOTAL_ELEMENTS // N
        x, w, b = bench_ln.make_inputs(M, N, dtype)
        print(f"point N={N} dtype={str(dtype)[6:]} M={M} bytes={bench_ln.n_bytes(M, N, (x, w, b))}", flush=True)
        for _ in range(3):
            ns5["layernorm"](x, w, b, bench_ln.EPS)
        torch.cuda.synchronize()
        del x, w, b
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:] or ["32768:bfloat16"])
