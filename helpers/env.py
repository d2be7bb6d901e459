"""Where the course runs: a CUDA GPU, or Triton's CPU interpreter.

Importing `helpers` calls `setup()` before any Triton kernel is defined: without a CUDA GPU it
sets TRITON_INTERPRET=1 (Triton then runs kernels on the CPU with NumPy) and says so once.
Warnings are printed to stdout, because nbgrader scores a graded cell with stderr output as zero.
"""
from __future__ import annotations

import os
import sys
import warnings

_state: dict = {"done": False}


def _print_warning(message, category, filename, lineno, file=None, line=None):
    print(f"[{category.__name__}] {message}", file=sys.stdout)


def gpu_available() -> bool:
    """True when torch sees a CUDA GPU (imports torch, never triton)."""
    import torch

    return torch.cuda.is_available()


def setup(quiet: bool = False) -> dict:
    """Choose the backend once per process; return {'mode', 'device', 'interpret'}.

    mode is 'gpu' (Triton compiles for the GPU) or 'interpreter' (Triton runs on the CPU).
    Setting TRITON_INTERPRET=1 yourself forces the interpreter even on a GPU machine.
    """
    if _state["done"]:
        return dict(_state["info"])
    warnings.showwarning = _print_warning
    forced = os.environ.get("TRITON_INTERPRET") == "1"
    gpu = gpu_available()
    interpret = forced or not gpu
    if interpret and not forced:
        if "triton" in sys.modules:
            print("Note: triton was imported before helpers. Kernels defined from now on run in the "
                  "interpreter; if a kernel fails to compile, restart the kernel and run `import helpers` first.")
        os.environ["TRITON_INTERPRET"] = "1"
    info = {
        "mode": "interpreter" if interpret else "gpu",
        "device": "cpu" if interpret else "cuda",
        "interpret": interpret,
    }
    if interpret and not quiet:
        reason = "TRITON_INTERPRET=1 is set" if forced else "no CUDA GPU found"
        print(f"[helpers] {reason}: Triton kernels run in Triton's CPU interpreter "
              "(exact numerics, no speed). Benchmarks show recorded GPU results.")
        _warn_numpy_for_interpreter()
    _state.update(done=True, info=info)
    return dict(info)


def _warn_numpy_for_interpreter() -> None:
    try:
        import numpy

        major, minor = (int(p) for p in numpy.__version__.split(".")[:2])
    except Exception:  # numpy missing or odd version string: the interpreter will say more
        return
    if (major, minor) >= (2, 4):
        print(f"[helpers] NumPy {numpy.__version__} breaks loops in Triton 3.x's interpreter "
              "(`for off in range(0, N, BLOCK)`); install the course's CPU pins: pip install 'numpy<2.4'")


def device() -> str:
    """'cuda' on a GPU, 'cpu' under the interpreter: where test tensors must live."""
    return setup(quiet=True)["device"]


def on_gpu() -> bool:
    return setup(quiet=True)["mode"] == "gpu"


def device_name() -> str:
    import torch

    if on_gpu():
        return torch.cuda.get_device_name()
    return "cpu (Triton interpreter)"
