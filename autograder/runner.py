"""Run an exercise's hidden cases against a namespace of student code; print the table."""
from __future__ import annotations

import inspect
import io
import itertools
import textwrap
import contextlib
import traceback

from .registry import CaseSkipped, Exercise, for_lesson, get

STUB_MARKER = "YOUR CODE HERE"   # of every stub region (autograder.stubs; helpers.cudac.STUB_TODO, a test keeps them equal)


def source_of(obj) -> str:
    if isinstance(obj, str):  # CUDA C source held in a string
        return obj
    if inspect.isclass(obj):  # a class written in a notebook: the source of its own methods
        return "\n".join(source_of(v) for v in vars(obj).values() if inspect.isfunction(v))
    fn = getattr(obj, "fn", obj)  # a Triton JITFunction keeps the Python function in .fn
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return getattr(obj, "src", "") or ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def holds_stub(source: str) -> bool:
    """Whether a source still holds an untouched stub region (autograder.stubs writes them).

    Untouched: the marker comment (`# YOUR CODE HERE` followed by `pass`, or `// YOUR CODE HERE` in CUDA C)
    with nothing written after it in its block: the next code line closes the block (less indentation, or the
    end of the source) or, in Python, is the given `return` that follows some stubs (lesson 03's launchers).
    A student who keeps the comment and writes the code below it has filled the region, so the grader shows
    the real messages; code written only above a kept comment and `pass` still reads as a stub.
    """
    marker = {f"# {STUB_MARKER}", f"// {STUB_MARKER}"}
    # code lines only: comments and preprocessor lines (`#pragma unroll` at column 0) say nothing about the region
    lines = [ln for ln in source.split("\n")
             if ln.strip() and (ln.strip() in marker or not ln.strip().startswith(("#", "//")))]
    for i, line in enumerate(lines):
        text = line.strip()
        if text == f"# {STUB_MARKER}" and i + 1 < len(lines) and lines[i + 1].strip() == "pass":
            rest, indent = lines[i + 2:], _indent(lines[i + 1])
            if not rest or _indent(rest[0]) < indent or rest[0].strip().startswith(("return", "}")):
                return True
        elif text == f"// {STUB_MARKER}":
            rest = lines[i + 1:]
            if not rest or rest[0].strip().startswith("}"):
                return True
    return False


def untouched_stubs(ex: Exercise, ns: dict) -> list[str]:
    """Names of the exercise's functions that still hold an untouched stub region."""
    return [name for name in ex.functions if name in ns and holds_stub(source_of(ns[name]))]


def _used_stubs(ex: Exercise, ns: dict) -> str:
    """'' or a note naming the functions of earlier exercises that this one calls and that are still stubs."""
    names = [n for n in ex.uses if n in ns and holds_stub(source_of(ns[n]))]
    if not names:
        return ""
    owners = {n: other.id for other in for_lesson(ex.lesson) for n in other.functions}
    where = ", ".join(f"{n} (exercise {owners[n]})" if n in owners else n for n in names)
    return (f"{where} {'is' if len(names) == 1 else 'are'} still a TODO stub, and {ex.functions[0]} relies on "
            f"{'it' if len(names) == 1 else 'them'}: fill {'it' if len(names) == 1 else 'them'} in first")


# errors whose words do not say what the student did (Triton's interpreter, a CUDA fault), and what did
ERROR_HINTS = (
    ("must be Tensor, not tensor", ": a PyTorch function was called on a Triton tensor inside a @triton.jit kernel; "
     "use tl.sum, tl.sqrt, tl.where ... there"),
    ("must match the size of tensor b", ": the shapes do not broadcast. A reduction (max, sum, mean, var) taken without keepdim=True "
     "drops the reduced dims, so it no longer lines up with x: reduce with keepdim=True"),
    ("'float' object cannot be interpreted as an integer", ": a float reached range() or a size. Are the launch's "
     "arguments in the kernel's order? A kernel whose N comes after eps gets eps as N from a positional launch: "
     "pass N=N by name"),
    ("cannot be accessed from Triton (cpu tensor?)", ": a tensor in CPU memory reached a kernel on the GPU. Allocate "
     "the outputs on x's device (torch.empty(..., device=x.device), or torch.empty_like), and give the kernel no "
     "CPU tensor"),
    ("illegal memory access", ": a read or write outside the tensors: a null weight or bias read without `if (weight)` "
     "/ `if (bias)` (the cases without them), an index past the row or the last row, or a __shared__ array indexed "
     "past its size (one slot per warp: 32 for a block of 1024 threads). The fault breaks every "
     "later CUDA call of this process"),
    ("illegal instruction", ": often a warp-level primitive whose mask leaves out a lane that calls it (all 32 "
     "lanes running __shfl_xor_sync(0xffff, ...)): name every lane that calls it (0xffffffff for a whole warp), or use "
     "the tile's own warp.shfl_xor. The fault breaks every later CUDA call of this process"),
    ("misaligned address", ": a float4 (16-byte) load or store at an address that is not a multiple of 16. Take the "
     "vector path only when every pointer it reads or writes is 16-byte aligned: aligned16(x, y, weight, bias). "
     "The fault breaks every later CUDA call of this process"),
)


# cases that run the kernels in another process (a replay): a fault there leaves this process's context as it was
CHILD_PROCESS_NEEDS = ("sanitizer", "ncu")
# CUDA faults that break the context: every later CUDA call of the process fails with the same error
STICKY_FAULTS = ("illegal memory access", "misaligned address", "unspecified launch failure", "illegal instruction")


def _short_error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    msg = " ".join(line.strip() for line in text[:3])
    return msg[:400]


def skip_reason(case, gpu: bool) -> str | None:
    """Why a case cannot run here (it is then reported as skipped, never as passed), or None."""
    if case.needs_gpu and not gpu:
        return "needs a CUDA GPU"
    if case.needs_gib and gpu:
        import torch
        torch.cuda.empty_cache()    # memory this process's allocator holds but does not use counts as free
        free = torch.cuda.mem_get_info()[0] / 2**30
        if free < case.needs_gib:
            return f"needs {case.needs_gib:g} GiB of free GPU memory ({free:.1f} GiB free here)"
    if case.needs == "cuda":
        from helpers.cudac import can_run
        return can_run()
    if case.needs == "sanitizer":
        from helpers.cudac import can_run
        from .racecheck import sanitizer_path
        return can_run() or (None if sanitizer_path() else "needs compute-sanitizer (it comes with the CUDA toolkit)")
    if case.needs == "ncu":
        from helpers.cudac import can_run
        from .racecheck import ncu_path
        return can_run() or (None if ncu_path() else "needs Nsight Compute's ncu (it comes with the CUDA toolkit)")
    if case.needs == "triton-compile":
        from helpers.env import installed_version, major_minor
        version = installed_version("triton")
        if (major_minor(version or "0.0") or (0, 0)) < (3, 3):
            return f"compiling for a GPU here needs Triton 3.3 or newer (found {version})"
    if case.needs == "nvcc":
        from helpers.cudac import has_nvcc
        return None if has_nvcc() else "needs nvcc (the CUDA toolkit) to compile CUDA C"
    return None


def _frames(e: BaseException) -> list:
    """The frames of e's traceback, outermost first, followed by those of the errors it was raised from (deeper):
    Triton's interpreter re-raises a kernel's error as InterpreterError at the launch, the kernel's line is in the
    cause's traceback."""
    chain, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return [fr for err in chain for fr in traceback.extract_tb(err.__traceback__)]


class NotDefinedError(BaseException):
    """A case asked for one of the exercise's names that the notebook does not define. A BaseException, so that no
    `except Exception` of a case or of student code turns it into another verdict."""


class _WithMissing(dict):
    """A copy of the student's namespace in which each of the exercise's functions (and those of earlier exercises
    it uses) that is not defined raises NotDefinedError when a case looks it up (ns[name]; `name in ns` stays
    False): the cases that do not use it still run. One missing function of two (welford_merge) costs the cases
    that call it, not its sibling's."""

    def __init__(self, ns: dict, missing: list[str]):
        super().__init__(ns)
        self.missing = tuple(missing)

    def __missing__(self, name):
        if name in self.missing:
            raise NotDefinedError(_not_defined([name]))
        raise KeyError(name)


def _not_defined(names) -> str:
    return f"not defined: {', '.join(names)} (run the cell that defines it)"


def error_hint(error: BaseException, hints=ERROR_HINTS) -> str:
    """The first of `hints`, (text in the error, hint), whose text is in the error's message; "" if none is."""
    return next((h for pattern, h in hints if pattern in str(error)), "")


def run_case(case, ns: dict, hints=ERROR_HINTS) -> tuple[bool, str]:
    """One case, never raising: an exception in student code is a failed case with its message (and the first of
    `hints`, (text in the error, hint), that matches it)."""
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            ok, msg = case.run(ns)
        return bool(ok), msg
    except CaseSkipped:
        raise
    except NotDefinedError as e:
        return False, str(e)
    except SystemExit as e:   # sys.exit() in student code: this case fails, the others still run
        return False, (f"called sys.exit({'' if e.code is None else repr(e.code)}): a function the grader calls must "
                       "return (or raise an exception), not end the program")
    except Exception as e:  # student code raised: report it where it happened
        if isinstance(e, NameError) and getattr(e, "name", None) in getattr(ns, "missing", ()):
            return False, _not_defined([e.name])   # a student function called the missing one (by its globals)
        where = next((f" (in {fr.name}, line {fr.lineno})" for fr in reversed(_frames(e))
                      if not fr.filename.endswith(".py") or "<" in fr.filename), "")
        return False, f"raised {_short_error(e)}{where}{error_hint(e, hints)}"


def grade(ex: Exercise | str, ns: dict, *, gpu: bool | None = None, on_case=None, cases=None, until=None) -> dict:
    """Grade one exercise: {'id', 'earned', 'possible', 'skipped', 'cases': [...]}.

    on_case(name, rows), if given, is called before each case runs with the rows of the cases before it (the
    grading CLI keeps them, so that a case that crashes the process loses only itself). cases: the cases to run,
    in that order (default: all of the exercise's); until(row): stop after the first row it accepts (the mutant
    tests stop at the case that rejects the mutant)."""
    if isinstance(ex, str):
        ex = get(ex)
    if not isinstance(ns, dict):
        raise TypeError(f"ns must be a dict of the student's names, got {type(ns).__name__}")
    if gpu is None:
        from helpers.env import on_gpu
        gpu = on_gpu()
    missing = [n for n in ex.functions if n not in ns]
    stubs = untouched_stubs(ex, ns)
    used_stubs = _used_stubs(ex, ns)
    absent = missing + [n for n in ex.uses if n not in ns]   # an earlier exercise's function it calls, too
    if absent and set(ex.functions) - set(ex.given) - set(missing):   # some defined: the cases run on those
        ns, missing = _WithMissing(ns, absent), []
    rows = []
    broken_by = None   # the case whose CUDA fault broke the context: later CUDA errors are its, not theirs
    for case in ex.cases if cases is None else cases:
        if on_case is not None:
            on_case(case.name, rows)
        row = {"name": case.name, "points": case.points, "passed": False, "skipped": False}
        with _memory_turn(case, gpu):
            _grade_case(case, ex, ns, gpu, row, rows, missing, stubs, used_stubs, broken_by)
        if not row["passed"] and not row["skipped"] and broken_by is None and _breaks_context(case, row["message"]):
            broken_by = case.name
        rows.append(row)
        if until is not None and until(row):
            break
    if any(c["passed"] for c in rows):   # code above a kept `# YOUR CODE HERE` and `pass`: it runs, partly right
        for c in rows:
            if c.get("message", "").startswith("not implemented yet"):
                c["message"] += (" (yet other cases pass: if your code sits above the `# YOUR CODE HERE` and `pass` "
                                 "lines, delete those two lines to see what is wrong here)")
    earned = sum(c["points"] for c in rows if c["passed"])
    skipped = sum(c["points"] for c in rows if c["skipped"])
    return {"id": ex.id, "title": ex.title, "earned": earned, "possible": ex.points,
            "skipped": skipped, "status": "graded", "cases": rows}


def unfinished(ex, status: str, message: str, done: list | None = None, gpu: bool = False, rest: str = "") -> dict:
    """A result for an exercise whose grading did not finish (its process crashed or timed out, or check() was
    interrupted): the cases graded before (done) keep their rows; the next fails with `message`, the others with
    `rest` (default: the same), except the cases that could not run here anyway (skipped)."""
    rows = list(done or [])
    for k, c in enumerate(ex.cases[len(rows):]):
        reason = skip_reason(c, gpu)
        rows.append({"name": c.name, "points": c.points, "passed": False, "skipped": bool(reason),
                     "message": f"skipped: {reason}" if reason else (message if k == 0 or not rest else rest)})
    return {"id": ex.id, "title": ex.title, "earned": sum(r["points"] for r in rows if r["passed"]),
            "possible": ex.points, "skipped": sum(r["points"] for r in rows if r["skipped"]), "status": status,
            "cases": rows, "cell_errors": [], "seconds": 0.0}


@contextlib.contextmanager
def one_at_a_time(name: str):
    """Within: no other process of this machine is within one_at_a_time(name) (graders side by side, test shards);
    a lock file in the temporary directory, released when the process ends."""
    import fcntl
    import tempfile
    from pathlib import Path

    with open(Path(tempfile.gettempdir()) / f"autograder-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _memory_turn(case, gpu: bool):
    """A case that needs much GPU memory (needs_gib) takes its turn, so that it finds the memory it checked for
    free."""
    return one_at_a_time("gpu-memory") if case.needs_gib and gpu else contextlib.nullcontext()


def _breaks_context(case, msg: str) -> bool:
    """Whether a failed case's message shows a fault that broke this process's CUDA context (a case that ran the
    kernels in another process, a replay, leaves it as it was)."""
    return case.needs not in CHILD_PROCESS_NEEDS and any(t in msg for t in STICKY_FAULTS)


def _grade_case(case, ex, ns, gpu, row, rows, missing, stubs, used_stubs, broken_by) -> None:
    """Run one case into its row (skipped, not run, or its verdict and message)."""
    waits = {c.name: bool(c.after_passes) for c in ex.cases}   # such cases do not wait on one another
    reason = skip_reason(case, gpu)
    if reason:
        row.update(skipped=True, message=f"skipped: {reason}")
    elif missing:   # none of the student's functions is defined: no case can run
        row["message"] = _not_defined(missing)
    elif case.after_passes and (failed := [r["name"] for r in rows if not r["passed"] and not r["skipped"]
                                           and not waits.get(r["name"], False)]):
        why = case.after_passes if isinstance(case.after_passes, str) else (
            "a kernel that is wrong there could fault here, and a fault ends this process's use of the GPU")
        row["message"] = f"not run: it runs once every case before it passes ('{failed[0]}' fails); {why}"
        _stub_words(row, False, ex, stubs, used_stubs)
    else:
        try:
            ok, msg = run_case(case, ns, case.error_hints + ex.error_hints + ERROR_HINTS)
        except CaseSkipped as e:
            row.update(skipped=True, message=f"skipped: {e}")
            return
        row.update(passed=ok, message=msg)
        _stub_words(row, ok, ex, stubs, used_stubs)
        if not ok and broken_by and any(t in msg for t in ("CUDA error", "cuLaunchKernel", "cuMemcpy", "cuCtx")):
            row["message"] = (f"not run: case '{broken_by}' broke the CUDA context (a fault there makes every later "
                              "CUDA call of this process fail); fix that case first")


def _stub_words(row: dict, ok: bool, ex, stubs, used_stubs) -> None:
    """A failed case's message where TODO stubs remain: "not implemented yet" when every function the student
    writes is a stub, else the stubs named beside the message."""
    if ok:
        return
    if stubs and set(stubs) >= set(ex.functions) - set(ex.given):
        row["message"] = f"not implemented yet: fill in the TODO in {', '.join(stubs)}"
    elif stubs:   # the others are written: their messages teach, the stub is named beside them
        row["message"] = f"{row['message']} (still a TODO stub: {', '.join(stubs)})"
    elif used_stubs:
        row["message"] = f"{row['message']} ({used_stubs})"


def format_table(result: dict, width: int = 110) -> str:
    lines = [f"{result['title']}  [{result['id']}]"]
    lines.append(f"{'case':<44} {'pts':>3}  {'result':<6}  message")
    room = max(20, width - 62)
    for c in result["cases"]:
        mark = "skip" if c["skipped"] else ("PASS" if c["passed"] else "FAIL")
        msg = c.get("message", "")
        names = textwrap.wrap(c["name"], 44) or [""]          # a long name wraps in its column, never cut
        parts = textwrap.wrap(msg, room, break_on_hyphens=False) or [""]   # at spaces; a long word is split
        for i, (name, part) in enumerate(itertools.zip_longest(names, parts, fillvalue="")):
            middle = f"{c['points']:>3}  {mark:<6}" if i == 0 else " " * 11
            lines.append(f"{name:<44} {middle}  {part}".rstrip())
    tail = f"score: {result['earned']}/{result['possible']}"
    if result.get("skipped"):
        tail += f"  ({result['skipped']} points skipped here, not counted as passed)"
    lines.append(tail)
    return "\n".join(lines)
