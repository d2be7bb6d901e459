"""Where the course runs: a CUDA GPU, or Triton's CPU interpreter.

Importing `helpers` calls `setup()` before any Triton kernel is defined: without a CUDA GPU it
sets TRITON_INTERPRET=1 (Triton then runs kernels on the CPU with NumPy) and says so once.
Warnings are printed to stdout, because nbgrader scores a graded cell with stderr output as zero.
"""
from __future__ import annotations

import functools
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
    if interpret:
        interpreter_rounds_bf16_to_nearest()
        interpreter_indexes_with_any_numpy()
        interpreter_computes_bf16_in_fp32()
        interpreter_casts_bf16_through_fp32()
        interpreter_reduces_bf16_as_numbers()
        interpreter_takes_bool_arguments()
        interpreter_autotunes_without_timing()
        interpreter_patches_the_language_once_per_launch()
        interpreter_skips_unasserted_overflow_checks()
    if interpret and not quiet:
        reason = "TRITON_INTERPRET=1 is set" if forced else "no CUDA GPU found"
        print(f"[helpers] {reason}: Triton kernels run in Triton's CPU interpreter "
              "(no speed; fp32 math gives the GPU's numbers). Benchmarks show recorded GPU results.")
    if not quiet:
        for message in version_warnings():
            print(f"[helpers] {message}")
    _state.update(done=True, info=info)
    return dict(info)


def fp32_to_bf16_bits(a):
    """bfloat16 bits (uint16) of a float32 NumPy array, of its shape (0-d included), rounded to nearest, ties to
    even: what the GPU's cvt.rn.bf16.f32 gives. NaN stays NaN (quiet); a value past bf16's largest rounds to inf."""
    import numpy as np

    a = np.asarray(a, dtype=np.float32)
    u = np.ascontiguousarray(a).view(np.uint32).astype(np.uint64).reshape(a.shape)   # (ascontiguousarray: >= 1-D)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((u >> 16) | 0x0040).astype(np.uint16)
    return np.where(np.isnan(a), quiet_nan, rounded)


def interpreter_rounds_bf16_to_nearest() -> bool:
    """Make Triton's interpreter convert float32 to bfloat16 as the GPU does (round to nearest even).

    Its `_convert_float` truncates when no rounding mode is given (Triton 3.2-3.6 at least: `.to(tl.bfloat16)` and
    stores of float32 into bf16), so every bf16 output on the CPU was up to one bf16 ulp (2^-7) off before any
    error of the student's, a verdict that differed from the GPU's. Returns whether the patch is in place; a
    Triton without that function is left alone. (Arithmetic on bf16 values: interpreter_computes_bf16_in_fp32.)
    """
    def wrap(original):
        import triton.language as tl
        from triton.runtime import interpreter

        rtne = getattr(getattr(getattr(interpreter, "_ir", None), "ROUNDING_MODE", None), "RTNE", None)

        def convert(input, input_dtype, output_dtype, rounding_mode):
            if input_dtype == tl.float32 and output_dtype == tl.bfloat16 and rounding_mode in (None, rtne):
                return fp32_to_bf16_bits(input)
            return original(input, input_dtype, output_dtype, rounding_mode)
        return convert

    return _patch_interpreter("_convert_float", "rounds_bf16_to_nearest", wrap)


def interpreter_indexes_with_any_numpy() -> bool:
    """Let Triton's interpreter loop `for off in range(0, N, BLOCK)` with NumPy 2.4 or newer.

    A scalar in the interpreter is a one-element array, and Triton 3.2-3.6 make it an index with `int(array)`,
    which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"; older NumPy warns).
    Triton 3.7 fixed it upstream; here the index is read as the array's one element whatever the version. The
    patch wraps `_patch_lang_tensor`, which sets the attribute directly (3.2-3.5) or through a scope that undoes
    it after the launch (3.6 on). Returns whether it is in place; a Triton without that function is left alone.
    """
    def wrap(original):
        import numpy as np

        def index(self):
            return int(np.asarray(self.handle.data).reshape(-1)[0])

        def patch_lang_tensor(tensor, *scope):
            original(tensor, *scope)
            if scope and hasattr(scope[0], "set_attr"):
                scope[0].set_attr(tensor, "__index__", index)
            else:
                tensor.__index__ = index
        return patch_lang_tensor

    return _patch_interpreter("_patch_lang_tensor", "indexes_with_any_numpy", wrap)


def bf16_bits_to_fp32(bits):
    """float32 values of bfloat16 bits (uint16, as Triton's interpreter stores bf16): exact."""
    import numpy as np

    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def interpreter_computes_bf16_in_fp32() -> bool:
    """Make Triton's interpreter do arithmetic and comparisons on bf16 values as the GPU does: in fp32, each
    result rounded back to bf16 (to nearest even).

    The interpreter keeps bf16 values as their raw 16-bit patterns and ran `x * w` on two bf16 blocks as an integer
    product of the patterns: garbage (1e35 for values near 1) where a GPU gives the product within a bf16 rounding,
    so one kernel passed on a GPU and failed on a CPU with messages about unwritten outputs. Returns whether the
    patch is in place; a Triton without InterpreterBuilder.binary_op is left alone.
    """
    def wrap(original):
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        def binary_op(self, lhs, rhs, op):
            if lhs.dtype.scalar != tl.bfloat16 or rhs.dtype.scalar != tl.bfloat16:
                return original(self, lhs, rhs, op)
            out = op(bf16_bits_to_fp32(lhs.data), bf16_bits_to_fp32(rhs.data))
            if out.dtype == np.float32:    # arithmetic; a comparison's booleans stay as they are
                out = fp32_to_bf16_bits(out)
            return TensorHandle(out, tl.bfloat16)
        return binary_op

    return _patch_interpreter("binary_op", "bf16_in_fp32", wrap, owner="InterpreterBuilder")


def interpreter_casts_bf16_through_fp32() -> bool:
    """Make Triton's interpreter convert between bf16 and every type other than fp32 (fp64, fp16, integers) as a
    GPU does, through fp32. Triton 3.6 converts only bf16 <-> fp32 properly and casts the rest with NumPy's astype
    to the uint16 that holds bf16 bits: float64 statistics stored into a bf16 y became 0 or garbage (a correct
    kernel failed its bf16 cases on a CPU with "NaN: the rsqrt of a negative variance?") and passed on a GPU.
    (The create_fp_trunc / create_fp_ext / ... lambdas call self.cast_impl, so they take this one.)"""
    def wrap(original):
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        def cast_impl(self, src, dst_type):
            s, d = src.dtype.scalar, dst_type.scalar
            if (s == tl.bfloat16) == (d == tl.bfloat16) or tl.float32 in (s, d):
                return original(self, src, dst_type)
            if s == tl.bfloat16:     # bf16 -> fp32 -> d
                return original(self, TensorHandle(bf16_bits_to_fp32(src.data), tl.float32), dst_type)
            # s -> fp32 -> bf16, rounded to nearest even
            return TensorHandle(fp32_to_bf16_bits(np.asarray(src.data).astype(np.float32)), tl.bfloat16)
        return cast_impl

    return _patch_interpreter("cast_impl", "bf16_through_fp32", wrap, owner="InterpreterBuilder")


def interpreter_reduces_bf16_as_numbers() -> bool:
    """Make Triton's interpreter reduce bf16 blocks (tl.sum, tl.max, tl.min) as numbers, not as their bit patterns.

    Triton 3.6 keeps bf16 as uint16 bits and sums them as integers (a true sum of -0.9 came out 6422528), and takes a
    max or min of the patterns, which orders negative values backwards. A GPU sums bf16 in a tree whose every add
    rounds to bf16: done so here (pairwise, each partial sum rounded to bf16 to nearest even), so a kernel that sums
    in bf16 loses about as many digits as on a GPU, and max/min compare the values. Returns whether the patch is in
    place.
    """
    def rounded(a):
        return bf16_bits_to_fp32(fp32_to_bf16_bits(a))

    def tree_sum(values, axis):
        import numpy as np

        a = np.moveaxis(rounded(values), axis, -1)
        while a.shape[-1] > 1:
            if a.shape[-1] % 2:
                a = np.concatenate([a, np.zeros(a.shape[:-1] + (1,), np.float32)], axis=-1)
            a = rounded(a[..., 0::2] + a[..., 1::2])
        return a[..., 0] if a.shape[-1] else np.zeros(a.shape[:-1], np.float32)

    def wrap_sum(original):
        import numpy as np
        import triton.language as tl

        def bf16_sum(self, input):
            if input.dtype.scalar != tl.bfloat16:
                return original(self, input)
            data, axis = bf16_bits_to_fp32(input.handle.data), self.axis
            if axis is None:
                data, axis = data.reshape(-1), 0
            out = np.asarray(tree_sum(data, axis), np.float32)
            if self.keep_dims:
                out = np.expand_dims(out, axis) if self.axis is not None else out.reshape((1,) * input.handle.data.ndim)
            return self.to_tensor(fp32_to_bf16_bits(out), input.dtype)
        return bf16_sum

    def wrap_min_max(original):
        import numpy as np
        import triton.language as tl

        def bf16_min_max(self, input, val_reduce_op, idx_reduce_op=None):
            value = input[0] if isinstance(input, tuple) else input
            if value.dtype.scalar != tl.bfloat16:
                return original(self, input, val_reduce_op, idx_reduce_op)
            data = bf16_bits_to_fp32(value.handle.data)
            val = idx = None
            if val_reduce_op:
                picked = np.asarray(val_reduce_op(data, axis=self.axis, keepdims=self.keep_dims), np.float32)
                val = self.to_tensor(fp32_to_bf16_bits(picked), value.dtype)
            if idx_reduce_op:
                idx = self.to_tensor(idx_reduce_op(data, axis=self.axis, keepdims=self.keep_dims), tl.int32)
            return (val, idx) if val is not None and idx is not None else (val if val is not None else idx)
        return bf16_min_max

    return (_patch_interpreter("sum", "bf16_reduce_sum", wrap_sum, owner="ReduceOps")
            & _patch_interpreter("min_max", "bf16_reduce_min_max", wrap_min_max, owner="ReduceOps"))


def interpreter_takes_bool_arguments() -> bool:
    """Let Triton's interpreter take a Python bool as a runtime (not constexpr) kernel argument, as a GPU does.

    Triton 3.6's interpreter types True as int1 but stores it in a 32-bit array, and refuses the pair ("numpy data
    itemsize (32 bits) exceeds dtype primitive_bitwidth (1 bits)"), failing a correct kernel that takes a flag
    without tl.constexpr. Returns whether the patch is in place; a Triton without that function is left alone.
    """
    def wrap(original):
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        def implicit_cvt(arg):
            if isinstance(arg, bool):
                return tl.tensor(TensorHandle(np.array([arg], dtype=np.bool_), tl.int1), tl.int1)
            return original(arg)
        return implicit_cvt

    return _patch_interpreter("_implicit_cvt", "takes_bool_arguments", wrap)


def interpreter_autotunes_without_timing() -> bool:
    """Let a kernel under @triton.autotune run in the interpreter: Triton 3.6 times each config with the GPU
    driver's benchmarker there and raises "0 active drivers ([]). There should only be one.", so a kernel that
    lesson 05's section 4 invites to autotune fails every case on a CPU. Here no config is timed (all tie, so the
    first is kept) and the kernel runs once with it: the interpreter has no speed to tune. Returns whether the patch
    is in place."""
    return _patch_interpreter("_bench", "autotunes_without_timing", lambda original: untimed_autotune_bench,
                              owner="Autotuner", module="autotuner")


def interpreter_patches_the_language_once_per_launch() -> bool:
    """Skip the interpreter's second patching of triton.language inside a launch. Triton 3.6's interpreter patches
    `tl`, `tl.tensor` and `tl.math` (inspect.getmembers over each) when a launch starts, and again at every call
    of a @triton.jit helper from the kernel, although the launch's patch is still in place then: a helper called
    once per row (lesson 04's persistent kernel; tl.sum and tl.zeros are such helpers) spent a quarter of the
    interpreter's time there. A helper whose language modules were patched since the running launch started (by
    the launch, or by an earlier helper: Triton never undoes a helper's patch) now runs without that step; nothing
    else changes (patching again left every builtin as it found it: already wrapped). Only where `_patch_lang`
    returns a scope that the launch restores (Triton 3.6 on); older Tritons are left alone. Returns whether the
    patch is in place."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except Exception:
        return False
    if not hasattr(interpreter, "_LangPatchScope"):
        return False
    launches = []   # per running launch: the language modules patched since it started

    def modules(fn) -> frozenset:
        return frozenset(id(v) for v in getattr(fn, "__globals__", {}).values() if v is tl or v is tl.core)

    def wrap_launch(original):
        def launch(self, *args, **kwargs):
            launches.append(frozenset())
            try:
                return original(self, *args, **kwargs)
            finally:
                launches.pop()
        return launch

    def wrap_patch_lang(original):
        def patch_lang(fn):
            mine = modules(fn)
            if launches and mine and mine <= launches[-1]:
                return interpreter._LangPatchScope()   # an empty scope: nothing to restore
            scope = original(fn)
            if launches:   # patched now, until the launch ends (a helper's patch is never undone before that)
                launches[-1] |= mine
            return scope
        return patch_lang

    return (_patch_interpreter("__call__", "one_patch_per_launch", wrap_launch, owner="GridExecutor")
            & _patch_interpreter("_patch_lang", "one_patch_per_launch", wrap_patch_lang))


def interpreter_skips_unasserted_overflow_checks() -> bool:
    """Skip the integer overflow check that Triton 3.6's interpreter computes for every int32 add, sub and mul
    (both sides cast to int64, the operation again, two comparisons) and then drops: the interpreter's options have
    debug=False, and device_assert returns without looking at the result. It was a third of the time of a kernel
    that computes its offsets per row. Where debug is on, or outside the interpreter (the GPU compiler), the check
    runs as before. Returns whether the patch is in place."""
    try:
        from triton.runtime.interpreter import InterpreterBuilder
    except Exception:
        return False

    def wrap(original):
        def binary_op_sanitize_overflow_impl(self, *args, **kwargs):
            builder = getattr(self, "builder", None)
            if isinstance(builder, InterpreterBuilder) and not getattr(builder.options, "debug", True):
                return None
            return original(self, *args, **kwargs)
        return binary_op_sanitize_overflow_impl

    return _patch_interpreter("binary_op_sanitize_overflow_impl", "unasserted_overflow_checks", wrap,
                              owner="TritonSemantic", module="semantic", package="triton.language")


def untimed_autotune_bench(self, *args, config, **meta):
    """Autotuner._bench without timing: every config ties (the autotuner keeps the first), nothing runs. Where
    nothing can be timed: the interpreter, and the grader's recording of launches (autograder/gpu_compile.py)."""
    return [0.0, 0.0, 0.0]


def _patch_interpreter(name: str, tag: str, wrap, owner: str | None = None, module: str = "interpreter",
                       package: str = "triton.runtime") -> bool:
    """Replace `<package>.<module>.<name>` (or `<owner>.<name>`, a method of that module's class `owner`) with
    `wrap(original)`, once (the replacement carries `tag` and `.original`). False where Triton or that function is
    missing: such a Triton is left alone."""
    import importlib

    try:
        mod = importlib.import_module(f"{package}.{module}")
    except Exception:
        return False
    where = mod if owner is None else getattr(mod, owner, None)
    original = getattr(where, name, None)
    if original is None:
        return False
    if getattr(original, "course_patch", None) == tag:
        return True
    patched = wrap(original)
    patched.course_patch, patched.original = tag, original
    setattr(where, name, patched)
    return True


MIN_TRITON = (3, 2)   # Triton 3.0 and 3.1 fail the lessons in their interpreter (README, "Versions and GPUs")


def installed_version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def major_minor(version: str) -> tuple[int, int] | None:
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:  # an odd version string: say nothing rather than guess
        return None
    return major, minor


def version_warnings(triton: str | None = "installed") -> list[str]:
    """What the installed Triton will break, one message each (read from the package's metadata, so Triton is not
    imported). Pass a version string to ask about another; None means not installed. NumPy 2.4 and newer need no
    warning: `interpreter_indexes_with_any_numpy` lets the interpreter's loops take them."""
    triton = installed_version("triton") if triton == "installed" else triton
    out = []
    if triton is not None and (major_minor(triton) or MIN_TRITON) < MIN_TRITON:
        out.append(f"Triton {triton} is older than the course needs ({'.'.join(map(str, MIN_TRITON))} or newer: "
                   "the interpreter of 3.0 and 3.1 rejects tl.arange of a tl.constexpr, and 3.2 is the oldest "
                   "tested); upgrade with pip install 'triton>=3.2', or a torch that brings one (2.6 or newer)")
    return out


def device() -> str:
    """'cuda' on a GPU, 'cpu' under the interpreter: where test tensors must live."""
    return setup(quiet=True)["device"]


def on_gpu() -> bool:
    return setup(quiet=True)["mode"] == "gpu"


@functools.cache
def device_name() -> str:
    """The GPU's name, or the interpreter's. Cached: torch.cuda.get_device_name costs about 15 us a call (H100 host),
    and lesson 05's launch helpers ask for it at every launch."""
    import torch

    if on_gpu():
        return torch.cuda.get_device_name()
    return "cpu (Triton interpreter)"
