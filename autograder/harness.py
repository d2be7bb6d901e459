"""What surrounds one call of student code: honest outputs and proof that a kernel ran.

Inside `student_call()`:
- torch.empty / empty_like / new_empty return tensors filled with a marker NaN and surrounded by
  guard bands, so unwritten elements and out-of-bounds writes are both caught;
- every kernel launch is counted by name: Triton (compiled or interpreted) and CUDA C launched
  through helpers.cudac;
- calls of torch's own norm functions are recorded (a Triton exercise must not use them);
- in Triton's interpreter, a load whose unmasked lanes reach into the guard band of a watched input
  (`spy.watch`) or of an allocation is recorded: rows past M or columns past N read without their mask.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import math
import sys
import threading

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from helpers.compare import is_poison, poison_, poison_input_

GUARD = 1 << 16  # elements of guard band on each side of an allocation (>= the largest BLOCK)
# torch's own norms and softmax: a lesson's exercise that re-implements one must not call it.
FORBIDDEN = ("rms_norm", "layer_norm", "group_norm", "batch_norm", "instance_norm", "softmax")


def extent(t: torch.Tensor) -> int:
    """Elements from a view's first element to its last, gaps between rows included (0 if it is empty)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))


def tensor_of(a) -> torch.Tensor | None:
    """The tensor a kernel argument points into: a tensor itself, or the one a `triton.reinterpret(t, dtype)`
    wrapper (Triton's TensorWrapper: `.base` and a tl dtype) views; None for anything else."""
    if isinstance(a, torch.Tensor):
        return a
    base = getattr(a, "base", None)
    return base if type(a).__name__ == "TensorWrapper" and isinstance(base, torch.Tensor) else None


def read_out_of_bounds(what: str) -> str:
    """The message for a load outside its tensor; what: "a tl.load reached past the last element of x"."""
    return (f"read out of bounds: {what} (rows past M or columns past N loaded without their mask; the interpreter "
            "checks every load, a GPU reads whatever lies there or faults with an illegal address): mask every load "
            "as you mask the stores")


class OutOfBoundsStore(RuntimeError):
    """A store in Triton's interpreter that would write outside every tensor given to the launch."""


class Spy:
    def __init__(self):
        self.launches: dict[str, int] = {}
        self.grids: dict[str, list] = {}   # kernel name -> the grid of each launch, (x, y, z), None where unknown
        self.args: dict[str, list] = {}    # kernel name -> the integer and bool arguments of each launch, by name
        self.forbidden: list[str] = []
        self.torch_math: list[str] = []      # ATen math ops run on float tensors (student_call(torch_math=True))
        self.copied_out: list[str] = []      # float data taken out of torch: Tensor.numpy, tolist (same switch)
        self.buffers: list[tuple[torch.Tensor, int, int, tuple, torch.dtype]] = []
        self.watched: list[tuple[str, torch.Tensor]] = []   # inputs in guard bands (guarded_input): their names
        self.oob_reads: list[str] = []
        self.storages: list[tuple[int, int]] = []   # (address, bytes) of the tensors given to the running launch
        self.pointers: list[int] = []   # data_ptr() of every tensor given to every Triton launch
        self.counted: list[list] = []   # [first byte, end byte, element loads so far] of each tensor count_loads names
        self.tuning = 0                 # > 0 while triton.autotune times its configs: those launches are not the call's
        self.count_launched = False     # count_loads on every tensor given to a launch (the outputs, scratch)

    def watch(self, name: str, t: torch.Tensor | None) -> None:
        """Report loads in the guard bands around t's elements (t made by guarded_input: its storage is the band)."""
        if t is not None and t.numel():
            self.watched.append((name, t))

    def count_loads(self, t: torch.Tensor) -> None:
        """Count the interpreted tl.load lanes that read t's elements (see loads_of)."""
        start = t.data_ptr()
        self.counted.append([start, start + t.element_size() * extent(t), 0])

    def loads_of(self, t: torch.Tensor) -> int:
        """How many element loads of t the kernels made since count_loads(t) (a masked-off lane reads nothing)."""
        return sum(c[2] for c in self.counted if c[0] == t.data_ptr())

    def _bands(self) -> list:
        """(name, (low, high), (low, high)): the byte ranges before and after the elements of each watched tensor
        and allocation; rebuilt only when one was added."""
        key = (len(self.watched), len(self.buffers))
        if getattr(self, "_bands_key", None) != key:
            bands = []
            for name, t in self.watched:
                start = t.data_ptr()
                end = start + t.element_size() * extent(t)
                base = t.untyped_storage().data_ptr()
                bands.append((name, (base, start), (end, base + t.untyped_storage().nbytes())))
            for buf, start, n, shape, dtype in self.buffers:
                base, size = buf.data_ptr(), buf.element_size()
                bands.append((f"the {tuple(shape)} buffer your code allocated",
                              (base, base + start * size), (base + (start + n) * size, base + buf.numel() * size)))
            self._bands_key, self._bands_list = key, bands
        return self._bands_list

    def check_load(self, addresses) -> None:
        """addresses: the byte addresses one load reads (its unmasked lanes). Records the first read of a band,
        and counts the loads of the tensors count_loads named."""
        for c in self.counted:
            c[2] += int(((addresses >= c[0]) & (addresses < c[1])).sum())
        if self.oob_reads or addresses.size == 0:
            return
        lo, hi = int(addresses.min()), int(addresses.max())
        for name, (b0, b1), (a0, a1) in self._bands():
            if hi < b0 or lo >= a1 or (lo >= b1 and hi < a0):   # all inside the elements, or elsewhere
                continue
            if ((addresses >= b0) & (addresses < b1)).any():
                where = "before the first element"
            elif ((addresses >= a0) & (addresses < a1)).any():
                where = "past the last element"
            else:
                continue
            self.oob_reads.append(read_out_of_bounds(f"a tl.load reached {where} of {name}"))
            return

    def check_store(self, addresses, size: int) -> None:
        """addresses: the byte addresses one interpreted store writes. Raises before a write outside every tensor
        that the launch was given (a write into a guard band is allowed: oob_report tells it afterwards)."""
        if addresses.size == 0 or not self.storages:
            return
        outside = None
        for base, nbytes in self.storages:
            inside = (addresses >= base) & (addresses + size <= base + nbytes)
            outside = ~inside if outside is None else outside & ~inside
        if outside.any():
            raise OutOfBoundsStore(
                f"a tl.store would write {int(outside.sum())} element(s) outside every tensor given to the kernel "
                "(a missing mask, or a wrong stride or offset?). Not written: in the interpreter such a store "
                "overwrites other memory, and can crash Python")

    def oob_report(self) -> str | None:
        for buf, start, n, shape, dtype in self.buffers:
            before = int((~is_poison(buf[:start])).sum())
            after = int((~is_poison(buf[start + n:])).sum())
            if before or after:
                count = after or before
                where = "past the end" if after else "before the start"
                return (f"wrote out of bounds: {count} element{'s' * (count != 1)} {where} of a {tuple(shape)} "
                        f"{str(dtype).replace('torch.', '')} buffer your code allocated (a missing or wrong mask, "
                        "or a wrong row stride?)")
        return None


def _lanes(mask):
    """The boolean lanes of an interpreted load's or store's mask: a TensorHandle (pointer tensors), or a bare
    NumPy array (block pointers and tensor descriptors: materialize_pointers returns one, whose .data is a
    memoryview)."""
    import numpy as np
    return np.asarray(mask if isinstance(mask, np.ndarray) else mask.data).astype(bool)


def _size(args) -> tuple | None:
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        args = tuple(args[0])
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return tuple(args)
    return None


def _grid3(grid, names=(), args=(), kwargs=None) -> tuple | None:
    """A launch grid as (x, y, z); a grid given as a function of the meta-parameters is called on the launch's
    arguments by name, as Triton calls it. None where it cannot be told."""
    if callable(grid):
        try:
            grid = grid({**dict(zip(names, args)), **(kwargs or {})})
        except Exception:
            return None
    if isinstance(grid, int) and not isinstance(grid, bool):
        grid = (grid,)
    if isinstance(grid, (tuple, list)) and 1 <= len(grid) <= 3 and all(isinstance(g, int) for g in grid):
        return tuple(grid) + (1,) * (3 - len(grid))
    return None


def _int_args(names, args, kwargs) -> dict:
    """The integer and bool arguments of one launch by parameter name (BLOCK_N, HAS_WEIGHT, N...)."""
    bound = dict(zip(names, args))
    bound.update({n: v for n, v in kwargs.items() if n in names})
    return {n: v for n, v in bound.items() if isinstance(v, int)}


def _guarded(spy: Spy, shape, dtype, device):
    numel = math.prod(shape)
    buf = _ORIG["empty"](numel + 2 * GUARD, dtype=dtype, device=device)
    poison_(buf)
    spy.buffers.append((buf, GUARD, numel, shape, dtype))
    return buf[GUARD:GUARD + numel].view(shape)


_ORIG: dict = {}
_INHERITED = object()


def _triton_launchers():
    """(JITFunction, GridExecutor): the classes whose calls launch a Triton kernel, compiled or interpreted;
    None where Triton is not installed (it installs on Linux only; lessons 01-02 need none)."""
    try:
        from triton.runtime.interpreter import GridExecutor
        from triton.runtime.jit import JITFunction
    except ImportError:
        return None
    return JITFunction, GridExecutor


# ATen ops that compute on values (not allocation, views, copies, dtype conversion, comparisons for checks): a
# launcher of a kernel exercise that runs them on float tensors does the kernel's work in PyTorch
MATH_OPS = frozenset({
    "add", "sub", "rsub", "mul", "div", "pow", "sqrt", "rsqrt", "reciprocal", "exp", "log", "square", "neg",
    "mean", "sum", "nansum", "var", "std", "var_mean", "std_mean", "norm", "linalg_vector_norm", "amax", "amin",
    "max", "min", "maximum", "minimum", "clamp", "clamp_min", "clamp_max", "addcmul", "addcdiv", "lerp", "cumsum",
    "prod", "logsumexp", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "where", "tanh", "sigmoid",
    "mv", "addmv", "dot", "vdot",
})


@contextlib.contextmanager
def _python_calls_seen(codes: dict, record, names: tuple[str, ...] = (), record_builtin=None):
    """Within: every Python call of a function whose code is one of `codes` is recorded with its label, and every
    call of a built-in (C) function whose name holds one of `names` (torch._C._VariableFunctions.layer_norm, an ATen
    op's C binding), with the torch modes switched off or not: the profile hook is not a torch mode. Threads started
    within get the same hook (torch's mode stacks are per thread, so a call in a worker thread escapes them).
    Built-ins go to record_builtin: the modes name the route better where they see the call too."""
    before = sys.getprofile()
    before_threads = threading.getprofile() if hasattr(threading, "getprofile") else None

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            record(codes[frame.f_code])
        elif event == "c_call" and record_builtin is not None:
            name = getattr(arg, "__name__", "") or ""
            if "backward" not in name and any(n in name for n in names):
                record_builtin(f"the built-in torch function {name}")
        if before is not None:
            before(frame, event, arg)

    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(before)
        threading.setprofile(before_threads)


class _AtenOpsSeen(TorchDispatchMode):
    """Records every ATen op, reached by any route, whose name holds a forbidden one: torch._softmax,
    torch._C._VariableFunctions.softmax and Tensor.softmax all end in aten._softmax. The Python patches of
    student_call name the function the student wrote; this catches the routes they cannot reach. With
    `math` (a list), also the MATH_OPS run on float tensors of more than one element."""

    def __init__(self, names: tuple[str, ...], record, math: list | None = None):
        super().__init__()
        self._names, self._record, self._math = names, record, math

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        op = func.overloadpacket.__name__
        if "backward" not in op and any(name in op for name in self._names):
            self._record(f"torch.ops.aten.{op}")
        if self._math is not None and op.rstrip("_") in MATH_OPS and any(
                isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel() > 1
                for a in (*args, *(kwargs or {}).values())):
            self._math.append(op.rstrip("_"))
        return func(*args, **(kwargs or {}))


class _TorchFunctionsSeen(TorchFunctionMode):
    """Records every torch function (or Tensor method) whose name holds a forbidden one, by any Python route:
    torch._C._VariableFunctions.rms_norm and torch._fused_rms_norm are made of other ops on the CPU (composites)
    and never reach the dispatch mode as themselves."""

    def __init__(self, names: tuple[str, ...], record):
        super().__init__()
        self._names, self._record = names, record

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if "backward" not in name and any(n in name for n in self._names):
            self._record(self._label(func, name))
        return func(*args, **(kwargs or {}))

    @staticmethod
    def _label(func, name: str) -> str:
        """How the student reached it: torch.ops.aten.<op>, Tensor.<method> or torch.<function>."""
        if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            namespace, op = (func.name() if isinstance(func, torch._ops.OpOverload)
                             else func._qualified_op_name).split("::", 1)
            return f"torch.ops.{namespace}.{op}"
        return f"{'Tensor' if 'Tensor' in getattr(func, '__qualname__', '') else 'torch'}.{name}"


# torch's own Python implementations of its ops (what a student finds reading how PyTorch does a norm)
PY_REFERENCE_MODULES = ("torch._refs", "torch._refs.nn.functional", "torch._refs.special",
                        "torch._decomp.decompositions")


@functools.cache
def _reference_codes(names: tuple[str, ...]) -> dict:
    """The code object of each Python reference holding one of `names` (under its decorators) -> its label: what
    runs however the function was reached (a name bound before the call, torch._decomp.decomposition_table)."""
    codes = {}
    for module, attr in _python_references(names):
        code = getattr(inspect.unwrap(getattr(module, attr)), "__code__", None)
        if code is not None:
            codes.setdefault(code, f"{module.__name__}.{attr}")
    return codes


def _other_libraries(name: str) -> list:
    """(module, attribute, label) of other libraries' versions of a forbidden torch function: the variance's in
    NumPy (np.var, np.std and ndarray.var/std all end in numpy's _methods._var/_std) and in statistics."""
    if name != "var":
        return []
    import statistics
    try:
        from numpy._core import _methods
    except ImportError:      # NumPy before 2.0
        from numpy.core import _methods
    return ([(_methods, "_var", "numpy.var"), (_methods, "_std", "numpy.std")]
            + [(statistics, n, f"statistics.{n}") for n in ("variance", "pvariance", "stdev", "pstdev")])


@functools.cache
def _python_references(names: tuple[str, ...]) -> tuple:
    """(module, attribute) of the functions in PY_REFERENCE_MODULES whose name holds one of `names`."""
    found = []
    for module_name in PY_REFERENCE_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for attr, value in list(vars(module).items()):
            if callable(value) and "backward" not in attr and any(n in attr for n in names):
                found.append((module, attr))
    return tuple(found)


@contextlib.contextmanager
def student_call(forbidden: tuple[str, ...] = FORBIDDEN, torch_math: bool = False, python_calls: bool = False):
    """Context for running student code; yields a Spy with launches, forbidden calls, buffers.

    torch_math: record in `spy.torch_math` the ATen ops that compute on float tensors (MATH_OPS), and in
    `spy.copied_out` float data taken out of torch (Tensor.numpy, tolist, __array__) to compute on elsewhere: a
    kernel exercise's launcher should only check, allocate and launch.

    `forbidden` names functions whose use is recorded in `spy.forbidden`, wherever they are reached:
    torch.nn.functional.<name>, torch.<name> and Tensor.<name> by their Python names; any torch function, Tensor
    method or torch.ops.aten op called under a name that holds one (torch._softmax, torch._C bindings,
    torch.ops.aten.native_layer_norm: the kernels behind F.layer_norm), seen by _TorchFunctionsSeen; any ATen op
    dispatched under such a name (_AtenOpsSeen); other libraries' versions (the variance's in NumPy and
    statistics, _other_libraries); and torch's Python references (torch._refs, torch._decomp), by their module
    attributes. python_calls: those references however they were reached instead (a name bound before
    the call, decomposition_table), by a profile hook on Python calls: for code that is plain PyTorch, not for
    Triton's interpreter, which it would slow down.
    """
    triton_launchers = _triton_launchers()
    spy = Spy()
    builtins_seen: list[str] = []   # forbidden C functions called from Python (python_calls), said when no mode saw one
    orig_empty, orig_like, orig_new = torch.empty, torch.empty_like, torch.Tensor.new_empty
    _ORIG["empty"] = orig_empty

    def empty(*args, dtype=None, device=None, **kw):
        shape = _size(args)
        dt = dtype or torch.get_default_dtype()
        if shape is None or kw or not dt.is_floating_point:
            return poison_(orig_empty(*args, dtype=dtype, device=device, **kw))
        return _guarded(spy, shape, dt, device)

    def empty_like(t, *args, dtype=None, device=None, memory_format=None, **kw):
        keeps_layout = t.is_contiguous() or memory_format == torch.contiguous_format
        dt = dtype or t.dtype
        if args or kw or not keeps_layout or not dt.is_floating_point:
            extra = {} if memory_format is None else {"memory_format": memory_format}
            return poison_(orig_like(t, *args, dtype=dtype, device=device, **extra, **kw))
        return _guarded(spy, tuple(t.shape), dt, device or t.device)

    def new_empty(self, *args, dtype=None, device=None, **kw):
        shape = _size(args)
        dt = dtype or self.dtype
        if shape is None or kw or not dt.is_floating_point:
            return poison_(orig_new(self, *args, dtype=dtype, device=device, **kw))
        return _guarded(spy, shape, dt, device or self.device)

    patched = []

    def patch(owner, name, new):
        # Remember whether the attribute was the owner's own (vs inherited) to restore it exactly.
        patched.append((owner, name, owner.__dict__.get(name, _INHERITED)))
        setattr(owner, name, new)

    def counting(run):
        # self.fn is the kernel's Python function: JITFunction.fn, and GridExecutor.fn (the interpreter's
        # rewritten copy, which keeps the name)
        @functools.wraps(run)
        def wrapper(self, *a, **k):
            if spy.tuning or k.get("warmup"):   # triton.autotune timing its configs (lesson 05 section 4), or
                return run(self, *a, **k)           # kernel.warmup(...) compiling without a launch: not the call's
            name = getattr(getattr(self, "fn", None), "__name__", "?")
            spy.launches[name] = spy.launches.get(name, 0) + 1
            spy.grids.setdefault(name, []).append(_grid3(k.get("grid", getattr(self, "grid", None)),
                                                         getattr(self, "arg_names", ()), a, k))
            spy.args.setdefault(name, []).append(_int_args(getattr(self, "arg_names", ()), a, k))
            tensors = [t for t in map(tensor_of, (*a, *k.values())) if t is not None]
            spy.storages = [(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in tensors]
            spy.pointers += [t.data_ptr() for t in tensors]
            if spy.count_launched:
                counted = {c[0] for c in spy.counted}
                for t in tensors:
                    if t.data_ptr() not in counted:
                        spy.count_loads(t)
                        counted.add(t.data_ptr())
            return run(self, *a, **k)
        return wrapper

    def tuning(bench):
        # Autotuner._bench runs one config many times (do_bench) before the call's own launch
        @functools.wraps(bench)
        def wrapper(self, *a, **k):
            spy.tuning += 1
            try:
                return bench(self, *a, **k)
            finally:
                spy.tuning -= 1
        return wrapper

    def forbid(owner, name, label):
        orig = getattr(owner, name)

        @functools.wraps(orig)
        def wrapper(*a, **k):
            spy.forbidden.append(label)
            return orig(*a, **k)
        patch(owner, name, wrapper)

    def copying_out(method, label):
        @functools.wraps(method)
        def wrapper(self, *a, **k):
            if self.is_floating_point() and self.numel() > 1:
                spy.copied_out.append(label)
            return method(self, *a, **k)
        return wrapper

    def checking_stores(store):
        # Triton's interpreter writes wherever an unmasked store points: a store far outside every tensor given to
        # the kernel would overwrite the grader's memory (or crash it), so it is refused before it is made
        @functools.wraps(store)
        def wrapper(self, ptrs, value, mask, *a, **k):
            addresses = ptrs.data[_lanes(mask)] if mask is not None else ptrs.data.ravel()
            spy.check_store(addresses, max(1, ptrs.dtype.element_ty.primitive_bitwidth // 8))
            return store(self, ptrs, value, mask, *a, **k)
        return wrapper

    def checking_loads(load):
        # Triton's interpreter: pointers are host addresses; lanes whose mask is off are not read
        @functools.wraps(load)
        def wrapper(self, ptrs, mask, *a, **k):
            spy.check_load(ptrs.data[_lanes(mask)] if mask is not None else ptrs.data.ravel())
            return load(self, ptrs, mask, *a, **k)
        return wrapper

    def counting_cuda(call):
        @functools.wraps(call)
        def wrapper(self, *a, **k):
            spy.launches[self.name] = spy.launches.get(self.name, 0) + 1
            spy.pointers += [t.data_ptr() for t in a if isinstance(t, torch.Tensor)]
            return call(self, *a, **k)
        return wrapper

    try:  # every patch inside the try: whatever fails half-way, `finally` restores what was patched
        patch(torch, "empty", empty)
        patch(torch, "empty_like", empty_like)
        patch(torch.Tensor, "new_empty", new_empty)
        if triton_launchers is not None:
            jit_function, grid_executor = triton_launchers
            patch(jit_function, "run", counting(jit_function.run))
            # Interpreted launches all end in GridExecutor.__call__ (Triton 3.0-3.5 have no
            # InterpretedFunction.run: `kernel[grid]` returns the GridExecutor itself)
            patch(grid_executor, "__call__", counting(grid_executor.__call__))
            from triton.runtime.autotuner import Autotuner
            if hasattr(Autotuner, "_bench"):   # times one config with do_bench's many launches (Triton 3.6 has it)
                patch(Autotuner, "_bench", tuning(Autotuner._bench))
            from triton.runtime import interpreter
            builder = getattr(interpreter, "InterpreterBuilder", None)   # every interpreted tl.load ends here
            if builder is not None and hasattr(builder, "create_masked_load"):
                patch(builder, "create_masked_load", checking_loads(builder.create_masked_load))
            if builder is not None and hasattr(builder, "create_masked_store"):
                patch(builder, "create_masked_store", checking_stores(builder.create_masked_store))
        from helpers.cudac import CudaKernel
        patch(CudaKernel, "__call__", counting_cuda(CudaKernel.__call__))
        for name in forbidden:
            for owner, label in ((torch.nn.functional, "torch.nn.functional"), (torch, "torch"),
                                 (torch.special, "torch.special"), (torch.Tensor, "Tensor")):
                if hasattr(owner, name):
                    forbid(owner, name, f"{label}.{name}")
            for module, attr, label in _other_libraries(name):
                forbid(module, attr, label)
        if not python_calls:
            for module, attr in _python_references(tuple(forbidden)):
                forbid(module, attr, f"{module.__name__}.{attr}")
        if torch_math:
            for name in ("numpy", "tolist", "__array__"):
                patch(torch.Tensor, name, copying_out(getattr(torch.Tensor, name), f"Tensor.{name}"))
        watching = forbidden or torch_math
        math = spy.torch_math if torch_math else None
        with contextlib.ExitStack() as modes:
            if forbidden and python_calls:
                modes.enter_context(_python_calls_seen(_reference_codes(tuple(forbidden)), spy.forbidden.append,
                                                        tuple(forbidden), builtins_seen.append))
            if forbidden:
                modes.enter_context(_TorchFunctionsSeen(tuple(forbidden), spy.forbidden.append))
            if watching:
                modes.enter_context(_AtenOpsSeen(tuple(forbidden), spy.forbidden.append, math))
            yield spy
    finally:
        if builtins_seen and not spy.forbidden:
            spy.forbidden.extend(builtins_seen)
        for owner, name, orig in reversed(patched):
            if orig is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, orig)


def guarded_input(t: torch.Tensor, row_pad: int = 0, shift: int = 0) -> torch.Tensor:
    """A copy of t inside a NaN-guarded buffer; with row_pad > 0 rows are strided (stride N+pad).

    shift > 0 starts the data that many elements later (misaligned for vector loads)."""
    shape = tuple(t.shape)
    N = shape[-1] if shape else 1
    M = t.numel() // max(N, 1)
    width = N + row_pad
    buf = torch.empty(M * width + 2 * GUARD, dtype=t.dtype, device=t.device)
    poison_input_(buf)
    body = buf[GUARD + shift:GUARD + shift + M * width].view(M, width)[:, :N]
    body.copy_(t.reshape(M, N))
    if row_pad == 0:
        return body.reshape(shape)
    lead = shape[:-1]
    strides = []
    acc = width
    for d in reversed(lead):
        strides.append(acc)
        acc *= d
    return body.as_strided(shape, tuple(reversed(strides)) + (1,))


def _guarded_argument(a):
    """A tensor argument in a NaN-guarded buffer: contiguous, or rows of a wider tensor (x[:, :N], row stride > N,
    whose gaps between rows are NaN too, as the hidden cases' strided rows); anything else as it is."""
    if not isinstance(a, torch.Tensor):
        return a
    if a.is_contiguous():
        return guarded_input(a)
    if a.dim() == 2 and a.stride(1) == 1 and a.stride(0) > a.shape[1]:
        return guarded_input(a, row_pad=a.stride(0) - a.shape[1])
    return a


def run_guarded(fn, *args, **kwargs):
    """Call a student's launcher for a visible check the way the hidden cases do: tensor arguments copied into
    NaN-guarded buffers, and what it allocates with torch.empty surrounded by guard bands. A store past the end
    of an output then lands in the guard band and is reported here, instead of overwriting other memory: Triton's
    CPU interpreter writes wherever an unmasked store points, which can crash the Python process. In the
    interpreter, a load that reaches the guard band of an argument is reported too. Returns what fn returns.

    Prints a FAILED line for what the hidden cases fail whatever the numbers (review student05 F3): a read or write
    out of bounds, an input modified in place, math done by PyTorch in the launcher (or a PyTorch norm called), the
    data taken out of torch. An error fn raises is re-raised after a line with what it most likely means (the hint
    check() gives for it).
    """
    return _run_guarded(fn, args, kwargs)[0]


def _run_guarded(fn, args, kwargs):
    """run_guarded's call; returns (what fn returns, the Spy of the call)."""
    guarded = [_guarded_argument(a) for a in args]
    try:
        names = list(inspect.signature(fn).bind_partial(*args).arguments)
    except (TypeError, ValueError):   # no signature, or one that these arguments do not fit: the call says so
        names = []
    names = [names[i] if i < len(names) else f"argument {i}" for i in range(len(args))]
    before = {n: g.clone() for n, g in zip(names, guarded) if isinstance(g, torch.Tensor)}
    label = getattr(fn, "__name__", "the launcher")
    with student_call(torch_math=True) as spy:
        for name, a, g in zip(names, args, guarded):
            if g is not a:
                spy.watch(name, g)
        try:
            out = fn(*guarded, **kwargs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except Exception as e:
            from .runner import _short_error, error_hint
            hint = error_hint(e)
            if hint:   # check()'s own message for it
                print(f"FAILED: {label} raised {_short_error(e)}{hint}")
            raise
    said = []
    report = spy.oob_report() or (spy.oob_reads[0] if spy.oob_reads else None)
    if report:
        said.append(report)
    changed = [n for n, t in before.items() if not _same(guarded[names.index(n)], t)]
    if changed:
        said.append(f"modified its input {', '.join(changed)}: the caller's tensors stay as they were")
    if spy.forbidden:
        said.append(f"called {spy.forbidden[0]}: the exercise is to write the kernel (scores zero)")
    if spy.torch_math:
        said.append(f"computed with PyTorch outside the kernel (aten {', '.join(dict.fromkeys(spy.torch_math))}): the "
                    "kernel does the math, the launcher only checks, allocates and launches")
    if spy.copied_out:
        said.append(f"took the data out of torch ({spy.copied_out[0]}) to compute on it")
    for line in said:   # the outputs compared after this can still look right: say first that this call is wrong
        print(f"FAILED: {label} {line} (the values checked below may still look right; the hidden cases fail this)")
    return out, spy


def run_launched(fn, *args, **kwargs):
    """run_guarded, that also returns what the call launched: (what fn returns, ["kernel(BLOCK_N=..., ...)", ...]),
    one entry per launch, with the launch's compile-time integers (its parameters named in capitals, N and M left
    out): a visible check of a dispatcher shows the kernel and the chunk it chose."""
    out, spy = _run_guarded(fn, args, kwargs)
    shown = []
    for name, launches in spy.args.items():
        for a in launches:
            picked = ", ".join(f"{k}={v}" for k, v in a.items() if k.isupper() and k not in ("N", "M")
                               and not isinstance(v, bool))
            shown.append(f"{name}({picked})")
    return out, shown


def _same(a, b) -> bool:
    """Equal in dtype and values, NaN where the other is NaN (a guarded argument's gaps between rows are NaN)."""
    if not isinstance(a, torch.Tensor) or a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
