"""The instructor's nbgrader path, end to end (on a CPU grader Triton runs in its interpreter):
`nbgrader generate_assignment` of every lesson from solutions/ with the course's nbgrader_config.py, then for
lesson 04 `nbgrader autograde` of three submissions and `nbgrader generate_feedback`:
- every released notebook is the committed student copy in notebooks/ (lesson 03's CUDA C stubs included);
- the released student copy scores zero on every cell, and autograding it does not fail;
- the solution with one mutant in exercise `rmsnorm_fwd` loses points there and keeps every point of the other
  cells, one of which the submission deleted (put back by add_missing_cells): the solution's own code scores
  full marks through nbgrader there (CI grades the whole solution through the CLI; one nbgrader run of it less);
- the student copy with `check` redefined to return nothing scores zero (ScoreRequired), not nbgrader's full
  credit for a grade cell without output;
- the feedback shows check()'s score table (case names and messages) and nothing of the hidden cases' code;
- lesson 02's solution with a stable_softmax that never returns on 3-D input, autograded with a short cell
  timeout: nbgrader interrupts that check cell, which keeps the points of the cases before the endless one and
  shows the table, not a traceback through the grader; the other cells keep every point.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from autograder import get
from conftest import ROOT, SOLUTION_04, write_variant
from mutants_04 import MUTANTS

pytest.importorskip("nbgrader")
pytest.importorskip("ipykernel")

ASSIGNMENT = "ps04"
NOTEBOOK = SOLUTION_04.name
# never returns on 3-D input; it sleeps in its loop, so that it holds no core of a 2-core CI machine while it waits
HANG = ("def stable_softmax(x, dim=-1):\n", "def stable_softmax(x, dim=-1):\n    import time\n    while x.dim() == 3:\n"
        "        time.sleep(0.05)\n")
HANG_TIMEOUT_S = 40   # of every cell of the hanging submission: lesson 02's check cells take seconds on a CPU
LESSONS = sorted(p.name for p in (ROOT / "solutions").glob("*.ipynb"))


def nbgrader(course, *args):
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--force"], cwd=course, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def earnable_here(exercise: str) -> int:
    """The points of an exercise that can be earned on this machine: a case that needs a GPU (or more GPU memory)
    is skipped, never passed."""
    from autograder.runner import skip_reason
    from helpers import on_gpu

    ex = get(exercise)
    return ex.points - sum(c.points for c in ex.cases if skip_reason(c, on_gpu()))


def grade_cells(course, student, assignment=ASSIGNMENT):
    """{grade cell name: (score, max score)} of one student's submission, from nbgrader's gradebook."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission(assignment, student).notebooks[0]
        return {g.name: (g.score, g.max_score) for g in notebook.grades}


def new_course(root, *lessons):
    """An nbgrader course in `root` with the course's config, each lesson released as its own assignment ("ps03"
    holds 03_pycuda_layernorm.ipynb, and so on). Every test builds the course it needs: under pytest-xdist a shared
    one made the workers that drew its other tests wait minutes for the one building it."""
    root.mkdir(parents=True)
    config = (ROOT / "nbgrader_config.py").read_text()
    (root / "nbgrader_config.py").write_text(config + f'\nc.CourseDirectory.course_id = "normkernels"\n'
                                             f'c.CourseDirectory.root = {str(root)!r}\n')
    for lesson in lessons:
        (root / "source" / f"ps{lesson[:2]}").mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / lesson, root / "source" / f"ps{lesson[:2]}" / lesson)
        nbgrader(root, "generate_assignment", f"ps{lesson[:2]}")
    return root


def submit(course, student, assignment, notebook):
    """`notebook` (a path, or a notebook's JSON as a dict) handed in by `student`."""
    dest = course / "submitted" / student / assignment / (notebook.name if hasattr(notebook, "name") else NOTEBOOK)
    dest.parent.mkdir(parents=True)
    if isinstance(notebook, dict):
        dest.write_text(json.dumps(notebook))
    else:
        shutil.copy(notebook, dest)


@pytest.mark.parametrize("lesson", LESSONS)
def test_released_copy_is_the_student_notebook(tmp_path, lesson):
    # nbgrader's own command with the course's config gives what `make notebooks` committed
    def sources(path):
        return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    course = new_course(tmp_path / "course", lesson)
    released = sources(course / "release" / f"ps{lesson[:2]}" / lesson)
    assert released == sources(ROOT / "notebooks" / lesson)
    assert not any("### BEGIN SOLUTION" in s for s in released)


def test_lesson_04_autograded_and_fed_back(tmp_path):
    """Three submissions of lesson 04 autograded and fed back (minutes on a CPU, so one test: under pytest-xdist,
    tests sharing a course made the workers that drew them wait for the one building it):
    - "stub": the copy as released; "cheat": the same with `check` redefined to return nothing;
    - "mutant": the solution with one mutant in `rmsnorm_fwd`, and another exercise's grade cell deleted."""
    course = new_course(tmp_path / "course", NOTEBOOK)
    released = course / "release" / ASSIGNMENT / NOTEBOOK
    eps_mutant = next(edits for ex, name, edits, _ in MUTANTS if (ex, name) == ("rmsnorm_fwd", "eps outside the sqrt"))
    mutant = json.loads(write_variant(tmp_path, eps_mutant, name="mutant.ipynb").read_text())
    mutant["cells"] = [c for c in mutant["cells"]
                       if c["metadata"].get("nbgrader", {}).get("grade_id") != "check_rmsnorm_fwd_rows"]
    cheat = json.loads(released.read_text())
    setup = next(i for i, c in enumerate(cheat["cells"]) if "import autograder" in "".join(c["source"])
                 or "from autograder" in "".join(c["source"]))
    cheat["cells"].insert(setup + 1, {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                                      "source": "def check(exercise_id):\n    pass\n"})
    for student, notebook in {"stub": released, "mutant": mutant, "cheat": cheat}.items():
        submit(course, student, ASSIGNMENT, notebook)
    nbgrader(course, "autograde", ASSIGNMENT)
    nbgrader(course, "generate_feedback", ASSIGNMENT)

    # the released stub scores zero, also with check redefined (ScoreRequired), not nbgrader's full credit
    for student in ("stub", "cheat"):
        cells = grade_cells(course, student)
        assert len(cells) == 3 and all(score == 0 and possible > 0 for score, possible in cells.values()), \
            (student, cells)
    # the mutant loses points in its exercise only; the others, the deleted grade cell's included, score every
    # point that can be earned here
    cells = grade_cells(course, "mutant")
    score, possible = cells.pop("check_rmsnorm_fwd")
    assert 0 <= score < possible
    here = {ex: earnable_here(ex) for ex in ("rmsnorm_fwd_rows", "rmsnorm_fwd_looped")}
    assert all(0 < here[ex] <= get(ex).points for ex in here)
    assert cells == {f"check_{ex}": (float(here[ex]), float(get(ex).points)) for ex in here}
    # the feedback shows check()'s table, not the hidden cases' code
    html = (course / "feedback" / "mutant" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    failing = [c.name for c in get("rmsnorm_fwd").cases]
    assert failing[0] in html and "FAIL" in html and "constant factor" in html
    assert "Spec(" not in html and "make_inputs" not in html


def test_a_check_interrupted_at_the_cell_timeout_keeps_its_points_so_far(tmp_path):
    """Review instructor2 F3, through nbgrader: its cell timeout interrupts the hanging check cell."""
    lesson_02 = "02_stable_reductions.ipynb"
    course = new_course(tmp_path / "course", lesson_02)
    submit(course, "hang", "ps02", write_variant(tmp_path, [HANG], src=ROOT / "solutions" / lesson_02))
    nbgrader(course, "autograde", "ps02", f"--Execute.timeout={HANG_TIMEOUT_S}")
    nbgrader(course, "generate_feedback", "ps02")
    cells = grade_cells(course, "hang", "ps02")
    ex = get("stable_softmax")
    cases = [c.name for c in ex.cases]
    endless = next(i for i, name in enumerate(cases) if "3-D" in name)
    before = sum(c.points for c in ex.cases[:endless])
    assert before > 0 and cells.pop("check_stable_softmax") == (float(before), float(ex.points))
    assert cells and all(score == possible for score, possible in cells.values()), cells
    html = (course / "feedback" / "hang" / "ps02" / "02_stable_reductions.html").read_text()
    assert "stopped here: interrupted" in html and cases[endless] in html
    assert "most recent call last" not in html and "KeyboardInterrupt" not in html and "autograder/" not in html
