"""Deliberately wrong implementations are rejected, with a message that points at the mistake.

Mutants live per lesson in tests/mutants_NN.py: LESSON (the solution notebook's stem) and MUTANTS,
a list of (exercise id, name, [(old, new), ...], substring expected in a failing case's message[, needs]).
`needs` (default: the module's NEEDS, else None) is "cuda" for a mutant that only running the CUDA C
kernel can catch, "gpu" for a Triton one that only a GPU case catches (rows past 2**31 elements): on a machine that
cannot run it the test is skipped (`make test-gpu` runs it), never passed.
"""
import importlib
import re
from pathlib import Path

import pytest

from autograder import for_lesson, get, grade
from autograder.notebook import load

from conftest import ROOT, write_variant

MODULES = [importlib.import_module(p.stem) for p in sorted(Path(__file__).parent.glob("mutants_*.py"))]
ALL = [(m.LESSON, *mutant[:4], mutant[4] if len(mutant) > 4 else getattr(m, "NEEDS", None))
       for m in MODULES for mutant in m.MUTANTS]


def _id(m) -> str:
    """A test id that is safe to pass back to pytest as a node id: exercise:mutant name."""
    return re.sub(r"[^\w:=+-]+", "_", f"{m[1]}:{m[2]}")


@pytest.mark.parametrize("module", MODULES, ids=[m.LESSON for m in MODULES])
def test_at_least_five_mutants_per_exercise(module):
    exercises = for_lesson(module.LESSON)
    assert exercises, f"{module.__name__}: no exercises registered for {module.LESSON}"
    for ex in exercises:
        assert sum(m[0] == ex.id for m in module.MUTANTS) >= 5, ex.id


def test_every_lesson_has_mutants():
    lessons = {p.stem for p in (ROOT / "solutions").glob("*.ipynb")}
    assert lessons <= {m.LESSON for m in MODULES}, "a lesson without tests/mutants_NN.py"


def assert_rejected(tmp_path, lesson, exercise, name, edits, expect):
    path = write_variant(tmp_path, edits, src=ROOT / "solutions" / f"{lesson}.ipynb")
    ns, errors = load(path)
    assert not errors, errors
    assert_result_rejects(grade_until_rejected(get(exercise), ns, expect), name, expect)


def grade_until_rejected(ex, ns, expect) -> dict:
    """grade() stopped at the first failing case whose message holds `expect` (any failing case when expect is
    empty): the test asks whether the mutant is rejected with that message, and most are by an early case, so CI
    does not grade the rest. The compile-for-a-GPU case (a subprocess) runs last."""
    return grade(ex, ns, cases=sorted(ex.cases, key=lambda c: c.needs == "triton-compile"),
                 until=lambda row: not row["passed"] and not row["skipped"] and (not expect or expect in row["message"]))


def assert_result_rejects(result, name, expect):
    """A graded exercise (in process or from the CLI's JSON) lost points, with `expect` in a message."""
    failed = [c for c in result["cases"] if not c["passed"] and not c["skipped"]]
    assert failed, f"mutant '{name}' scored full marks"
    assert result["earned"] < result["possible"]
    if expect:
        messages = " | ".join(c["message"] for c in failed)
        assert expect in messages, f"no failing case says {expect!r}: {messages[:1500]}"
    assert not any("not implemented yet" in c["message"] for c in failed)


@pytest.mark.parametrize("module", MODULES, ids=[m.LESSON for m in MODULES])
def test_every_mutant_edit_applies(tmp_path, module):
    """Each edit matches the solution exactly once, here too where the mutant itself cannot run."""
    for mutant in module.MUTANTS:
        write_variant(tmp_path, mutant[2], src=ROOT / "solutions" / f"{module.LESSON}.ipynb")


@pytest.mark.parametrize("lesson,exercise,name,edits,expect,needs", ALL, ids=[_id(m) for m in ALL])
def test_mutant_rejected(tmp_path, lesson, exercise, name, edits, expect, needs):
    from helpers.cudac import can_run, has_nvcc
    if needs == "cuda" and can_run():
        pytest.skip(f"caught only by running the kernel: {can_run()} (make test-gpu runs it)")
    if needs == "nvcc" and not has_nvcc():
        pytest.skip("caught by compiling: needs nvcc")
    if needs == "gpu":   # here or not, a fault would break this process's CUDA context for the tests after it
        pytest.skip("caught only on a GPU: make test-gpu runs it, through the CLI in a process of its own")
    assert_rejected(tmp_path, lesson, exercise, name, edits, expect)
