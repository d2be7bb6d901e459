"""Does a Triton kernel that passes in the CPU interpreter compile for a GPU? Find out without one.

Triton's interpreter runs a kernel as Python, so it accepts kernels the compiler rejects: an accumulator started as
the integer 0 and then given floats in a loop, Python's `min` or `float` applied to a Triton tensor, a name
defined inside a loop and used after it, a global that is not a `tl.constexpr`. Such a kernel passes every hidden
case on a CPU and fails every one on a GPU. So the Triton exercises have a first case that compiles the student's
kernels for a GPU, all on the CPU (Triton ships its own ptxas):

1. `recording_launches()`: the launcher runs on a few inputs while each kernel launch (interpreted or compiled) is
   recorded instead of run: kernel, argument types, compile-time constants, launch options;
2. `module_text(ns)`: the source of every @triton.jit function of the notebook, and the globals they read, as one
   Python module;
3. `compile_elsewhere(...)`: a fresh Python process (this file run as a script; Triton must not be in interpreter
   mode there, and this process's `triton.language` has been patched by the interpreter) compiles each launch for
   sm_80 with `triton.compile` and reports Triton's error, with a hint, for each one that fails.

`tools/compile_targets.py` uses the same recorder and `compile_for` to compile the solutions for every GPU we
name. This module imports only the standard library at the top: the compiling process must not import `helpers`
(which switches Triton to the interpreter) nor torch.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import types
from pathlib import Path

TARGET = 80           # compile for sm_80 (an A100); the kernels here need nothing newer
TRITON_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int32": "i32", "int64": "i64",
                "uint8": "u8"}
LAUNCH_OPTIONS = ("num_warps", "num_stages", "maxnreg")

# Triton's message (a pattern in it) -> what it means for a kernel that ran in the interpreter
HINTS = (
    (r"Loop-carried variable", "a variable updated in a loop must keep the type and shape it had before the loop: "
     "start a float as 0.0 (not 0) and a block as tl.zeros([BLOCK_N], tl.float32) (not 0.0); the interpreter "
     "lets Python change them"),
    (r"For loop bounds and step must all be ints", "a float reached a loop bound: are the launch's arguments in "
     "the kernel's order? A kernel whose N comes after eps gets eps as N from a positional launch: pass N=N by name"),
    (r"__pow__", "Triton tensors have no ** operator: write x * x"),
    (r"is not defined", "a name defined inside a loop or an if does not exist after it in a compiled kernel "
     "(Python keeps it, the interpreter too): define it before the loop, or compute it again where it is used"),
    (r"not 'tensor'|'tensor' object cannot be interpreted|argument must be .*, not tensor|"
     r"not supported between instances of 'tensor'",
     "Python's min, max, float, int, abs and range see numbers, not Triton tensors: use tl.minimum, tl.maximum, "
     "x.to(tl.float32), tl.abs, and constexpr loop bounds"),
    (r"global variable|Cannot access global", "a kernel may read only globals that are tl.constexpr: write "
     "NAME = tl.constexpr(value), or pass the value as an argument"),
    (r"Unsupported function referenced|torch", "a kernel calls only tl.* functions and other @triton.jit "
     "functions: PyTorch's (torch.sum) and Python's (math.sqrt) do not run inside it; use tl.sum, tl.sqrt ..."),
)


# ---- 1. what the launcher launches (in the grading process) -----------------------------------------------------

def describe_launch(fn, arg_names, args, kwargs) -> dict:
    """One launch as data: {"kernel", "types", "constexprs", "aligned", "options"}, the way Triton's JIT
    specialises it (a None argument and an integer equal to 1 become constants; integers divisible by 16 are
    noted, for the 16-byte alignment the JIT assumes). fn is the kernel's Python function (its annotations say
    which parameters are tl.constexpr)."""
    import torch

    names = list(arg_names)
    values = dict(zip(names, args))
    values.update({k: v for k, v in kwargs.items() if k in names})
    launch = {"kernel": fn.__name__, "types": {}, "constexprs": {}, "aligned": [],
              "options": {k: v for k, v in kwargs.items() if k not in names and k in LAUNCH_OPTIONS}}
    constexpr = {p.name for p in inspect.signature(fn).parameters.values() if "constexpr" in str(p.annotation)}
    for name in names:
        v = values.get(name)
        if name in constexpr or v is None:
            launch["constexprs"][name] = getattr(v, "value", v)     # a tl.constexpr passed in: its value
        elif isinstance(v, torch.Tensor):
            launch["types"][name] = "*" + TRITON_TYPES.get(str(v.dtype).replace("torch.", ""), "fp32")
        elif type(v).__name__ == "TensorWrapper":   # triton.reinterpret(t, tl dtype): a pointer to that dtype
            launch["types"][name] = "*" + str(v.dtype)   # (no package import: tools/compile_targets.py loads this file)
        elif isinstance(v, bool):
            launch["types"][name] = "i1"
        elif isinstance(v, int) and v == 1:
            launch["constexprs"][name] = 1
        elif isinstance(v, int):
            launch["types"][name] = "i32" if -2**31 <= v < 2**31 else "i64"
            if v % 16 == 0:
                launch["aligned"].append(name)
        elif isinstance(v, float):
            launch["types"][name] = "fp32"
        else:
            raise TypeError(f"{fn.__name__}: cannot pass argument {name} = {v!r} to a kernel")
    return launch


@contextlib.contextmanager
def recording_launches(record=None):
    """Inside, a Triton launch, interpreted (GridExecutor.__call__, Triton 3.0-3.9) or compiled
    (JITFunction.run), is recorded and not run; yields the list of distinct launches. Outputs stay unwritten.
    With `record(fn, arg_names, grid, args, kwargs) -> dict`, every launch is kept as it says, in order."""
    from triton.runtime.interpreter import GridExecutor
    from triton.runtime.jit import JITFunction

    launches: list[dict] = []

    def keep(fn, arg_names, grid, args, kwargs):
        if record is not None:
            launches.append(record(fn, arg_names, grid, args, kwargs))
            return
        launch = describe_launch(fn, arg_names, args, kwargs)
        if launch not in launches:
            launches.append(launch)

    def interpreted(self, *args, **kwargs):
        keep(self.fn, self.arg_names, self.grid, args, kwargs)   # self.fn keeps the annotations

    def compiled(self, *args, grid, warmup, **kwargs):
        keep(self.fn, self.arg_names, grid, args, kwargs)

    try:   # @triton.autotune would time each config with ~1000 launches (recorded, not run): all tie instead,
        from triton.runtime.autotuner import Autotuner   # and the first config is the call's one launch
    except ImportError:
        Autotuner = None
    bench = getattr(Autotuner, "_bench", None)
    from helpers.env import untimed_autotune_bench as untimed

    saved = (GridExecutor.__call__, JITFunction.run)
    GridExecutor.__call__, JITFunction.run = interpreted, compiled
    if bench is not None:
        Autotuner._bench = untimed
    try:
        yield launches
    finally:
        GridExecutor.__call__, JITFunction.run = saved
        if bench is not None:
            Autotuner._bench = bench


def distinct(launches: list[dict]) -> list[dict]:
    """One launch per kernel, pointer types and on/off constants (HAS_WEIGHT, a None pointer): block sizes,
    lengths, warps and which integers the JIT specialises rarely decide whether a kernel compiles, and each
    compile costs a fraction of a second. Of the launches that differ only in those, the one with the largest
    integer constants is kept."""
    def size(launch):
        return sum(v for v in launch["constexprs"].values() if isinstance(v, int) and not isinstance(v, bool))

    kept: dict = {}
    for launch in launches:
        switches = {k: v for k, v in launch["constexprs"].items() if v is None or isinstance(v, bool)}
        pointers = {k: t for k, t in launch["types"].items() if t.startswith("*")}
        key = json.dumps([launch["kernel"], pointers, switches], sort_keys=True)
        if key not in kept or size(launch) > size(kept[key]):
            kept[key] = launch
    return list(kept.values())


# ---- 2. the kernels as a module ---------------------------------------------------------------------------------

def _python_function(obj):
    """The Python function of a @triton.jit object (JITFunction, InterpretedFunction, or an Autotuner /
    Heuristics around one), else None."""
    for _ in range(4):
        name = type(obj).__name__
        if name in ("JITFunction", "InterpretedFunction"):
            return obj.fn
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
    return None


def _names_read(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


def _global_line(name: str, value) -> str | None:
    """A line of Python giving `name` the value a kernel reads, or None where it cannot be written down."""
    if isinstance(value, types.ModuleType):
        return f"import {value.__name__} as {name}"
    wrapped = type(value).__name__ == "constexpr"
    inner = getattr(value, "value", None) if wrapped else value
    if isinstance(inner, float) and not math.isfinite(inner):
        text = f'float("{inner}")'
    elif isinstance(inner, (bool, int, float, str)) or inner is None:
        text = repr(inner)
    else:
        return None
    return f"{name} = tl.constexpr({text})" if wrapped else f"{name} = {text}"


def jit_names(ns: dict) -> set[str]:
    """Names of the @triton.jit functions of a namespace (as launches name them)."""
    return {fn.__name__ for fn in map(_python_function, ns.values()) if fn is not None}


def module_text(ns: dict, kernels=None) -> str:
    """The @triton.jit functions of a notebook namespace (each decorated plainly with @triton.jit) and the globals
    they read that can be written down: modules, numbers, tl.constexpr values. With `kernels`, only those and the
    @triton.jit functions they call, directly or not. A plain int global stays a plain int, which Triton refuses
    inside a kernel, as it would on a GPU."""
    every = {}
    for value in ns.values():
        fn = _python_function(value)
        if fn is not None:
            every.setdefault(fn.__name__, fn)
    if kernels is None:
        fns = every
    else:
        fns, todo = {}, [k for k in kernels if k in every]
        while todo:
            name = todo.pop()
            if name not in fns:
                fns[name] = every[name]
                todo += [n for n in _names_read(every[name].__code__) if n in every and n not in fns]
    lines = ["import triton", "import triton.language as tl", ""]
    read = set().union(*(_names_read(fn.__code__) for fn in fns.values())) if fns else set()
    for name in sorted(read - set(every) - {"triton", "tl"}):
        if name in ns:
            line = _global_line(name, ns[name])
            if line:
                lines.append(line)
    blocks = []
    for name, fn in sorted(fns.items()):
        try:
            src = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            continue
        start = re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE)
        blocks.append("@triton.jit\n" + src[start.start():] if start else src)
    return "\n".join(lines) + "\n\n" + "\n\n".join(blocks)


def kernel_line(text: str, kernel: str, lineno: int) -> str:
    """Line `lineno` (1 = the def line) of `kernel` in a module text, stripped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if re.match(rf"def\s+{kernel}\s*\(", ln)), None)
    if start is None or not 0 < lineno <= len(lines) - start:
        return ""
    return lines[start + lineno - 1].strip()


# ---- 3. compiling (in a fresh process: this file as a script) ---------------------------------------------------

def compile_for(fn, types: dict, constexprs: dict, capability: int, aligned=None, **options):
    """Compile fn for sm_<capability>: types maps runtime arguments to Triton types ("*bf16", "i32", "fp32"),
    constexprs the compile-time ones to values; options are launch options (num_warps, maxnreg...).
    Pointers, and the integers named in `aligned` (default: those named stride*), are declared divisible by 16,
    as the JIT specialises them at run time: without it loads are not vectorised and registers are not the GPU's."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {name: types.get(name, "constexpr") for name in fn.arg_names}
    aligned = [k for k in types if k.startswith("stride")] if aligned is None else aligned
    attrs = {(fn.arg_names.index(k),): [["tt.divisibility", 16]] for k, t in types.items()
             if t.startswith("*") or k in aligned}
    return triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", capability, 32),
                          options=options)


def jit_source(text: str, label: str = "kernels") -> dict:
    """{name: JITFunction} of a module text, compiled by Triton itself where TRITON_INTERPRET is unset and
    `helpers` was not imported (an InterpretedFunction each where it is set: autograder/loadcheck.py). Written
    to a real file: @triton.jit reads the source through inspect."""
    import triton  # noqa: F401  (the module imports it)

    with tempfile.NamedTemporaryFile("w", suffix=f"_{label}.py", delete=False) as f:
        f.write(text)
    scope: dict = {"__name__": f"_{label}"}
    exec(compile(text, f.name, "exec"), scope)
    return {name: fn for name, fn in scope.items() if type(fn).__name__ in ("JITFunction", "InterpretedFunction")}


def explain(e: BaseException, text: str, kernel: str) -> str:
    """Triton's compile error in a line: where in the kernel, what, and a hint for the usual interpreter-only
    mistakes."""
    what = getattr(e, "error_message", None) or (f"{type(e.__cause__).__name__}: {e.__cause__}" if e.__cause__
                                                 else f"{type(e).__name__}: {e}")
    what = " ".join(str(what).split())
    node = getattr(e, "node", None)
    where = ""
    if node is not None and getattr(node, "lineno", None):
        line = kernel_line(text, kernel, node.lineno)
        where = f"line {node.lineno} of {kernel}" + (f" `{line[:80]}`" if line else "") + ": "
    hint = next((h for pattern, h in HINTS if re.search(pattern, what)), "")
    if hint and len(what) > 160:      # the hint says the rest
        what = what[:160] + " ..."
    return f"{where}{what[:300]}" + (f". {hint}" if hint else "")


def compile_all(text: str, launches: list[dict], capability: int) -> list[dict]:
    """Compile each launch of the module's kernels; {"kernel", "ok", "problem"} each."""
    try:
        kernels = jit_source(text, "student")
    except Exception as e:   # the module itself does not run: a global the kernels read, written wrongly
        return [{"kernel": launch["kernel"], "ok": False,
                 "problem": f"the kernels' module does not load: {type(e).__name__}: {e}"[:400]} for launch in launches]
    rows = []
    for launch in launches:
        fn = kernels.get(launch["kernel"])
        row = {"kernel": launch["kernel"], "ok": True, "problem": None}
        if fn is None:
            row.update(ok=False, problem=f"{launch['kernel']} is not a @triton.jit function of the notebook")
        else:
            try:
                compile_for(fn, launch["types"], launch["constexprs"], capability, launch.get("aligned"),
                            **launch["options"])
            except Exception as e:
                row.update(ok=False, problem=explain(e, text, launch["kernel"]))
        rows.append(row)
    return rows


def compile_elsewhere(text: str, launches: list[dict], capability: int = TARGET, timeout: float = 300) -> list[dict]:
    """compile_all in a fresh Python process without TRITON_INTERPRET (Triton compiles there, it does not
    interpret); raises RuntimeError if that process fails."""
    with tempfile.TemporaryDirectory() as tmp:
        job, out = Path(tmp) / "job.json", Path(tmp) / "rows.json"
        job.write_text(json.dumps({"text": text, "launches": launches, "capability": capability}))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        proc = subprocess.run([sys.executable, __file__, str(job), str(out)], env=env, capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode or not out.exists():
            raise RuntimeError(f"the compiling process failed: {(proc.stderr or proc.stdout)[-600:]}")
        return json.loads(out.read_text())


# What compile_elsewhere found in this process: module_text(ns, [kernel]) -> the problem, None if it compiles.
COMPILED: dict[str, str | None] = {}


def remember(ns: dict, rows: list[dict]) -> None:
    """Keep each kernel's verdict (its first problem, if any) under the text of that kernel and what it calls."""
    for row in rows:
        key = module_text(ns, [row["kernel"]])
        if COMPILED.get(key) is None:
            COMPILED[key] = row["problem"]


def known_failure(ns: dict, kernels) -> tuple[str, str] | None:
    """(kernel, problem) for the first of `kernels` that an earlier compile of the same kernel source found not
    to compile for a GPU; None if none did or none was compiled."""
    if not COMPILED:
        return None
    names = jit_names(ns)
    for kernel in kernels:
        problem = COMPILED.get(module_text(ns, [kernel])) if kernel in names else None
        if problem:
            return kernel, problem
    return None


def main(argv) -> int:
    job = json.loads(Path(argv[0]).read_text())
    rows = compile_all(job["text"], job["launches"], job["capability"])
    Path(argv[1]).write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
