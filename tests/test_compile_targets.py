"""The Triton lessons' kernels compile for the GPUs students have (Colab's T4, an A100), and fit them.

Runs without a GPU: tools/compile_targets.py records the solutions' launches in the interpreter and compiles each
one for sm_75 and sm_80 with Triton's own ptxas (see its docstring). Compiling needs a process where Triton is not
in interpreter mode, so these tests run it in subprocesses.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import compile_targets  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Triton installs on Linux only")


def _compiling_python(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


def test_every_kernel_the_solutions_launch_compiles_and_fits_on_a_t4_and_an_a100(tmp_path):
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, "tools/compile_targets.py", "--gpu", "T4", "--gpu", "A100",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert {r["gpu"] for r in rows} == {"T4", "A100"}
    assert all(r["ok"] for r in rows)
    # every kernel of the solutions but the find-the-bugs one was launched, in every dtype
    written = {name for lesson in compile_targets.LESSONS
               for name in compile_targets.kernel_sources(ROOT / "solutions" / f"{lesson}.ipynb")
               if "buggy" not in name}
    launched = {r["kernel"] for r in rows}
    assert launched == written, f"never launched: {sorted(written - launched)}"
    for dtype in ("*fp16", "*bf16", "*fp32"):
        assert launched == {r["kernel"] for r in rows if r["types"]["X"] == dtype}, dtype
    assert "T4 (sm_75): " in proc.stdout and "launches compile and fit" in proc.stdout


def test_a_kernel_the_gpu_cannot_compile_is_reported_as_failed(tmp_path):
    """A PTX instruction that Turing lacks (a packed bf16 conversion, sm_80+): T4 fails with ptxas's reason."""
    notebook = tmp_path / "asm.ipynb"
    src = ('@triton.jit\ndef _pack_kernel(X, Y, BLOCK: tl.constexpr):\n'
           '    offs = tl.arange(0, BLOCK)\n    x = tl.load(X + offs)\n'
           '    y = tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $1, $1;", "=r,f", [x], dtype=tl.int32,\n'
           '                                  is_pure=True, pack=1)\n'
           '    tl.store(Y + offs, y)\n')
    notebook.write_text(json.dumps({"cells": [{"cell_type": "code", "source": src, "metadata": {}}]}))
    launch = {"lesson": "test", "notebook": str(notebook), "kernel": "_pack_kernel",
              "types": {"X": "*fp32", "Y": "*i32"}, "constexprs": {"BLOCK": 128}, "options": {"num_warps": 4}}
    proc = _compiling_python(
        "import json, sys; sys.path.insert(0, 'tools'); import compile_targets as ct; "
        f"print(json.dumps(ct.compile_launches([{launch!r}], ['T4', 'A100'])))")
    assert proc.returncode == 0, proc.stderr[-3000:]
    t4, a100 = json.loads(proc.stdout.strip().splitlines()[-1])
    assert a100["ok"], a100
    assert not t4["ok"] and t4["problem"].startswith("does not compile") and "sm_80" in t4["problem"], t4


def test_fit_problem_applies_each_gpus_limits():
    fit = compile_targets.fit_problem
    assert fit("T4", 32, 64, 16384) is None                      # 1024 threads x 64 registers: exactly an SM
    assert "65536" in fit("T4", 32, 65, 0)                      # one more register per thread does not fit
    assert "shared memory" in fit("T4", 4, 32, 100_000)         # over Turing's 64 KB per block...
    assert fit("A100", 4, 32, 100_000) is None                   # ...within Ampere's 163 KB
    assert "1024" in fit("H100", 64, 16, 0)                      # 2048 threads: no block that large


def test_lesson_03_cuda_c_compiles_for_a_t4():
    """Lesson 03's hidden cases compile the CUDA C for sm_80 and sm_90; on Colab's T4, PyCUDA compiles it for
    sm_75. Every CUDA C source of the solution compiles there too."""
    from autograder.notebook import load
    from helpers.cudac import compile_check, has_nvcc

    if not has_nvcc():
        pytest.skip("needs nvcc (the CUDA toolkit)")
    ns, errors = load(ROOT / "solutions" / "03_pycuda_layernorm.ipynb")
    assert not errors, errors
    sources = {name: v for name, v in ns.items() if isinstance(v, str) and "__global__" in v}
    assert len(sources) >= 5, sorted(sources)
    for name, src in sources.items():
        assert compile_check(src, (), archs=("sm_75",)).startswith("compiles for sm_75"), name


@pytest.mark.gpu
def test_offline_compiles_match_what_the_jit_builds_on_this_gpu(tmp_path):
    """The offline compiles are the GPU's own: the same launches (specialisation included), the same registers
    and shared memory as the kernels Triton's JIT builds here when the sweep runs for real."""
    import torch

    from autograder.notebook import load

    capability = 10 * torch.cuda.get_device_capability()[0] + torch.cuda.get_device_capability()[1]
    gpu = next((name for name, (cap, _) in compile_targets.GPUS.items() if cap == capability), None)
    if gpu is None:
        pytest.skip(f"no entry for sm_{capability} in compile_targets.GPUS")
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, "tools/compile_targets.py", "--gpu", gpu, "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    offline = {}
    for r in json.loads(out.read_text()):
        key = (r["kernel"], json.dumps(r["types"], sort_keys=True), json.dumps(r["constexprs"], sort_keys=True),
               r["options"].get("num_warps", 4))
        offline[key] = (r["registers"], r["shared"])
    built = {}
    for lesson in compile_targets.LESSONS:
        ns, errors = load(ROOT / "solutions" / f"{lesson}.ipynb")
        assert not errors, errors
        if "measured" in ns:   # lesson 05: the offline launches are recorded in the interpreter, with the H100's
            ns["measured"] = lambda table: {}   # rules; a GPU with entries of its own (an H200) launches others
        compile_targets.run_sweep(ns, lesson, device="cuda")
        torch.cuda.synchronize()
        for fn in [v for v in ns.values() if type(v).__name__ == "JITFunction"]:
            for cache in fn.device_caches.values():
                for kernel in cache[0].values():       # Triton 3.6's JIT cache: specialisation -> CompiledKernel
                    kernel._init_handles()
                    types = {n: t for n, t in kernel.src.signature.items() if t != "constexpr"}
                    consts = {fn.arg_names[path[0]]: v for path, v in kernel.src.constants.items()}
                    key = (fn.fn.__name__, json.dumps(types, sort_keys=True), json.dumps(consts, sort_keys=True),
                           kernel.metadata.num_warps)
                    built[key] = (kernel.n_regs, kernel.metadata.shared)
    assert set(built) == set(offline), (sorted(set(built) - set(offline))[:3], sorted(set(offline) - set(built))[:3])
    differ = {k: (offline[k], built[k]) for k in built if offline[k] != built[k]}
    assert not differ, list(differ.items())[:5]
