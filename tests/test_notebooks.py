"""One source of truth: notebooks/ is generated from solutions/, without outputs or solutions."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT


def test_student_notebooks_are_fresh():
    proc = subprocess.run([sys.executable, "tools/make_notebooks.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_committed_notebooks_have_no_outputs():
    for path in list((ROOT / "solutions").glob("*.ipynb")) + list((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                assert cell.get("outputs") == [] and cell.get("execution_count") is None, path.name


def _solution_only_lines(path):
    """Lines (stripped, >= 16 chars) found inside solution regions and nowhere else in the notebook."""
    inside, outside = set(), set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        region = False
        for line in src.splitlines():
            t = line.strip()
            if t.endswith("### BEGIN SOLUTION"):  # "### ..." in Python, "// ### ..." inside CUDA C strings
                region = True
            elif t.endswith("### END SOLUTION"):
                region = False
            elif len(t) >= 16 and not t.startswith("#"):
                (inside if region else outside).add(t)
    return inside - outside


def test_student_copies_hold_no_solution():
    for sol in (ROOT / "solutions").glob("*.ipynb"):
        student = ROOT / "notebooks" / sol.name
        text = student.read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        assert "# YOUR CODE HERE" in text
        answers = _solution_only_lines(sol)
        assert answers, f"{sol.name}: no solution regions?"
        code = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "code")
        leaked = [a for a in answers if a in code]
        assert not leaked, f"{sol.name}: answer lines in the student copy: {leaked[:3]}"


def _visible_check_output(path, capsys):
    """Run a notebook as a student would, visible checks included; return (printed lines, crashed cells)."""
    from autograder.notebook import load

    capsys.readouterr()
    _, crashed = load(path, quiet=False, run_tags=("visible-check",))
    return capsys.readouterr().out.splitlines(), crashed


@pytest.mark.parametrize("lesson", ["01_pytorch_norms", "02_stable_reductions"])
def test_visible_checks_print_verdicts(lesson, capsys):
    """Lessons 01-02 (plain PyTorch, CPU): every visible check prints a verdict; the solution's are all "ok",
    the untouched student copy's all fail, saying that nothing came back, and no cell crashes."""
    sol, crashed = _visible_check_output(ROOT / "solutions" / f"{lesson}.ipynb", capsys)
    assert not crashed, crashed
    verdicts = [line for line in sol if ": ok (" in line or "FAILED" in line]
    assert len(verdicts) >= 10 and all(": ok (" in line for line in verdicts), sol
    stub, crashed = _visible_check_output(ROOT / "notebooks" / f"{lesson}.ipynb", capsys)
    assert not crashed, crashed
    failed = [line for line in stub if "FAILED" in line]
    assert len(failed) == len(verdicts) and not any(": ok (" in line for line in stub), stub
    assert all("got None" in line for line in failed), failed
