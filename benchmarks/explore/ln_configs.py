"""Lesson 05's dispatcher configurations on whatever GPU runs this: does one table suit more than one GPU?

For each benchmark point (N = 512 ... 65536 at M*N = 64 Mi elements, bf16 and fp32) it times every
configuration the dispatcher could pick for the kernel that serves that row length:
- the tile kernel (exercise 1) for rows up to 8 KB: rows per program 1-16 x warps 1-16 (tiles of at most 16384
  elements, beyond which the tile spills);
- the looped kernel (exercise 3) for rows from 2 KB: the row as 1, 2 or 4 chunks (chunks of at least 1024
  elements) x warps 1-32 (1-2 warps only for chunks of at most 4 KB);
and the dispatcher as it stands. Each time is the fastest of `helpers.bench.timing_passes` (the benchmark's rule; before 0.5.15, of two passes
with do_bench's timer); % is of the fp32
copy measured in the same run; inputs and bytes are the benchmark's (`helpers.bench_layernorm`). One JSON line per configuration goes to ln_configs_<device>.jsonl in $OUT (or the
current directory), written as it is measured, so a run stopped at its time limit keeps what it measured.

    [LN_DTYPES=float16,...] PYTHONPATH=. python benchmarks/explore/ln_configs.py [tile|looped|all] [N,N,...]

Results: benchmarks/explore/ln_configs_<device>.jsonl (H100 and H200, 2026-11-23, before the H200 had entries of its
own, so their "dispatcher" lines are the H100 rules' launches; the looped sweep then tried 4-32 warps, and the H200's
file then has a second run of N = 1024-4096 that adds 1-2 warps, and ends with two tile runs of 0.5.15 at
N = 512-1024 in fp16 and bf16, `LN_DTYPES=float16,bfloat16`). The entries chosen from them are lesson 05's
`ROWS_MEASURED` / `WARPS_MEASURED` (section 4). On the H100 its rules are within 0.7 of the best launch at every
point up to N = 32768 (1.2 at 65536 in bf16, where the dispatcher is the best launch timed a second time); on the
H200 they were 4-15 points off at N = 512, 1024, 4096 and 8192 in bf16 and 2048, 8192 and 16384 in fp32.

It replaces tile_warps.py (0.5.11), a sweep of the tile alone at N = 512-2048 whose one point not measured here was
N = 512 in fp16 on the H200: 4 rows with 2 warps 93.4 % against 85.6 for the H100's 4 rows with 4 warps, the same
choice as bf16's.
"""
import json
import os
import sys
import time

import torch
import triton

import helpers  # noqa: F401  (device set-up before the notebook's kernels are built)
from autograder.notebook import load
from helpers import bench
from helpers.bench_layernorm import make_inputs, n_bytes

TOTAL = 64 * 2**20
MAX_TILE = 16384
DTYPES = tuple(getattr(torch, d) for d in os.environ.get("LN_DTYPES", "bfloat16,float32").split(","))


def best_ms(fn):
    fn()
    return min(bench.timing_passes({"fn": fn})["fn"])


def main(part="all", Ns=(512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)):
    ns, errors = load("solutions/05_triton_layernorm.ipynb")
    assert not errors, errors
    tile, looped, dispatch = ns["_layernorm_fwd_kernel"], ns["_layernorm_fwd_looped_kernel"], ns["layernorm"]
    name = torch.cuda.get_device_name()
    copy = bench.copy_gbs()
    out_dir = os.environ.get("OUT", ".")
    path = os.path.join(out_dir, f"ln_configs_{bench.device_slug(name)}.jsonl")
    sink = open(path, "a")

    def emit(**row):
        row.update(device=name, copy_gbs=round(copy, 1))
        sink.write(json.dumps(row) + "\n")
        sink.flush()

    print(name, "copy fp32", round(copy), "GB/s", flush=True)
    t0 = time.time()
    for N in Ns:
        for dt in DTYPES:
            M = TOTAL // N
            x, w, b = make_inputs(M, N, dt)
            elt = x.element_size()
            y = torch.empty_like(x)
            mean = torch.empty(M, device="cuda")
            rstd = torch.empty(M, device="cuda")
            nbytes = n_bytes(M, N, (x, w, b))
            pct = lambda ms: round(100 * nbytes / ms / 1e6 / copy, 1)
            label = str(dt).removeprefix("torch.")
            res = []
            if part in ("tile", "all") and N * elt <= 8192:
                for r in (1, 2, 4, 8, 16):
                    if r * N > MAX_TILE:
                        continue
                    for wp in (1, 2, 4, 8, 16):
                        fn = lambda r=r, wp=wp: tile[(triton.cdiv(M, r),)](
                            x, y, w, b, mean, rstd, M, N, x.stride(0), y.stride(0), 1e-5,
                            BLOCK_M=r, BLOCK_N=N, HAS_WEIGHT=True, HAS_BIAS=True, num_warps=wp)
                        p = pct(best_ms(fn))
                        res.append((f"tile r{r} w{wp}", p))
                        emit(kernel="tile", N=N, dtype=label, rows=r, warps=wp, pct=p)
            if part in ("looped", "all") and N * elt >= 2048:
                for chunks in (1, 2, 4):
                    bn = N // chunks
                    if bn < 1024:
                        continue
                    for wp in (1, 2, 4, 8, 16, 32):
                        if wp < 4 and bn * elt > 4096:    # a 1-2 warp program for more than 4 KB: never best
                            continue
                        fn = lambda bn=bn, wp=wp: looped[(M,)](
                            x, y, w, b, mean, rstd, x.stride(0), y.stride(0), 1e-5, N=N,
                            BLOCK_N=bn, HAS_WEIGHT=True, HAS_BIAS=True, num_warps=wp)
                        p = pct(best_ms(fn))
                        res.append((f"looped c{chunks} w{wp}", p))
                        emit(kernel="looped", N=N, dtype=label, chunks=chunks, warps=wp, pct=p)
            p = pct(best_ms(lambda: dispatch(x, w, b)))
            emit(kernel="dispatcher", N=N, dtype=label, pct=p)
            res.sort(key=lambda t: -t[1])
            print(f"{N:6d} {label:9s} dispatcher {p:5.1f}  best {res[:4]}  ({time.time() - t0:.0f} s)", flush=True)
            del x, y, w, b
    print("wrote", path)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0] if args else "all", *([tuple(int(n) for n in args[1].split(","))] if len(args) > 1 else []))
