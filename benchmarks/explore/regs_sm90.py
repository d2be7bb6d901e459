"""Registers per thread of the lessons' Triton kernels, compiled for an H100 (sm_90) on a machine without a GPU.

triton.compile runs the whole pipeline (TTIR -> PTX -> ptxas) without a device; cuobjdump, shipped with Triton,
reads the registers and stack (spill) bytes out of the cubin. Pointers are declared 16-byte aligned and strides
divisible by 16, as the JIT specialises them at run time: without that the loads are not vectorised and the
counts are not the GPU's. They matched the H100's `n_regs` wherever both were taken (explore_cluster.py stages
"lntile" and "lnregs"): exercise 1's tile at N = 16384 bf16 44, the looped kernel's one chunk of N = 32768 bf16 64,
of N = 16384 and 32768 fp32 50 and 58, with 32 warps.

Why it matters: a 32-warp program (1024 threads) shares an SM with a second one only at <= 32 registers per
thread (65536 per SM); see lesson 05, section 4, and explore_cluster.py stage "lnregs".

    python benchmarks/explore/regs_sm90.py      # a table for lesson 05's tile and looped kernels
"""
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import triton

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from compile_targets import compile_for, jit_kernels, resources  # noqa: E402


def config_functions(notebook):
    """The plain functions (num_warps_for, rows_per_program_for...) of the notebook cell that defines
    num_warps_for, with the H100's rules (the cell's per-GPU tables are looked up by the GPU's name: none here)."""
    nb = json.loads(Path(notebook).read_text())
    text = next("".join(c["source"]) for c in nb["cells"]
                if c["cell_type"] == "code" and "def num_warps_for" in "".join(c["source"]))
    scope = {"triton": triton, "helpers": SimpleNamespace(on_gpu=lambda: False, device_name=lambda: "")}
    exec(text, scope)
    return scope


def compile_sm90(fn, types, constexprs, **options):
    """Compile fn for sm_90 (tools/compile_targets.compile_for: pointers and strides declared 16-byte aligned)."""
    return compile_for(fn, types, constexprs, 90, **options)


def main():
    lesson = ROOT / "solutions" / "05_triton_layernorm.ipynb"
    ks, num_warps_for = jit_kernels(lesson), config_functions(lesson)["num_warps_for"]
    print(f"{'kernel':8} {'dtype':5} {'N':>6} {'block':>6} {'warps':>5} {'maxnreg':>7} {'regs':>4} {'stack':>5}")
    for dt in ("bf16", "fp16", "fp32"):
        io = {"X": f"*{dt}", "Y": f"*{dt}", "W": f"*{dt}", "B": f"*{dt}", "MEAN": "*fp32", "RSTD": "*fp32"}
        for n in (8192, 16384, 32768):
            warps = num_warps_for(n, int(dt[2:]) // 8)
            for cap in (None, 32):
                opts = {"num_warps": warps, **({"maxnreg": cap} if cap else {})}
                tile = compile_sm90(ks["_layernorm_fwd_kernel"],
                                    {**io, "M": "i32", "stride_x": "i32", "stride_y": "i32", "eps": "fp32"},
                                    {"N": n, "BLOCK_M": 1, "BLOCK_N": n, "HAS_WEIGHT": True, "HAS_BIAS": True}, **opts)
                looped = compile_sm90(ks["_layernorm_fwd_looped_kernel"],
                                      {**io, "stride_x": "i32", "stride_y": "i32", "eps": "fp32"},
                                      {"N": n, "BLOCK_N": n, "HAS_WEIGHT": True, "HAS_BIAS": True}, **opts)
                for name, k in (("tile", tile), ("looped", looped)):
                    print(f"{name:8} {dt:5} {n:6d} {n:6d} {warps:5d} {str(cap or '-'):>7} {resources(k)[0]:4d} {resources(k)[1]:5d}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
