"""Will the lessons' Triton kernels run on the GPU a student has? Compile them for it, on a machine without one.

Students meet this course on Colab's free T4 (sm_75), on an A100 (sm_80), an L4 (sm_89) or an H100 (sm_90); our GPU
tests and benchmarks run on the H100 and H200 only. This tool takes every launch that the Triton lessons'
solutions make, for rows of 1 to 131072 elements in fp16, bf16 and fp32, with and without weight and bias, and:

1. records each launch (kernel, argument types, compile-time constants, num_warps) by running the launchers in
   Triton's interpreter with the kernels themselves replaced by a recorder, so nothing is computed;
2. compiles each distinct launch with `triton.compile` for each GPU (TTIR -> PTX -> ptxas, all on the CPU: Triton
   ships ptxas), in a fresh process where Triton compiles rather than interprets;
3. checks that the compiled kernel fits that GPU: its shared memory within what one block may use there, and its
   registers (cuobjdump, shipped with Triton) within the SM's 65536 for one block of num_warps warps. These are
   the checks the CUDA driver makes when it loads and launches the kernel.

    python tools/compile_targets.py                     # lessons 04 and 05, every GPU in GPUS
    python tools/compile_targets.py --lesson 05 --gpu T4

Exit status 1 if any launch fails to compile or does not fit, 2 with a Triton older than 3.3 (whose
`triton.compile` takes another kind of ASTSource). Tried with Triton 3.3.1, 3.4.0, 3.5.1, 3.6.0, 3.7.1 and 3.9.0:
every launch compiles and fits on all four GPUs. `tests/test_compile_targets.py` runs it in CI.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:   # helpers and autograder, when the course is not pip-installed
    sys.path.insert(0, str(ROOT))


def _gpu_compile():
    """autograder/gpu_compile.py (the launch recorder and the compile step, shared with the grader's "compiles for
    a GPU" case), loaded by its path: importing the autograder package would import helpers, which switches
    Triton to the interpreter, and the compile step must run where Triton compiles."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_gpu_compile", ROOT / "autograder" / "gpu_compile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_gc = _gpu_compile()
compile_for, jit_source, recording_launches = _gc.compile_for, _gc.jit_source, _gc.recording_launches

# name: (compute capability, shared memory one block may use in bytes, `sharedMemPerBlockOptin`)
GPUS = {
    "T4": (75, 65536),        # Turing, Colab's free GPU
    "A100": (80, 166912),     # Ampere
    "L4": (89, 101376),       # Ada
    "H100": (90, 232448),     # Hopper
}
REGISTERS_PER_SM = 65536      # the same on all of them; one block must fit
LESSONS = ("04_triton_rmsnorm", "05_triton_layernorm")
DISPATCHERS = ("rmsnorm", "layernorm")       # launchers that are not an exercise's entry point (lesson 04's)


# ---- step 2 (no interpreter): kernels from a notebook, compiled for a target ------------------------------------

def kernel_sources(notebook) -> dict[str, str]:
    """{name: source} of the @triton.jit functions of a notebook, decorator included, solution markers removed."""
    nb = json.loads(Path(notebook).read_text())
    sources = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        text = "".join(cell["source"])
        for block in re.split(r"\n(?=@triton\.jit\n)", text):
            if block.startswith("@triton.jit\n"):
                body = re.split(r"\n(?=\S)", block[len("@triton.jit\n"):])[0]   # the function, up to the next top-level line
                body = re.sub(r"(?m)^[ \t]*### (BEGIN|END) SOLUTION\n", "", body)
                sources[re.match(r"def (\w+)", body).group(1)] = "@triton.jit\n" + body
    return sources


def jit_kernels(notebook) -> dict:
    """{name: JITFunction} of the @triton.jit functions of a notebook (a solution, or a variant that
    benchmarks/explore writes), compiled by Triton itself, never the interpreter: call it in a process where
    TRITON_INTERPRET is unset and `helpers` was not imported. All of them share one module, so a kernel may
    call another."""
    blocks = kernel_sources(notebook).values()
    return jit_source("import triton\nimport triton.language as tl\n\n\n" + "\n\n\n".join(blocks) + "\n",
                      Path(notebook).stem)


def resources(kernel) -> tuple[int, int]:
    """Registers per thread and stack bytes per thread (spills) of a compiled kernel."""
    import triton

    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        out = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name],
                             capture_output=True, text=True, check=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", out)
    return int(m.group(1)), int(m.group(2))


def fit_problem(gpu: str, num_warps: int, registers: int, shared: int) -> str | None:
    """Why a block of this kernel cannot launch on `gpu`, or None. Registers are handed out per warp in
    units of 256, as the hardware does."""
    _, shared_limit = GPUS[gpu]
    if num_warps * 32 > 1024:
        return f"{num_warps} warps are {num_warps * 32} threads; a block has at most 1024"
    if shared > shared_limit:
        return f"needs {shared} bytes of shared memory; a block on a {gpu} may use {shared_limit}"
    per_warp = -(-registers * 32 // 256) * 256
    if per_warp * num_warps > REGISTERS_PER_SM:
        return (f"{registers} registers per thread x {num_warps * 32} threads need {per_warp * num_warps}; "
                f"an SM has {REGISTERS_PER_SM}")
    return None


def compile_launches(launches: list[dict], gpus) -> list[dict]:
    """Compile every distinct recorded launch for every GPU; one result row each."""
    kernels = {}
    for lesson in sorted({launch["lesson"] for launch in launches if "notebook" not in launch}):
        kernels[lesson] = jit_kernels(ROOT / "solutions" / f"{lesson}.ipynb")
    rows = []
    for launch in launches:
        if "notebook" in launch:       # a kernel from elsewhere (the tests' own)
            kernels.setdefault(launch["notebook"], jit_kernels(launch["notebook"]))
        fn = kernels[launch.get("notebook", launch["lesson"])][launch["kernel"]]
        for gpu in gpus:
            capability, _ = GPUS[gpu]
            row = {"gpu": gpu, **{k: launch.get(k) for k in ("lesson", "kernel", "types", "constexprs", "options")}}
            try:
                compiled = compile_for(fn, launch["types"], launch["constexprs"], capability, launch.get("aligned"),
                                       **launch["options"])
            except Exception as e:   # ptxas and Triton's own errors: the message says what the target lacks
                row.update(ok=False, problem="does not compile: " + " ".join(str(e).split())[-300:])
                rows.append(row)
                continue
            registers, stack = resources(compiled)
            warps = launch["options"].get("num_warps", 4)
            problem = fit_problem(gpu, warps, registers, compiled.metadata.shared)
            row.update(ok=problem is None, problem=problem, registers=registers, spill_bytes=stack,
                       shared=compiled.metadata.shared)
            rows.append(row)
    return rows


# ---- step 1 (interpreter): what the solutions launch ------------------------------------------------------------

def record_launches(lessons=LESSONS) -> list[dict]:
    """Run each exercise's launcher of the solutions on the sweep (run_sweep), recording each kernel launch
    instead of running it; the distinct launches."""
    os.environ["TRITON_INTERPRET"] = "1"   # interpreted kernels, on a GPU machine too (before helpers is imported)
    import helpers  # noqa: F401

    from autograder.notebook import load

    launches: list[dict] = []
    for lesson in lessons:
        ns, errors = load(ROOT / "solutions" / f"{lesson}.ipynb")
        if errors:
            raise RuntimeError(f"{lesson}: cells failed: {errors}")
        with recording_launches() as recorded:
            run_sweep(ns, lesson)
        launches += [{"lesson": lesson, **launch} for launch in recorded]
    return launches


def run_sweep(ns, lesson, device="cpu") -> None:
    """Call each exercise's launcher of a lesson (and its dispatcher) on the grader's sweep (rowcases.call_sweep:
    4 rows of 1 to 131072 elements in each dtype, with and without weight and bias)."""
    from autograder import for_lesson
    from autograder.rowcases import LAYERNORM, RMSNORM, call_sweep

    op = LAYERNORM if "layernorm" in lesson else RMSNORM
    entries = dict.fromkeys([ex.functions[0] for ex in for_lesson(lesson)] + [n for n in DISPATCHERS if n in ns])
    for entry in entries:
        call_sweep(ns[entry], op, device, bias_only=False)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lesson", action="append", choices=[s[:2] for s in LESSONS], help="04 or 05 (default: both)")
    p.add_argument("--gpu", action="append", choices=list(GPUS), help="default: all")
    p.add_argument("--compile", metavar="LAUNCHES_JSON", help=argparse.SUPPRESS)   # step 2, in a fresh process
    p.add_argument("--json", metavar="FILE", help="write every result row here")
    a = p.parse_args(argv)
    gpus = a.gpu or list(GPUS)
    if a.compile:
        rows = compile_launches(json.loads(Path(a.compile).read_text()), gpus)
        Path(a.json).write_text(json.dumps(rows))
        return 0
    # The record step interprets, on a GPU machine too: say so before anything imports helpers or triton.
    os.environ["TRITON_INTERPRET"] = "1"
    from helpers.env import installed_version, major_minor

    triton_version = installed_version("triton") or "none"
    if (major_minor(triton_version) or (0, 0)) < (3, 3):
        print(f"compile_targets needs Triton 3.3 or newer (triton.compile's ASTSource changed in 3.3); found "
              f"{triton_version}. The lessons themselves need 3.2.")
        return 2
    lessons = [s for s in LESSONS if not a.lesson or s[:2] in a.lesson]
    launches = record_launches(lessons)
    if not launches:   # e.g. helpers chose the GPU before TRITON_INTERPRET was set: the recorder saw nothing
        print("recorded no launches: the solutions' kernels did not run in the interpreter")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "launches.json", Path(tmp) / "rows.json"
        src.write_text(json.dumps(launches))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        args = [sys.executable, __file__, "--compile", str(src), "--json", str(out)] + [f"--gpu={g}" for g in gpus]
        proc = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            return 1
        rows = json.loads(out.read_text())
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    report(rows, len(launches))
    return 0 if all(r["ok"] for r in rows) else 1


def report(rows: list[dict], n_launches: int) -> None:
    for gpu in dict.fromkeys(r["gpu"] for r in rows):
        mine = [r for r in rows if r["gpu"] == gpu]
        bad = [r for r in mine if not r["ok"]]
        fitted = [r for r in mine if r["ok"]]
        print(f"{gpu} (sm_{GPUS[gpu][0]}): {len(fitted)}/{len(mine)} launches compile and fit"
              + (f"; most registers {max(r['registers'] for r in fitted)}, most shared memory "
                 f"{max(r['shared'] for r in fitted)} bytes, spilling in {sum(r['spill_bytes'] > 0 for r in fitted)}"
                 if fitted else ""))
        for r in bad:
            print(f"  FAILED {r['lesson']} {r['kernel']} {r['types']} {r['constexprs']} {r['options']}: {r['problem']}")
    print(f"({n_launches} distinct launches of the solutions, each compiled for {len(rows) // max(n_launches, 1)} GPUs)")


if __name__ == "__main__":
    sys.exit(main())
