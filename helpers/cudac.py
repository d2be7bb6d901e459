"""CUDA C from Python for lesson 03: compile with nvcc, load with PyCUDA, launch on torch tensors.

- `compile_check(src, kernels)` runs `nvcc -cubin` for sm_80 and sm_90 (no GPU needed): a real check
  of syntax, types and cooperative-groups use, and that each kernel is exported under its name.
- `load_module(src)` compiles with `pycuda.compiler.SourceModule` in torch's own CUDA context (the
  device's primary context), so kernels read and write torch tensors directly.
- `CudaModule.get_function(name)` returns a `CudaKernel`: launch it as `k(*args, grid=.., block=..)`.
  Tensors are passed as device pointers, None as a null pointer; numbers must carry their C type
  (np.int32, np.float32): a Python int or float has none, and a wrong guess is a silent bug in C. Where nvcc
  is installed, a launch whose arguments do not match the kernel's parameters in number and kind (from its
  PTX) is refused, naming them.
- `dry_run()`: within it `load_module` only compiles, so that a launcher runs, and its launches can be
  recorded, without a GPU (the grader's "launcher" case).

nbgrader turns an answer region into `# YOUR CODE HERE` / `pass`; inside a CUDA string those lines
would not compile, so `c_source` turns them into a C comment first.
"""
from __future__ import annotations

import atexit
import contextlib
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
NVCC_ERRORS = ("--diag-error", "940")      # missing return statement at end of non-void function
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
    # "/tmp/x/kernel.cu(18): error: ..." and the preprocessor's "/tmp/x/kernel.cu:2:2: error: ..." say "line 18 of
    # the source: error: ..." (the line of the CUDA string, as the notebook cell numbers it); nvcc's closing "1 error
    # detected in the compilation of /tmp/..." says nothing more
    lines = [re.sub(r"^\S*?kernel\.cu(?:\((\d+)\)|:(\d+)(?::\d+)?):\s*", lambda m: f"line {m[1] or m[2]} of the source: ",
                    ln.strip()) for ln in log.splitlines()
             if (" error" in ln or "error:" in ln) and "detected in the compilation of" not in ln]
    return " | ".join(lines[:limit]) or log.strip()[-400:]


_CUBINS: dict[tuple[str, str], bytes] = {}


def nvcc_compile(src: str, arch: str = "sm_90", options: tuple[str, ...] = NVCC_OPTIONS, kind: str = "cubin") -> bytes:
    """Compile CUDA C with nvcc for `arch` to a cubin (kind="ptx": to PTX); raise CudaCompileError with nvcc's
    errors. A non-void function without a return is an error here (nvcc's warning #940: the value it returns is
    whatever a register held), once the source no longer holds the stub's TODO."""
    code = c_source(src)
    key = (hashlib.sha256(code.encode()).hexdigest() + " ".join(options), arch, kind)
    if key in _CUBINS:
        return _CUBINS[key]
    nvcc = nvcc_path()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found: install the CUDA toolkit or set CUDA_HOME")
    with tempfile.TemporaryDirectory() as tmp:
        cu, out = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, f"kernel.{kind}")
        with open(cu, "w") as f:
            f.write(code)
        errors = () if STUB_TODO in code else NVCC_ERRORS     # a stub handed out compiles (no return yet)
        proc = subprocess.run([nvcc, f"-{kind}", f"-arch={arch}", *options, *errors, "-o", out, cu],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise CudaCompileError(f"nvcc ({arch}) failed: {_first_errors(proc.stderr + proc.stdout)}")
        with open(out, "rb") as f:
            cubin = f.read()
    _CUBINS[key] = cubin
    return cubin


_PTX_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(([^)]*)\)")
_PTX_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)")
_C_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+'
                       r'(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)')


def kernel_params(src) -> dict[str, list[str]]:
    """Each exported kernel's parameters, as "pointer" (any 64-bit parameter), "int" (32-bit integer), "float"
    (32-bit float) or the PTX type of anything else (u8 for a bool, f64 for a double), from nvcc's PTX for sm_90."""
    ptx = nvcc_compile(src, "sm_90", kind="ptx").decode(errors="replace")
    kinds = {"u64": "pointer", "b64": "pointer", "s64": "pointer", "u32": "int", "s32": "int", "b32": "int",
             "f32": "float"}
    return {name: [kinds.get(t, t) for t in _PTX_PARAM.findall(params)] for name, params in _PTX_ENTRY.findall(ptx)}


def param_names(src: str, name: str) -> list[str]:
    """The parameter names of `extern "C" __global__ void name(...)` as written in src, or of the one kernel a
    macro defines under a macro parameter (`void NAME(...)`, all capitals); [] when neither is there."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/|\\\n", " ", src, flags=re.S)
    found = dict(_C_KERNEL.findall(code))
    params = found.get(name)
    if params is None:
        by_macro = [p for kernel, p in found.items() if kernel.isupper()]
        params = by_macro[0] if len(by_macro) == 1 else ""
    return [re.split(r"[\s*&]+", p.strip())[-1] for p in params.split(",") if p.strip()]


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
    return (summary + partial_warp_masks(src) + narrow_shuffles(src) + down_shuffles(src)
            + int_row_offsets(src))


def _blank_comments(src: str) -> str:
    """src with its C comments blanked out, newlines kept (the notes quote line numbers)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), src, flags=re.S)


_SYNC_MASK = re.compile(r"\b(__\w+_sync)\s*\(\s*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*,")
_BALLOT_MASK = re.compile(r"\b([A-Za-z_]\w*)\s*=\s*__ballot_sync\s*\(")
_SYNC_NAMED = re.compile(r"\b(__\w+_sync)\s*\(\s*([A-Za-z_]\w*)\s*,")


def partial_warp_masks(src: str) -> str:
    """A note (no points) for each warp intrinsic called with a mask that may leave out lanes: every lane that
    calls `__shfl_xor_sync(mask, ...)` must be in the mask, and a warp whose 32 lanes call it with 0x0000ffff is
    undefined behaviour that may still give the right numbers (no sanitizer sees it on an H100). A literal mask is
    counted; a mask computed by __ballot_sync (review 03d F4: `__ballot_sync(~0u, lane < C)` while every lane
    shuffles) is named with a question. '' when none."""
    code = _blank_comments(src)
    notes = []
    for m in _SYNC_MASK.finditer(code):
        mask = int(m.group(2), 0) & 0xFFFFFFFF
        if mask != 0xFFFFFFFF:
            line = code.count("\n", 0, m.start()) + 1
            notes.append(f"{m.group(1)}({m.group(2)}, ...) on line {line} names {bin(mask).count('1')} of 32 lanes")
    ballots = {m.group(1) for m in _BALLOT_MASK.finditer(code)}
    for m in _SYNC_NAMED.finditer(code):
        if m.group(2) in ballots:
            line = code.count("\n", 0, m.start()) + 1
            notes.append(f"{m.group(1)}({m.group(2)}, ...) on line {line} takes its mask from __ballot_sync: is "
                         f"every lane that reaches it in {m.group(2)}?")
    notes = list(dict.fromkeys(notes))   # two shuffles on one line: one note
    if not notes:
        return ""
    return ("; note (no points): " + "; ".join(notes[:3]) + ". Every lane that calls a warp intrinsic must be in its "
            "mask: when all 32 lanes of the warp call it, as in this lesson's kernels, a smaller mask is undefined "
            "behaviour that may give the right numbers on one GPU and wrong ones on the next: use 0xffffffff (or "
            "the tile's own warp.shfl_xor)")


_SHUFFLE = re.compile(r"\b(__shfl(?:_xor|_down|_up)?_sync)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


def narrow_shuffles(src: str) -> str:
    """A note (no points) for a shuffle given a literal width below 32 (its fourth argument): it shuffles within
    segments of that many lanes, and an offset of the width or more returns the lane's own value, so that a
    butterfly over the warp adds a lane to itself. '' when none."""
    code = _blank_comments(src)
    notes = []
    for m in _SHUFFLE.finditer(code):
        args = [a.strip() for a in re.sub(r"\([^()]*\)", "()", m.group(2)).split(",")]
        if len(args) == 4 and args[3].isdigit() and int(args[3]) < 32:
            notes.append(f"{m.group(1)}(..., {args[3]}) on line {code.count(chr(10), 0, m.start()) + 1}")
    if not notes:
        return ""
    return ("; note (no points): " + "; ".join(dict.fromkeys(notes)) + " shuffles within segments of fewer than 32 "
            "lanes: an offset of the width or more returns the lane's own value, so a butterfly over the warp merges "
            "a lane with itself. Leave the width out (32, the whole warp)")


_DOWN = re.compile(r"\b__shfl_down_sync\s*\(|\.shfl_down\s*\(")
_BROADCAST = re.compile(r"\b__shfl_sync\s*\(|\.shfl\s*\(")


def down_shuffles(src: str) -> str:
    """A note (no points) for a reduction by shfl_down without a broadcast after it: only lane 0 ends with the
    warp's total (lane i holds lanes i.. of it), which only running the kernel shows when every lane goes on to
    use the total, as this lesson's kernels do. '' when there is no shfl_down, or a __shfl_sync/shfl follows."""
    code = _blank_comments(src)
    downs = [m.start() for m in _DOWN.finditer(code)]
    if not downs or any(m.start() > downs[0] for m in _BROADCAST.finditer(code)):
        return ""
    lines = ", ".join(map(str, dict.fromkeys(code.count("\n", 0, i) + 1 for i in downs)))
    return (f"; note (no points): shfl_down on line{'s' * (len(downs) > 1)} {lines} and no broadcast after it: after a "
            "reduction by shfl_down only lane 0 holds the warp's total (lane i holds lanes i to 31). Where every lane "
            "uses the total, reduce with __shfl_xor_sync (every lane ends with it) or broadcast lane 0's value with "
            "__shfl_sync(0xffffffff, v, 0)")


_ROW_TIMES_C = re.compile(r"(\(\s*(?:size_t|long\s+long|int64_t|ptrdiff_t)\s*\)\s*)?\b(row\w*)\s*\*\s*(C|N)\b")


def int_row_offsets(src: str) -> str:
    """A note (no points) for `row * C` without a 64-bit cast: if row is an int, the product wraps past 2**31
    elements (rows far into a large tensor), which only a GPU with 18 GiB free shows. '' when none."""
    code = _blank_comments(src)
    lines = [code.count("\n", 0, m.start()) + 1 for m in _ROW_TIMES_C.finditer(code) if not m.group(1)]
    if not lines:
        return ""
    where = ", ".join(map(str, dict.fromkeys(lines)))
    return (f"; note (no points): row * C on line{'s' * (len(lines) > 1)} {where} without a cast: if row is an int, "
            "the product is an int and wraps past 2**31 elements; offset rows as (size_t)row * C")


def show_compile(src, kernels: tuple[str, ...]) -> str:
    """compile_check for a notebook cell, that says what went wrong instead of raising, so that the rest of the
    notebook still runs: nvcc's errors (check()'s compile case fails with them), or that nvcc is missing (check()
    skips the compile case then)."""
    if not has_nvcc():
        return "not compiled: nvcc (the CUDA toolkit) is not installed here, so check() reports this as skipped"
    try:
        return compile_check(src, kernels)
    except CudaCompileError as e:
        if STUB_TODO in src:
            return f"does not compile yet (it still holds // {STUB_TODO}): {e}"
        return f"does NOT compile: {e}"


_PTXAS_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")


def show_resources(src, arch: str = "sm_90") -> str:
    """What ptxas reports for each kernel of `src` (`nvcc -Xptxas -v`, no GPU needed): registers per thread, the
    stack frame and the spill stores, one line per kernel. Where a kernel spills, its registers did not hold it."""
    nvcc = nvcc_path()
    if nvcc is None:
        return "no ptxas report: nvcc (the CUDA toolkit) is not installed here"
    code = c_source(src)
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, "kernel.cu")
        with open(cu, "w") as f:
            f.write(code)
        proc = subprocess.run([nvcc, "-cubin", f"-arch={arch}", *NVCC_OPTIONS, "-Xptxas", "-v", "-o",
                               os.path.join(tmp, "kernel.cubin"), cu], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return f"no ptxas report: nvcc ({arch}) failed: {_first_errors(proc.stderr + proc.stdout)}"
    rows, name = {}, None
    for line in proc.stderr.splitlines():
        if m := _PTXAS_ENTRY.search(line):
            name = m.group(1)
            rows[name] = {}
        elif name and (m := _PTXAS_FRAME.search(line)):
            rows[name].update(frame=int(m.group(1)), spill=int(m.group(2)))
        elif name and (m := _PTXAS_REGS.search(line)):
            rows[name]["regs"] = int(m.group(1))
    return "\n".join(f"{k:28s} {v.get('regs', '?'):>3} registers, {v.get('frame', 0):4d} B stack frame, "
                     f"{v.get('spill', 0):4d} B spill stores" + ("  <- spills" if v.get("spill") else "")
                     for k, v in sorted(rows.items()))


def show_launches(launcher, *args, **kwargs) -> str:
    """A notebook cell's look at what `launcher(*args, **kwargs)` launches where its kernels cannot run (no GPU):
    they are compiled with nvcc, the launches checked against each kernel's parameters and recorded, not run."""
    if not has_nvcc():
        return "not launched: nvcc (the CUDA toolkit) is not installed here"
    try:
        with dry_run() as launches:
            launcher(*args, **kwargs)
    except CudaCompileError:
        return "not launched: the source does not compile (above)"
    except LookupError as e:     # a kernel that the source does not export (the stub's, or a misspelt name)
        return f"not launched: {e}"
    if not launches:
        return f"{getattr(launcher, '__name__', 'the launcher')} launched no kernel"
    shown = "; ".join(f"{name}<<<grid {grid}, block {block}>>>" for name, grid, block in launches[:4])
    return (f"launches {shown}{' ...' if len(launches) > 4 else ''}, with arguments of the kinds the kernel takes "
            f"(compiled, not run: {can_run() or 'a dry run'}; the numbers are checked where a GPU runs them, and "
            "check() reports those cases as skipped here)")


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

    def params(self) -> list[str] | None:
        """The kernel's parameter kinds (`kernel_params`), None when they cannot be had (no nvcc, no source)."""
        if not hasattr(self, "_params"):
            try:
                self._params = kernel_params(self.src).get(self.name) if self.src and has_nvcc() else None
            except (CudaCompileError, OSError, subprocess.SubprocessError):
                self._params = None
        return self._params

    def __call__(self, *args, grid, block, shared: int = 0):
        args, grid, block = self.checked(args, grid, block, pointers=not getattr(self.function, "dry", False))
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
        kinds = self.params()
        if kinds is not None:
            _check_params(self.name, kinds, args, param_names(self.src, self.name))
        limit = self.max_threads()
        if limit is not None and threads > limit:
            raise ValueError(f"{self.name}: block of {threads} threads, but this kernel takes at most {limit} (its "
                             "__launch_bounds__, or the registers it needs): launch the threads its configuration "
                             "gives")
        return [_arg(self.name, i, a) if pointers or not hasattr(a, "data_ptr") else a
                for i, a in enumerate(args)], grid, block


def _describe(a) -> str:
    if a is None:
        return "None (a null pointer)"
    if hasattr(a, "data_ptr"):
        return "a tensor"
    if isinstance(a, np.generic):
        return f"np.{a.dtype}({a!s})"
    return f"a Python {type(a).__name__} ({a!r})"


def _check_params(name: str, kinds: list[str], args, names: list[str]) -> None:
    """A launch whose arguments do not match the kernel's parameters in number and kind (pointer, int, float) is
    refused with both listed: PyCUDA would pass them anyway, and the kernel would read the wrong bytes."""
    names = names if len(names) == len(kinds) else [f"#{i}" for i in range(len(kinds))]
    if len(args) != len(kinds):
        signature = ", ".join(f"{n}: {k}" for n, k in zip(names, kinds))
        raise TypeError(f"{name} takes {len(kinds)} arguments ({signature}); the launch passes {len(args)}")
    for i, (kind, a) in enumerate(zip(kinds, args)):
        pointer = a is None or hasattr(a, "data_ptr")
        fits = {"pointer": pointer,
                "int": not pointer and not isinstance(a, (float, np.floating)),   # a Python int: _arg says more
                "float": not pointer and isinstance(a, (float, np.floating))}.get(kind, True)
        if not fits:
            fix = {"pointer": "pass the tensor itself (or None)", "int": "np.int32(...)",
                   "float": "np.float32(...)"}[kind]
            raise TypeError(f"{name}: argument {i} ({names[i]}) is {'an' if kind == 'int' else 'a'} {kind} in the "
                            f"kernel, but the launch passes {_describe(a)} there: {fix}. Are the arguments in the "
                            f"kernel's order ({', '.join(names)})?")


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


class _DryModule:
    """A module compiled by nvcc alone (no GPU, no PyCUDA): its kernels can be looked up and launched, which
    records the launch (name, grid, block) and runs nothing."""

    def __init__(self, cubin: bytes, launches: list):
        self.cubin, self.launches = cubin, launches

    def get_function(self, name: str):
        if not exported(self.cubin, name):
            raise LookupError(name)
        return _DryLaunch(name, self.launches)


class _DryLaunch:
    dry = True     # CudaKernel checks the arguments without turning tensors into device pointers

    def __init__(self, name: str, launches: list):
        self.name, self.launches = name, launches

    def __call__(self, *args, grid, block, shared: int = 0):
        self.launches.append((self.name, grid, block))


@contextlib.contextmanager
def dry_run():
    """Within: `load_module` compiles with nvcc for sm_90 and its kernels' launches are checked (CudaKernel.checked)
    and recorded, not run, on any machine with nvcc: a launcher can be called on CPU tensors where there is no GPU.
    Yields the list of (kernel name, grid, block) launched."""
    launches: list = []
    _STATE.setdefault("dry", []).append(launches)
    try:
        yield launches
    finally:
        _STATE["dry"].pop()


def load_module(src) -> CudaModule:
    """Compile `src` with pycuda.compiler.SourceModule for this GPU (cached per source text)."""
    code = c_source(src)
    if _STATE.get("dry"):
        return CudaModule(_DryModule(nvcc_compile(code, "sm_90"), _STATE["dry"][-1]), code)
    if code in _MODULES:
        return _MODULES[code]
    context()
    from pycuda.compiler import SourceModule

    try:
        mod = SourceModule(code, no_extern_c=True, options=[*NVCC_OPTIONS, *NVCC_ERRORS], arch=device_arch())
    except Exception as e:  # pycuda.driver.CompileError: keep nvcc's first errors
        raise CudaCompileError(_first_errors(str(e))) from None
    _MODULES[code] = CudaModule(mod, code)
    return _MODULES[code]


def aligned16(*tensors) -> bool:
    """True when every tensor given (None is skipped) starts on a 16-byte boundary (float4 loads)."""
    return all(t is None or t.data_ptr() % 16 == 0 for t in tensors)
