"""One source of truth: notebooks/ is generated from solutions/, without outputs or solutions."""
import json
import subprocess
import sys

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


def test_student_copies_hold_no_solution():
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        text = path.read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        assert "tl.rsqrt(" not in text  # the answer lines are gone
        assert "# YOUR CODE HERE" in text
