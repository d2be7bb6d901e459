"""Same grading, compiled on a real GPU (marker gpu; `make test-gpu`). Runtime dependencies only."""
import pytest

from conftest import SOLUTION_04, STUDENT_04, run_cli, write_variant
from mutants import MUTANTS

pytestmark = pytest.mark.gpu


def test_solutions_full_marks_on_gpu():
    report, out = run_cli(SOLUTION_04)
    nb = report["notebooks"][0]
    assert nb["earned"] == nb["possible"], out[-4000:]


def test_stubs_zero_on_gpu():
    report, _ = run_cli(STUDENT_04)
    nb = report["notebooks"][0]
    assert nb["earned"] == 0
    for ex in nb["exercises"]:
        assert ex["status"] == "graded", ex["id"]  # the `pass` stub compiles inside @triton.jit
        assert all("not implemented yet" in c["message"] for c in ex["cases"])


@pytest.mark.parametrize("exercise,name,edits,expect", MUTANTS, ids=[f"{m[0]}:{m[1]}" for m in MUTANTS])
def test_mutants_rejected_on_gpu(tmp_path, exercise, name, edits, expect):
    from autograder import get, grade
    from autograder.notebook import load

    ns, errors = load(write_variant(tmp_path, edits))
    assert not errors
    result = grade(get(exercise), ns)
    assert result["earned"] < result["possible"], name
