"""Hidden-case grading for the course: `check(id)` in notebooks, `python -m autograder grade` outside.

`check("rmsnorm_fwd")` finds the student's functions in the calling notebook's namespace, runs the
hidden cases, prints a table (case, points, pass/fail, message) and returns the points earned as a
float: the number nbgrader reads as the partial credit of the grade cell (whose points equal the
exercise's). `.fraction` on the result gives earned/possible.
"""
from __future__ import annotations

import inspect

from .registry import get, for_lesson, lessons, EXERCISES  # noqa: F401
from .runner import grade, format_table, unfinished
from .harness import run_guarded, run_launched  # noqa: F401  (visible checks: out-of-bounds stores reported, not crashing)


class CheckResult(float):
    """Points earned (a float for nbgrader) that also carries the case details."""

    def __new__(cls, result: dict):
        obj = super().__new__(cls, float(result["earned"]))
        obj.result = result
        obj.possible = result["possible"]
        obj.fraction = result["earned"] / result["possible"] if result["possible"] else 0.0
        return obj

    def __repr__(self) -> str:  # nbgrader parses text/plain as a float
        return repr(float(self))


def check(exercise_id: str, ns: dict | None = None) -> CheckResult:
    """Run the hidden cases of `exercise_id` on the caller's functions; print a table; return points."""
    ex = get(exercise_id)
    if ns is None:
        frame = inspect.currentframe().f_back
        ns = frame.f_globals
    progress: dict = {}   # the rows graded before the running case (grade's own list)
    try:
        result = grade(ex, ns, on_case=lambda name, rows: progress.update(rows=rows))
    except KeyboardInterrupt:
        # Jupyter's interrupt, or nbgrader's at its cell timeout (interrupt_on_timeout): the cases graded so far
        # keep their points, and no traceback runs through the hidden cases' code (nbgrader's feedback shows it)
        from helpers.env import on_gpu
        result = unfinished(ex, "stopped", "stopped here: interrupted (the cell ran past its time limit, or Ctrl-C): "
                            "is there a loop that never ends, or a call that waits forever?", progress.get("rows"),
                            on_gpu(), "not run: grading was interrupted before it")
    print(format_table(result))
    return CheckResult(result)


__all__ = ["check", "run_guarded", "run_launched", "grade", "format_table", "get", "for_lesson", "lessons", "CheckResult"]
