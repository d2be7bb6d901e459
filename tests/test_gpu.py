"""Same grading, compiled on a real GPU (marker gpu; `make test-gpu`). Runtime dependencies only.

Only the lessons with GPU kernels (Triton, CUDA C) are run here; lessons 01-02 are CPU PyTorch.
"""
import pytest

from conftest import ROOT, run_cli, write_variant
from test_mutants import ALL, _id

pytestmark = pytest.mark.gpu

GPU_LESSONS = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb") if p.stem >= "03")
GPU_MUTANTS = [m for m in ALL if m[0] in GPU_LESSONS]


@pytest.mark.parametrize("lesson", GPU_LESSONS)
def test_solutions_full_marks_on_gpu(lesson):
    report, out = run_cli(ROOT / "solutions" / f"{lesson}.ipynb")
    nb = report["notebooks"][0]
    assert nb["earned"] == nb["possible"], out[-4000:]


@pytest.mark.parametrize("lesson", GPU_LESSONS)
def test_stubs_zero_on_gpu(lesson):
    report, _ = run_cli(ROOT / "notebooks" / f"{lesson}.ipynb")
    nb = report["notebooks"][0]
    assert nb["earned"] == 0
    for ex in nb["exercises"]:
        assert ex["status"] == "graded", ex["id"]  # the `pass` stub compiles inside @triton.jit
        assert all("not implemented yet" in c["message"] for c in ex["cases"])


@pytest.mark.parametrize("lesson,exercise,name,edits,expect", GPU_MUTANTS,
                         ids=[_id(m) for m in GPU_MUTANTS])
def test_mutants_rejected_on_gpu(tmp_path, lesson, exercise, name, edits, expect):
    from autograder import get, grade
    from autograder.notebook import load

    ns, errors = load(write_variant(tmp_path, edits, src=ROOT / "solutions" / f"{lesson}.ipynb"))
    assert not errors
    result = grade(get(exercise), ns)
    assert result["earned"] < result["possible"], name
