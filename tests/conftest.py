import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import helpers  # noqa: E402,F401  (interpreter switch before triton)
import autograder  # noqa: E402
from autograder import notebook  # noqa: E402

SOLUTION_04 = ROOT / "solutions" / "04_triton_rmsnorm.ipynb"
STUDENT_04 = ROOT / "notebooks" / "04_triton_rmsnorm.ipynb"


# The slowest CPU tests (seconds on CI's 2 cores, from --durations): collected first, so that `make test`'s workers
# (pytest-xdist, --dist worksteal) start them at once and end on short tests, not with one worker running a
# three-minute test while the other idles (about 2.5 minutes of ci59's 21).
SLOW_FIRST = {
    "test_solutions_score_full_marks_through_the_cli[05_triton_layernorm]": 170,
    "test_solutions_score_full_marks_through_the_cli": 60, "test_lesson_04_autograded_and_fed_back": 88,
    "test_a_check_interrupted_at_the_cell_timeout_keeps_its_points_so_far": 78,
    "test_a_broken_exercise_loses_only_itself": 40, "test_student_stubs_score_zero_and_say_not_implemented": 30,
    "test_cli_checks_every_path_before_grading": 40,
    "test_a_case_hint_is_said_only_when_the_case_without_its_cause_passes": 40,
    "test_released_copy_is_the_student_notebook": 20,
}


def pytest_collection_modifyitems(config, items):
    import torch

    items.sort(key=lambda item: -SLOW_FIRST.get(item.name, SLOW_FIRST.get(item.originalname, 0)))   # stable sort
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (make test-gpu on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def repair_exercises(lesson: str) -> set[str]:
    """Exercises whose student cell starts from given buggy code (metadata `stub_from`) rather than a stub."""
    import ast

    names = set()
    for cell in json.loads((STUDENT_04.parent / f"{lesson}.ipynb").read_text())["cells"]:
        if cell.get("metadata", {}).get("norm_kernels", {}).get("stub_from"):
            names |= {n.name for n in ast.parse("".join(cell["source"])).body if isinstance(n, ast.FunctionDef)}
    return {ex.id for ex in autograder.for_lesson(lesson) if names & set(ex.functions)}


def run_cli(*args, timeout=600, returncode=0):
    """python -m autograder ... in a subprocess; returns the parsed --json report (the exit status must be
    `returncode`, or one of them: 3 where an exercise crashed or timed out)."""
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"grade-{os.getpid()}-{abs(hash(args))}.json"
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, args), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode in ((returncode,) if isinstance(returncode, int) else returncode), proc.stderr[-2000:]
    report = json.loads(out.read_text())
    out.unlink()
    return report, proc.stdout


def write_variant(tmp_path, replacements, src=SOLUTION_04, name=None):
    """A copy of a notebook with exact text replacements in its code cells; each must match once."""
    return notebook.write_variant(src, replacements, tmp_path / (name or src.name))
