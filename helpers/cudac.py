"""CUDA C from Python for lesson 03: compile with nvcc, load with PyCUDA, launch on torch tensors.

- `compile_check(src, kernels)` runs `nvcc -cubin` for sm_80 and sm_90 (no GPU needed): a real check
  of syntax, types and cooperative-groups use, and that each kernel is exported under its name.
- `load_module(src)` compiles with `pycuda.compiler.SourceModule` in torch's own CUDA context (the
  device's primary context), so kernels read and write torch tensors directly.
- `CudaModule.get_function(name)` returns a `CudaKernel`: launch it as `k(*args, grid=.., block=..)`.
  Tensors are passed as device pointers, None as a null pointer; numbers must carry their C type
  (np.int32, np.float32): a Python int or float has none, and a wrong guess is a silent bug in C.

nbgrader turns an answer region into `# YOUR CODE HERE` / `pass`; inside a CUDA string those lines
would not compile, so `c_source` turns them into a C comment first.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

ARCHS = ("sm_80", "sm_90")
NVCC_OPTIONS = ("-O3", "-std=c++17")
STUB_TODO = "YOUR CODE HERE"   # autograder.runner.STUB_MARKER (helpers never imports autograder; a test keeps them equal)
_PY_STUB = re.compile(rf"^(\s*)(# {STUB_TODO}|pass)\s*$", re.M)


class CudaCompileError(RuntimeError):
    """nvcc rejected the source (message: the first errors, with line numbers of the string)."""


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    return None


def has_nvcc() -> bool:
    return nvcc_path() is not None


def has_pycuda() -> bool:
    return importlib.util.find_spec("pycuda") is not None


def can_run() -> str | None:
    """None when CUDA C kernels can run here, else the reason they cannot."""
    from .env import gpu_available

    if not gpu_available():
        return "needs a CUDA GPU"
    if not has_pycuda():
        return "needs PyCUDA (pip install pycuda, or the course's `gpu` extra)"
    if not has_nvcc():
        return "needs nvcc (the CUDA toolkit) to compile"
    return None


def c_source(src) -> str:
    """The CUDA source as nvcc should see it: nbgrader's Python stub lines become C comments."""
    if not isinstance(src, str):
        raise TypeError(f"CUDA source must be a string, got {type(src).__name__}")
    if not src.strip():
        raise ValueError("CUDA source is empty")
    return _PY_STUB.sub(lambda m: f"{m.group(1)}// {m.group(2)}", src)


def _first_errors(log: str, limit: int = 4) -> str:
    lines = [re.sub(r"^\S*?kernel\.cu\(", "line (", ln.strip()) for ln in log.splitlines()
             if " error" in ln or "error:" in ln]
    return " | ".join(lines[:limit]) or log.strip()[-400:]


_CUBINS: dict[tuple[str, str], bytes] = {}


def nvcc_compile(src: str, arch: str = "sm_90", options: tuple[str, ...] = NVCC_OPTIONS) -> bytes:
    """Compile CUDA C to a cubin for `arch` with nvcc; raise CudaCompileError with nvcc's errors."""
    code = c_source(src)
    key = (hashlib.sha256(code.encode()).hexdigest() + " ".join(options), arch)
    if key in _CUBINS:
        return _CUBINS[key]
    nvcc = nvcc_path()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found: install the CUDA toolkit or set CUDA_HOME")
    with tempfile.TemporaryDirectory() as tmp:
        cu, out = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, "kernel.cubin")
        with open(cu, "w") as f:
            f.write(code)
        proc = subprocess.run([nvcc, "-cubin", f"-arch={arch}", *options, "-o", out, cu],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise CudaCompileError(f"nvcc ({arch}) failed: {_first_errors(proc.stderr + proc.stdout)}")
        with open(out, "rb") as f:
            cubin = f.read()
    _CUBINS[key] = cubin
    return cubin


def exported(cubin: bytes, name: str) -> bool:
    """Whether a cubin defines a kernel under exactly this (unmangled, extern "C") name."""
    return b"\0" + name.encode() + b"\0" in cubin


def compile_check(src, kernels: tuple[str, ...], archs: tuple[str, ...] = ARCHS) -> str:
    """Compile for every arch and check that each kernel is exported; return a short summary."""
    for arch in archs:
        cubin = nvcc_compile(src, arch)
        missing = [k for k in kernels if not exported(cubin, k)]
        if missing:
            raise CudaCompileError(
                f"compiled for {arch}, but no kernel named {', '.join(missing)}: declare it "
                f'extern "C" __global__ with exactly that name (C++ would mangle it)')
    names = ", ".join(kernels) if len(kernels) <= 3 else f"all {len(kernels)} kernels"
    summary = f"compiles for {', '.join(archs)}; exports {names}"
    if STUB_TODO in src:
        summary += f"; it still holds // {STUB_TODO}: write the kernel there (and delete the comment once you have)"
    return summary


def show_compile(src, kernels: tuple[str, ...]) -> str:
    """compile_check for a notebook cell: where nvcc is missing, say so (check() skips the compile case then)
    instead of raising, so that the rest of the notebook still runs."""
    if not has_nvcc():
        return "not compiled: nvcc (the CUDA toolkit) is not installed here, so check() reports this as skipped"
    return compile_check(src, kernels)


# ----------------------------------------------------------------------------- running on the GPU
_STATE: dict = {}


def context():
    """Make torch's CUDA context (the device's primary context) PyCUDA's current one; once."""
    if "ctx" in _STATE:
        return _STATE["ctx"]
    reason = can_run()
    if reason:
        raise RuntimeError(f"CUDA C kernels cannot run here: {reason}")
    import torch
    import pycuda.driver as drv

    torch.cuda.init()
    dev = torch.cuda.current_device()
    torch.empty(1, device="cuda")  # make sure torch's primary context exists
    drv.init()
    ctx = drv.Device(dev).retain_primary_context()
    ctx.push()
    atexit.register(_pop, ctx)
    _STATE["ctx"] = ctx
    return ctx


def _pop(ctx) -> None:
    try:
        ctx.pop()
    except Exception:  # interpreter shutting down: nothing left to clean
        pass


def device_arch() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


class CudaKernel:
    """A compiled kernel; call it with device pointers (tensors), C-typed numbers, grid and block."""

    def __init__(self, function, name: str, src: str = ""):
        self.function = function
        self.name = name
        self.src = src     # the module's CUDA C (autograder.racecheck replays the launch from it)

    def __repr__(self) -> str:
        return f"CudaKernel({self.name!r})"

    def max_threads(self) -> int | None:
        """The most threads a block of this kernel may have (its __launch_bounds__ and registers); None if the
        function cannot say."""
        if not hasattr(self, "_max_threads"):
            try:
                import pycuda.driver as drv
                self._max_threads = int(self.function.get_attribute(drv.function_attribute.MAX_THREADS_PER_BLOCK))
            except Exception:   # a stand-in function (tests), or no driver
                self._max_threads = None
        return self._max_threads

    def __call__(self, *args, grid, block, shared: int = 0):
        args, grid, block = self.checked(args, grid, block)
        if 0 in grid:
            return None  # nothing to launch (no rows)
        self.function(*args, grid=grid, block=block, shared=int(shared))
        return None

    def checked(self, args, grid, block, pointers: bool = True) -> tuple[list, tuple, tuple]:
        """The launch's arguments as C values and its grid and block as 3-tuples, or a clear error for a launch the
        GPU would refuse (or misread). pointers=False leaves tensors as they are (a launch recorded, not made)."""
        grid, block = _dims(grid, "grid", (2**31 - 1, 65535, 65535)), _dims(block, "block", (1024, 1024, 64))
        threads = block[0] * block[1] * block[2]
        if threads > 1024:
            raise ValueError(f"{self.name}: block {block} has more than 1024 threads")
        if threads % 32:
            raise ValueError(f"{self.name}: block {block} has {threads} threads, not a multiple of 32: the last warp "
                             "would be partial, and cg::tiled_partition<32> and cg::reduce need whole warps (round "
                             "the thread count up to a multiple of 32 and guard the extra lanes)")
        limit = self.max_threads()
        if limit is not None and threads > limit:
            raise ValueError(f"{self.name}: block of {threads} threads, but this kernel takes at most {limit} (its "
                             "__launch_bounds__, or the registers it needs): launch the threads its configuration "
                             "gives")
        return [_arg(self.name, i, a) if pointers or not hasattr(a, "data_ptr") else a
                for i, a in enumerate(args)], grid, block


def _dims(d, what: str, limits) -> tuple[int, int, int]:
    if isinstance(d, (int, np.integer)):
        d = (d,)
    if not isinstance(d, (tuple, list)) or not 1 <= len(d) <= 3:
        raise TypeError(f"{what} must be an int or a tuple of 1-3 ints, got {d!r}")
    d = tuple(int(v) for v in d) + (1,) * (3 - len(d))
    for v, lim in zip(d, limits):
        if v < 0 or v > lim:
            raise ValueError(f"{what} {d} out of range (each dimension 0..{lim})")
    if what == "block" and 0 in d:
        raise ValueError(f"block {d} has no threads")
    return d


def _arg(name: str, i: int, a):
    import torch

    if isinstance(a, torch.Tensor):
        if not a.is_cuda:
            raise TypeError(f"{name}: argument {i} is a tensor on {a.device}; kernels read GPU memory: .cuda() it")
        return np.uintp(a.data_ptr())
    if a is None:
        return np.uintp(0)
    if isinstance(a, np.generic) and a.dtype.itemsize != 4:   # a bool_ or int64 passed for an int, say
        kind = "np.float32(eps)" if isinstance(a, np.floating) else "np.int32(C)"
        size = f"{a.dtype.itemsize} byte{'s' * (a.dtype.itemsize != 1)}"
        raise TypeError(f"{name}: argument {i} is a numpy {a.dtype} ({a!r}), {size}; the course's kernels "
                        f"take 4-byte int and float: {kind}")
    if isinstance(a, np.generic):
        return a
    raise TypeError(f"{name}: argument {i} is a Python {type(a).__name__} ({a!r}); give it its C type, "
                    "e.g. np.int32(C) for int, np.float32(eps) for float")


class CudaModule:
    def __init__(self, module, src: str):
        self.module = module
        self.src = src

    def get_function(self, name: str) -> CudaKernel:
        try:
            fn = self.module.get_function(name)
        except Exception as e:
            raise LookupError(f"no kernel named {name!r} in the module: declare it extern \"C\" __global__ "
                              f"({type(e).__name__})") from None
        return CudaKernel(fn, name, self.src)


_MODULES: dict[str, CudaModule] = {}


def load_module(src) -> CudaModule:
    """Compile `src` with pycuda.compiler.SourceModule for this GPU (cached per source text)."""
    code = c_source(src)
    if code in _MODULES:
        return _MODULES[code]
    context()
    from pycuda.compiler import SourceModule

    try:
        mod = SourceModule(code, no_extern_c=True, options=list(NVCC_OPTIONS), arch=device_arch())
    except Exception as e:  # pycuda.driver.CompileError: keep nvcc's first errors
        raise CudaCompileError(_first_errors(str(e))) from None
    _MODULES[code] = CudaModule(mod, code)
    return _MODULES[code]


def aligned16(*tensors) -> bool:
    """True when every tensor given (None is skipped) starts on a 16-byte boundary (float4 loads)."""
    return all(t is None or t.data_ptr() % 16 == 0 for t in tensors)
