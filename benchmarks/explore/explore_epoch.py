"""Sixth exploration (H100): the split kernels of lessons 04 and 05 with epoch counters.

The lesson-05 split kernel of the last session counted arrivals and departures, and the row's last
program to leave reset both counters. explore_split.py's "epoch" variant (one counter, never reset,
the target passed from the host) looked 3-7 points faster in bf16, but its fp32 rows were void: the
script reused the epoch numbers after clearing the counters, so every program waited to the limit.
Now the kernels derive the target themselves ((before // SPLIT + 1) * SPLIT, workspace per SPLIT).
Measured here, from the solution notebooks themselves: correctness after repeated launches and
counter wrap-around, % of copy by chunk and warps, and what torch.compile generates for LayerNorm and
RMSNorm at N = 16K-32K bf16 (where it beats our kernels), written to $OUT/inductor_*.py.
Stage "tile": one row per program at N = 8K-32K by num_warps (inductor picked 32 warps and the
whole row as one block there), and inductor's trick of re-loading x for each reduction instead of
keeping it live in registers.
Stage "whole": the looped kernels of lessons 04/05 with one chunk per row (block_n = N), which makes
them that same reload shape, and the reload kernel with N known or not at compile time.
Stage "warps": the lesson-05 dispatcher's looped one-chunk launch for 2-32 KB rows and its tile launch
for short rows, by num_warps (and rows per program), to check the num_warps_for table.
Stage "looped": the lesson-05 looped kernels (Chan, 3-pass) and the lesson-04 looped kernel at
N = 16K-32K by chunk and warps, against the configurations inductor's autotuner picked (read from
its cache's .best_config files).
    python benchmarks/explore/explore_epoch.py [split|inductor|looped|tile|whole|warps|all]
"""
import json
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from autograder.notebook import load  # noqa: E402
from helpers import layernorm_ref, rmsnorm_ref  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp"))
LOG = open(OUT / "explore_epoch.jsonl", "a")
TOTAL = 64 * 1024 * 1024


def emit(**row):
    LOG.write(json.dumps(row) + "\n")
    LOG.flush()
    print(json.dumps(row), flush=True)


def bench_ms(fn):
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def inputs(M, N, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.randn(M, N, device="cuda", generator=g) + 0.5).to(dtype)
    w = (torch.randn(N, device="cuda", generator=g) * 0.5 + 1).to(dtype)
    b = (torch.randn(N, device="cuda", generator=g) * 0.5).to(dtype)
    return x, w, b


def err_of(op, out, x, w, b):
    if op == "rms":
        ref = rmsnorm_ref(x[:64], w, 1e-6)[0]
    else:
        ref = layernorm_ref(x[:64], w, b, 1e-5)[0]
    return (out[0][:64].double() - ref).abs().max().item()


def check_correctness(ns4, ns5):
    for op, ns, fn in (("rms", ns4, "rmsnorm_fwd_split"), ("ln", ns5, "layernorm_fwd_split")):
        for (M, N), dtype in (((512, 65536), torch.bfloat16), ((256, 65536), torch.float32),
                              ((64, 131072), torch.float32), ((300, 40001), torch.float16)):
            x, w, b = inputs(M, N, dtype)
            args = (x, w, 1e-6) if op == "rms" else (x, w, b, 1e-5)
            for wrap in (1 << 30, 3 * triton.cdiv(N, 8192)):      # the second wraps every third launch
                ns["COUNTER_WRAP"] = wrap
                errs = [err_of(op, ns[fn](*args), x, w, b) for _ in range(25)]
                torch.cuda.synchronize()
                split = triton.cdiv(N, min(8192, triton.next_power_of_2(N)))
                _, count = ns["helpers"].split_workspace(M, split, x.device)
                counts = count[:M].tolist()
                emit(check=op, M=M, N=N, dtype=str(dtype)[6:], wrap=wrap, max_err=max(errs),
                     counts_multiple=all(c % split == 0 for c in counts), max_count=max(counts))
            ns["COUNTER_WRAP"] = 1 << 30


def time_split(ns4, ns5, copy):
    warps_of = override_warps(ns4, ns5)
    for N in (65536, 131072, 32768, 16384):
        for dtype in (torch.bfloat16, torch.float32):
            x, w, b = inputs(TOTAL // N, N, dtype)
            nbytes = 2 * x.numel() * x.element_size() + N * w.element_size()
            for op, ns in (("rms", ns4), ("ln", ns5)):
                nbytes_op = nbytes + (N * b.element_size() if op == "ln" else 0)
                cfgs = [(8192, 8), (8192, 4), (16384, 8), (4096, 4)]
                for chunk, warps in cfgs:
                    if chunk >= N:
                        continue
                    warps_of["w"] = warps
                    if op == "rms":
                        fn = lambda: ns4["rmsnorm_fwd_split"](x, w, 1e-6, chunk=chunk)
                    else:
                        fn = lambda: ns5["layernorm_fwd_split"](x, w, b, 1e-5, chunk=chunk)
                    out = fn()
                    e = err_of(op, out, x, w, b)
                    ms = bench_ms(fn)
                    emit(op=op, impl=f"split/c{chunk}/w{warps}", dtype=str(dtype)[6:], N=N,
                         pct=round(100 * nbytes_op / ms * 1e-6 / copy, 1), err=e)
                warps_of["w"] = None
                base = (("looped", lambda: ns4["rmsnorm_fwd_looped"](x, w, 1e-6)),
                        ("one-row", lambda: ns4["rmsnorm_fwd"](x, w, 1e-6))) if op == "rms" else \
                       (("looped", lambda: ns5["layernorm_fwd_looped"](x, w, b, 1e-5)),
                        ("tile", lambda: ns5["layernorm_fwd"](x, w, b, 1e-5)))
                for name, fn in base:
                    if N > 65536 and name in ("one-row", "tile"):
                        continue
                    ms = bench_ms(fn)
                    emit(op=op, impl=name, dtype=str(dtype)[6:], N=N, pct=round(100 * nbytes_op / ms * 1e-6 / copy, 1))
            del x, w, b
            torch.cuda.empty_cache()


def inductor_sources(copy, write=True):
    from torch._inductor.utils import run_and_get_code
    import helpers.bench_layernorm as bl
    import helpers.bench_rmsnorm as br

    torch._dynamo.config.cache_size_limit = 64
    for op, comp in (("ln", bl.composite), ("rms", br.composite)):
        for N in (16384, 32768):
            for dtype in (torch.bfloat16, torch.float32):
                x, w, b = inputs(TOTAL // N, N, dtype)
                args = (x, w, b) if op == "ln" else (x, w)
                c = torch.compile(comp, dynamic=False)
                _, codes = run_and_get_code(c, *args)
                if write:
                    (OUT / f"inductor_{op}_{N}_{str(dtype)[6:]}.py").write_text(codes[0])
                ms = bench_ms(lambda: c(*args))
                nbytes = 2 * x.numel() * x.element_size() + N * w.element_size() * (2 if op == "ln" else 1)
                emit(op=op, impl="torch.compile", dtype=str(dtype)[6:], N=N, pct=round(100 * nbytes / ms * 1e-6 / copy, 1))
                del x, w, b


def override_warps(*namespaces):
    """Make the lessons' num_warps_for return warps_of["w"] while it is set; returns warps_of."""
    warps_of = {}
    for ns in namespaces:
        orig = ns["num_warps_for"]
        ns["num_warps_for"] = lambda block, elt, orig=orig: warps_of.get("w") or orig(block, elt)
    return warps_of


def measure_runs(runs, tag, x, w, b, copy):
    """Check and time (op, name, fn) runs on inputs x, w, b; emit % of copy, or the error, per run."""
    N, dtype = x.shape[1], str(x.dtype)[6:]
    nb = 2 * x.numel() * x.element_size() + N * w.element_size()
    for op, name, fn in runs:
        try:
            e = err_of(op, fn(), x, w, b)
            ms = bench_ms(fn)
            extra = N * b.element_size() if op == "ln" else 0
            emit(op=op, impl=f"{name}/{tag}", dtype=dtype, N=N, pct=round(100 * (nb + extra) / ms * 1e-6 / copy, 1),
                 err=e)
        except Exception as ex:  # keep exploring
            emit(op=op, impl=f"{name}/{tag}", N=N, error=repr(ex)[:300])


def time_looped(ns4, ns5, copy):
    warps_of = override_warps(ns4, ns5)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for N in (16384, 32768):
        for dtype in (torch.bfloat16, torch.float32):
            x, w, b = inputs(TOTAL // N, N, dtype)
            M = x.shape[0]
            for block in (1024, 2048, 4096, 8192):
                for warps in (2, 4, 8, 16):
                    if block // (32 * warps) < 4 or block // (32 * warps) > 64:
                        continue
                    warps_of["w"] = warps
                    runs = [("ln", "chan", lambda: ns5["layernorm_fwd_looped"](x, w, b, 1e-5, block_n=block)),
                            ("ln", "3pass", lambda: ns5["layernorm_fwd_fixed"](x, w, b, 1e-5, block_n=block)),
                            ("rms", "looped/p=M", lambda: ns4["rmsnorm_fwd_looped"](x, w, 1e-6, block_n=block,
                                                                                   num_programs=M)),
                            ("rms", "looped/p=4sm", lambda: ns4["rmsnorm_fwd_looped"](x, w, 1e-6, block_n=block,
                                                                                     num_programs=4 * sms))]
                    measure_runs(runs, f"b{block}/w{warps}", x, w, b, copy)
            warps_of["w"] = None
            del x, w, b
            torch.cuda.empty_cache()
    for f in Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "/nonexistent")).rglob("*.best_config"):
        emit(best_config=f.read_text()[:400], file=f.name)


@triton.jit
def _reload_rt_kernel(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, eps, N, BLOCK_N: tl.constexpr, RMS: tl.constexpr):
    # inductor's shape: one row per program, x loaded again for every use instead of kept live (N at run time)
    _reload_body(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, eps, N, BLOCK_N, RMS)


@triton.jit
def _reload_body(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, eps, N, BLOCK_N: tl.constexpr, RMS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if RMS:
        mean = 0.0
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    else:
        mean = tl.sum(x, axis=0) / N
        x2 = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        xc = tl.where(mask, x2 - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / N + eps)
    x3 = tl.load(X + row * stride_x + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    y = (x3 - mean) * rstd * tl.load(W + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if not RMS:
        y += tl.load(B + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


@triton.jit
def _reload_ct_kernel(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, eps, N: tl.constexpr, BLOCK_N: tl.constexpr,
                      RMS: tl.constexpr):
    _reload_body(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, eps, N, BLOCK_N, RMS)


def time_whole(ns4, ns5, copy):
    warps_of = override_warps(ns4, ns5)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for N in (16384, 32768, 8192):
        for dtype in (torch.bfloat16, torch.float32):
            x, w, b = inputs(TOTAL // N, N, dtype)
            M = x.shape[0]
            y, mean, rstd = torch.empty_like(x), torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
            for warps in (16, 32):
                warps_of["w"] = warps
                runs = [("ln", "chan-whole", lambda: ns5["layernorm_fwd_looped"](x, w, b, 1e-5, block_n=N)),
                        ("rms", "looped-whole/p=M", lambda: ns4["rmsnorm_fwd_looped"](x, w, 1e-6, block_n=N,
                                                                                     num_programs=M)),
                        ("rms", "looped-whole/p=4sm", lambda: ns4["rmsnorm_fwd_looped"](x, w, 1e-6, block_n=N,
                                                                                       num_programs=4 * sms))]
                for rms in (False, True):
                    for tag, kern in (("ct", _reload_ct_kernel), ("rt", _reload_rt_kernel)):
                        runs.append(("rms" if rms else "ln", f"reload-{tag}", lambda rms=rms, kern=kern: (
                            kern[(M,)](x, y, w, b, mean, rstd, N, N, 1e-6 if rms else 1e-5, N, BLOCK_N=N,
                                       RMS=rms, num_warps=warps), (y,))[1]))
                measure_runs(runs, f"w{warps}", x, w, b, copy)
            warps_of["w"] = None
            del x, w, b, y
            torch.cuda.empty_cache()


def time_tile(ns4, ns5, copy):
    warps_of = override_warps(ns4, ns5)
    for N in (16384, 32768, 8192):
        for dtype in (torch.bfloat16, torch.float32):
            x, w, b = inputs(TOTAL // N, N, dtype)
            M = x.shape[0]
            y, mean, rstd = torch.empty_like(x), torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
            for warps in (8, 16, 32):
                warps_of["w"] = warps
                runs = [("ln", "tile", lambda: ns5["layernorm_fwd"](x, w, b, 1e-5, rows_per_program=1)),
                        ("rms", "one-row", lambda: ns4["rmsnorm_fwd"](x, w, 1e-6))]
                for rms in (False, True):
                    for stages in (1, 3):
                        runs.append(("rms" if rms else "ln", f"reload/s{stages}", lambda rms=rms, stages=stages: (
                            _reload_ct_kernel[(M,)](x, y, w, b, mean, rstd, N, N, 1e-6 if rms else 1e-5, N=N, BLOCK_N=N,
                                                 RMS=rms, num_warps=warps, num_stages=stages), (y,))[1]))
                measure_runs(runs, f"w{warps}", x, w, b, copy)
            warps_of["w"] = None
            del x, w, b, y
            torch.cuda.empty_cache()


def time_warps(ns5, copy):
    warps_of = override_warps(ns5)
    for N in (512, 1024, 2048, 4096, 8192, 16384):
        for dtype in (torch.bfloat16, torch.float32):
            x, w, b = inputs(TOTAL // N, N, dtype)
            for warps in (4, 8, 16, 32):
                warps_of["w"] = warps
                runs = []
                if N * x.element_size() >= 2048:
                    runs.append(("ln", "one-chunk", lambda: ns5["layernorm_fwd_looped"](x, w, b, 1e-5, block_n=N)))
                else:
                    runs += [("ln", f"tile/m{m}", lambda m=m: ns5["layernorm_fwd"](x, w, b, 1e-5, rows_per_program=m))
                             for m in (4, 8, 16)]
                measure_runs(runs, f"w{warps}", x, w, b, copy)
            warps_of["w"] = None
            del x, w, b
            torch.cuda.empty_cache()


def main():
    src = torch.randn(TOTAL, device="cuda")
    dst = torch.empty_like(src)
    copy = 2 * src.numel() * 4 / bench_ms(lambda: dst.copy_(src)) * 1e-6
    emit(device=torch.cuda.get_device_name(), copy_gbs=round(copy, 1), triton=triton.__version__)
    del src, dst
    stage = sys.argv[1] if len(sys.argv) > 1 else "all"
    ns4, e4 = load(ROOT / "solutions" / "04_triton_rmsnorm.ipynb")
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e4 and not e5, (e4, e5)
    if stage in ("all", "split"):
        check_correctness(ns4, ns5)
        time_split(ns4, ns5, copy)
    if stage in ("all", "inductor", "looped"):
        inductor_sources(copy, write=stage != "looped")
    if stage in ("all", "looped"):
        time_looped(ns4, ns5, copy)
    if stage in ("all", "tile"):
        time_tile(ns4, ns5, copy)
    if stage in ("all", "whole"):
        time_whole(ns4, ns5, copy)
    if stage in ("all", "warps"):
        time_warps(ns5, copy)


if __name__ == "__main__":
    main()
