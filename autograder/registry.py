"""The exercise registry: the one narrow contract between notebooks and the grader.

An exercise has an id, the lesson (notebook stem) it belongs to, the names of what the student
writes (launcher first; for CUDA C lessons also the source string), the kernels that must be
launched (Triton kernels, or CUDA C kernels by their extern "C" name), and hidden cases.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Case:
    """One hidden case: run(ns) -> (passed, message), given the student's namespace."""
    name: str
    run: Callable[[dict], tuple[bool, str]]
    points: int = 1
    needs_gpu: bool = False
    needs: str | None = None       # "cuda": run CUDA C (GPU, PyCUDA, nvcc); "nvcc": compile CUDA C;
                                   # "sanitizer": run CUDA C under compute-sanitizer (racecheck, memcheck);
                                   # "triton-compile": compile Triton kernels for a GPU (Triton 3.3+);
                                   # "ncu": replay CUDA C launches under Nsight Compute (counts their loads)
    needs_gib: float = 0.0         # free GPU memory the case allocates (skipped, never passed, where there is less)
    error_hints: tuple = ()        # (text in an error, hint): this case's own, said before the exercise's
    after_passes: bool | str = False   # run only when every case before it passed, other such cases aside (it
                                   # could fault on a kernel that reads outside its rows, and a fault breaks the
                                   # process's CUDA context); a string says why instead


class CaseSkipped(Exception):
    """Raised by a case's run when it finds, only as it runs, that it cannot judge here (a profiler denied the
    GPU's counters, say): the case is reported as skipped with this message, never as passed or failed."""


@dataclass
class Exercise:
    id: str
    lesson: str
    title: str
    functions: tuple[str, ...]
    kernels: tuple[str, ...] = ()
    cases: list[Case] = field(default_factory=list)
    timeout_s: float = 180.0
    given: tuple[str, ...] = ()    # names in `functions` that the notebook provides (lesson 05's repaired launcher)
    uses: tuple[str, ...] = ()     # functions of earlier exercises that this one calls (lesson 02's welford_merge)
    error_hints: tuple = ()        # (text in an error, hint): said before the runner's own ERROR_HINTS

    @property
    def needs_cuda(self) -> bool:
        return any(c.needs == "cuda" for c in self.cases)

    @property
    def points(self) -> int:
        return sum(c.points for c in self.cases)


EXERCISES: dict[str, Exercise] = {}


def register(ex: Exercise) -> Exercise:
    if ex.id in EXERCISES:
        raise ValueError(f"exercise {ex.id!r} registered twice")
    if len(ex.cases) == 0:
        raise ValueError(f"exercise {ex.id!r} has no cases")
    EXERCISES[ex.id] = ex
    return ex


def _load_all() -> None:
    """Import every module of autograder.cases once: each registers its exercises on import."""
    import importlib
    import pkgutil

    from . import cases
    for mod in sorted(m.name for m in pkgutil.iter_modules(cases.__path__)):
        importlib.import_module(f"{cases.__name__}.{mod}")


def get(exercise_id: str) -> Exercise:
    _load_all()
    if not isinstance(exercise_id, str):
        raise TypeError(f"exercise id must be a string, got {type(exercise_id).__name__}")
    if exercise_id not in EXERCISES:
        raise KeyError(f"unknown exercise {exercise_id!r}; known: {sorted(EXERCISES)}")
    return EXERCISES[exercise_id]


def for_lesson(lesson: str) -> list[Exercise]:
    _load_all()
    return [ex for ex in EXERCISES.values() if ex.lesson == lesson]


def lessons() -> list[str]:
    _load_all()
    return sorted({ex.lesson for ex in EXERCISES.values()})
