"""make bench: time the reference solutions of the GPU lessons (03 CUDA C, 04-05 Triton) and their peers.

The kernels come from solutions/*.ipynb (the one source), loaded without Jupyter. For each lesson,
merges its rows into benchmarks/results/<device>.json, writes <device>_<lesson>_<op>.png, prints a table; a full run
(no --n, no --dtype) adds a lesson's further measurements (lesson 05: autotuning its tile kernel, section 4).
    python -m benchmarks.run [--lesson 04] [--lesson 05] [--dtype bfloat16] [--n 4096]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _lesson_03(ns):
    import helpers.bench_cuda03 as mod
    return mod, {"v1 seed (3 passes)": ns["layernorm_v1"], "v2 RMSNorm warp": ns["rmsnorm_warp"],
                 "v3 warp, registers": ns["layernorm_regs"], "v4 block, registers": ns["layernorm_block"],
                 "v5 Welford, 2 reads": ns["layernorm_welford"], "v6 online softmax": ns["softmax_online"],
                 "best LayerNorm (v3/v4/v5)": ns["layernorm_best"]}


def _lesson_04(ns):
    import helpers.bench_rmsnorm as mod
    return mod, {"solution: rmsnorm (dispatch)": ns["rmsnorm"],
                 "solution: one row/program": ns["rmsnorm_fwd"],
                 "solution: persistent looped": ns["rmsnorm_fwd_looped"],
                 "solution: split rows (given)": ns["rmsnorm_fwd_split"]}


def _lesson_05(ns):
    import helpers.bench_layernorm as mod
    return mod, {"solution: layernorm (dispatch)": ns["layernorm"],
                 "solution: tile (ex. 1)": ns["layernorm_fwd"],
                 "solution: 3-pass looped (ex. 2)": ns["layernorm_fwd_fixed"],
                 "solution: Chan looped (ex. 3)": ns["layernorm_fwd_looped"],
                 "solution: split rows (given)": ns["layernorm_fwd_split"]}


LESSONS = {"03": ("03_pycuda_layernorm", _lesson_03), "04": ("04_triton_rmsnorm", _lesson_04),
           "05": ("05_triton_layernorm", _lesson_05)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run")
    p.add_argument("--lesson", action="append", choices=sorted(LESSONS), help="default: all")
    p.add_argument("--dtype", action="append", help="default: bfloat16, float16, float32")
    p.add_argument("--n", action="append", type=int, help="row lengths (default: 512 ... 65536)")
    a = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    if not torch.cuda.is_available():
        print("make bench needs a CUDA GPU; recorded results are in benchmarks/results/")
        return 1
    from autograder.notebook import load
    from helpers import bench

    status = 0
    for key in a.lesson or sorted(LESSONS):
        stem, pick = LESSONS[key]
        ns, errors = load(ROOT / "solutions" / f"{stem}.ipynb")
        if errors:
            print(f"{stem}: solution notebook failed to load:", errors)
            status = 1
            continue
        mod, impls = pick(ns)
        why_not = getattr(mod, "unavailable", lambda: None)()
        if why_not:  # e.g. lesson 03 without PyCUDA: say so, do not fail the other lessons
            print(f"{stem}: skipped here, {why_not}")
            continue
        kw = {"dtypes": tuple(a.dtype)} if a.dtype else {}  # each lesson's default dtypes otherwise
        res = mod.run(impls, plot=False, progress=sys.stderr.isatty(), Ns=tuple(a.n or bench.DEFAULT_NS), **kw)
        path = bench.save(res)
        png = path.with_name(f"{path.stem}_{stem[:2]}_{mod.OP}.png")
        bench.plot(res, path=png)
        bench.print_table(res)
        print("\nwrote", path.relative_to(ROOT), "and", png.relative_to(ROOT))
        status |= 1 if res["failures"] else 0
        if not (a.n or a.dtype):   # a lesson's further measurements (lesson 05: autotuning), in full runs only
            for extra in getattr(mod, "extra_runs", lambda ns, progress: [])(ns, sys.stderr.isatty()):
                print("\nwrote", bench.save(extra).relative_to(ROOT))
                status |= 1 if extra["failures"] else 0
    return status


if __name__ == "__main__":
    sys.exit(main())
