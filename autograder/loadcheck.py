"""Does every load and store of a Triton kernel stay inside the tensors it was given? Found on any machine.

A kernel whose stores keep the row mask but whose loads drop it reads rows past the last one: on a GPU it gets
whatever lies there (or faults with an illegal address once the read leaves the allocation) and the masked store
throws it away, so the numbers are right and no numeric case can tell. Triton's CPU interpreter can: a pointer
there is a host address, and every load passes through one builder method. On a CPU the grader checks every load
of every case in its own process (`harness.student_call`, `Spy.watch`). On a GPU the kernels are compiled, so:

    with recording_launches() as launches:     # here: the launcher runs, its kernels are recorded, not run
        launcher(x, weight, bias)
    problem = replay_elsewhere(module_text(ns, kernels), launches)   # there: the interpreter, every access checked

The other process (this file as a script, TRITON_INTERPRET=1, no GPU visible) gives each tensor argument exactly
the bytes its view spans, runs the launches in the interpreter, and stops at the first load or store whose
unmasked lanes fall outside every argument, before it happens. It also counts, for each launch and argument, the
elements loaded through it: how many times a kernel reads its input (`loads=`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 240


def _pack(a):
    """A launch argument as it can be saved: a tensor as the bytes its view spans (on the CPU), numbers as they
    are."""
    import torch

    from .harness import extent, tensor_of

    t = tensor_of(a)
    if t is not None:   # a triton.reinterpret wrapper keeps its tl dtype, replayed through the same call
        flat = torch.as_strided(t, (extent(t),), (1,), t.storage_offset()).detach().cpu().clone()
        return {"tensor": flat, "shape": tuple(t.shape), "stride": tuple(t.stride()), "ptr": t.data_ptr(),
                "reinterpret": None if t is a else str(a.dtype)}
    return getattr(a, "value", a) if type(a).__name__ == "constexpr" else a


def _launch(fn, arg_names, grid, args, kwargs) -> dict:
    names = list(arg_names)
    if callable(grid):
        meta = dict(zip(names, args))
        meta.update(kwargs)
        grid = grid(meta)
    grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
    return {"kernel": fn.__name__, "arg_names": names, "grid": grid, "args": [_pack(a) for a in args],
            "kwargs": {k: _pack(v) for k, v in kwargs.items()}}


def recording_launches():
    """Inside, a Triton launch, interpreted or compiled, is recorded with its arguments' values and not run;
    yields the list of launches in order."""
    from .gpu_compile import recording_launches as recording

    return recording(record=_launch)


def replay_elsewhere(text: str, launches: list[dict], timeout_s: float = TIMEOUT_S,
                     loads: list | None = None) -> tuple[str, str] | None:
    """Run the launches of the module's kernels in Triton's interpreter in another process; the first access
    outside the tensors as ("tl.load" or "tl.store", what it reached, in words), or None. Raises RuntimeError
    when that process fails. A list `loads` receives, for each launch (in order, up to the first access outside),
    {argument name: elements its loads read} ({} for a kernel the module does not hold)."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        job, out = Path(tmp) / "launches.pt", Path(tmp) / "verdict.json"
        torch.save({"text": text, "launches": launches}, job)
        env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.run([sys.executable, __file__, str(job), str(out)], env=env, capture_output=True,
                              text=True, timeout=timeout_s, cwd=ROOT)
        if proc.returncode or not out.exists():
            raise RuntimeError(f"the replaying process failed: {(proc.stderr or proc.stdout)[-600:]}")
        verdict = json.loads(out.read_text())
        if loads is not None:
            loads.extend(verdict["loads"])
        problem = verdict["problem"]
        return tuple(problem) if problem else None


class OutOfBounds(Exception):
    pass


def _where(addresses, spans) -> str | None:
    """None if every address lies in one of spans [(name, start, end)]; else which span it missed, and how."""
    import numpy as np

    addresses = np.asarray(addresses).ravel()
    if addresses.size == 0:
        return None
    inside = np.zeros(addresses.shape, dtype=bool)
    for _, start, end in spans:
        inside |= (addresses >= start) & (addresses < end)
    if inside.all():
        return None
    a = int(addresses[~inside][0])
    name, start, end = min(spans, key=lambda s: min(abs(a - s[1]), abs(a - (s[2] - 1))))
    return f"past the last element of {name}" if a >= end else f"before the first element of {name}"


def replay(job_path: str, out_path: str) -> None:
    """The other process: the kernels interpreted, each tensor argument in a buffer of exactly its span, every
    load and store checked before it is made."""
    import torch

    import helpers  # noqa: F401  (the interpreter's set-up, as in grading on a CPU: bf16 rounding, NumPy 2.4 loops)
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpreterBuilder

    from autograder.gpu_compile import jit_source
    from autograder.harness import _lanes

    job = torch.load(job_path, weights_only=False)
    kernels = jit_source(job["text"], "replay")
    state = {"spans": [], "kernel": "", "loads": {}}

    def checked(method, verb):
        def wrapper(self, ptrs, *rest, **kw):
            mask = rest[0] if verb == "tl.load" else rest[1]
            lanes = ptrs.data[_lanes(mask)] if mask is not None else ptrs.data   # block pointers: a bare array
            where = _where(lanes, state["spans"])
            if where:
                raise OutOfBounds(verb, f"a {verb} in {state['kernel']} reached {where}")
            if verb == "tl.load":
                for name, start, end in state["spans"]:
                    state["loads"][name] = state["loads"].get(name, 0) + int(((lanes >= start) & (lanes < end)).sum())
            return method(self, ptrs, *rest, **kw)
        return wrapper

    InterpreterBuilder.create_masked_load = checked(InterpreterBuilder.create_masked_load, "tl.load")
    InterpreterBuilder.create_masked_store = checked(InterpreterBuilder.create_masked_store, "tl.store")

    def unpack(name, a, spans):
        if isinstance(a, dict) and "tensor" in a:
            flat = a["tensor"]
            t = torch.as_strided(flat, a["shape"], a["stride"], 0) if flat.numel() else \
                torch.empty(a["shape"], dtype=flat.dtype)
            if flat.numel():
                spans.append((name, flat.data_ptr(), flat.data_ptr() + flat.numel() * flat.element_size()))
            return triton.reinterpret(t, tl.dtype(a["reinterpret"])) if a.get("reinterpret") else t
        return a

    problem = None
    loads: list[dict] = []
    for launch in job["launches"]:
        fn = kernels.get(launch["kernel"])
        if fn is None:
            loads.append({})
            continue
        spans: list = []
        args = [unpack(n, a, spans) for n, a in zip(launch["arg_names"], launch["args"])]
        kwargs = {k: unpack(k, v, spans) for k, v in launch["kwargs"].items()}
        state.update(spans=spans, kernel=launch["kernel"], loads={})
        loads.append(state["loads"])
        try:
            fn[launch["grid"]](*args, **kwargs)
        except Exception as e:   # the interpreter wraps what the kernel raised
            cause = e
            while cause is not None and not isinstance(cause, OutOfBounds):
                cause = cause.__cause__ or cause.__context__
            if cause is None:
                raise
            problem = list(cause.args)
            break
    Path(out_path).write_text(json.dumps({"problem": problem, "loads": loads}))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    replay(sys.argv[1], sys.argv[2])
