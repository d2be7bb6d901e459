"""Registers per thread of the lessons' Triton kernels, compiled for an H100 (sm_90) on a machine without a GPU.

triton.compile runs the whole pipeline (TTIR -> PTX -> ptxas) without a device; cuobjdump, shipped with Triton,
reads the registers and stack (spill) bytes out of the cubin. Pointers are declared 16-byte aligned and strides
divisible by 16, as the JIT specialises them at run time: without that the loads are not vectorised and the
counts are not the GPU's. They matched the H100's `n_regs` wherever both were taken (explore_cluster.py stages
"lntile" and "lnregs"): exercise 1's tile at N = 16384 bf16 44, the looped kernel's one chunk of N = 32768 bf16 64,
of N = 16384 and 32768 fp32 50 and 58, with 32 warps.

Why it matters: a 32-warp program (1024 threads) shares an SM with a second one only at <= 32 registers per
thread (65536 per SM); see lesson 05, section 5, and explore_cluster.py stage "lnregs".

    python benchmarks/explore/regs_sm90.py      # a table for lesson 05's tile and looped kernels
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
H100 = GPUTarget("cuda", 90, 32)


def jit_kernels(notebook):
    """{name: JITFunction} of the @triton.jit cells of a notebook (a solution, or a variant that
    explore_cluster.py's load_variants wrote), compiled by Triton itself (never the interpreter, whatever
    TRITON_INTERPRET says: this script does not import helpers)."""
    nb = json.loads(Path(notebook).read_text())
    kernels = {}
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] != "code":
            continue
        for block in re.split(r"\n(?=@triton\.jit\n)", text):
            if not block.startswith("@triton.jit\n"):
                continue
            body = re.split(r"\n(?=\S)", block[len("@triton.jit\n"):])[0]       # the function, up to the next top-level line
            body = re.sub(r"(?m)^[ \t]*### (BEGIN|END) SOLUTION\n", "", body)
            name = re.match(r"def (\w+)", body).group(1)
            with tempfile.NamedTemporaryFile("w", suffix=f"_{name}.py", delete=False) as f:
                f.write("import triton\nimport triton.language as tl\n\n\n@triton.jit\n" + body + "\n")
            scope = {}
            exec(compile(Path(f.name).read_text(), f.name, "exec"), scope)   # a real file: @triton.jit reads the source
            kernels[name] = scope[name]
    return kernels


def config_functions(notebook):
    """The plain functions (num_warps_for, rows_per_program_for...) of the notebook cell that defines
    num_warps_for."""
    nb = json.loads(Path(notebook).read_text())
    text = next("".join(c["source"]) for c in nb["cells"]
                if c["cell_type"] == "code" and "def num_warps_for" in "".join(c["source"]))
    scope = {"triton": triton}
    exec(text, scope)
    return scope


def compile_sm90(fn, types, constexprs, **options):
    """Compile fn for sm_90: types maps runtime arguments to Triton types ("*bf16", "i32", "fp32"), constexprs
    the compile-time ones to values; options are launch options (num_warps, maxnreg...)."""
    signature = {**types, **{k: "constexpr" for k in constexprs}}
    attrs = {(fn.arg_names.index(k),): [["tt.divisibility", 16]] for k, t in types.items()
             if t.startswith("*") or k.startswith("stride")}
    return triton.compile(ASTSource(fn, signature, constexprs, attrs), target=H100, options=options)


def resources(kernel):
    """Registers per thread and stack bytes per thread (spills) of a compiled kernel."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        out = subprocess.run([str(BIN / "cuobjdump"), "--dump-resource-usage", f.name],
                             capture_output=True, text=True, check=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", out)
    return int(m.group(1)), int(m.group(2))


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
