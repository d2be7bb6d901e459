"""One source of truth: notebooks/ is generated from solutions/, without outputs or solutions."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT, repair_exercises


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


def test_find_the_bugs_cells_start_from_the_given_buggy_code():
    """A cell marked `stub_from` is handed out holding the named function's body (lesson 05's exercise 2), and the
    stub machinery refuses what it cannot do rather than writing a wrong notebook."""
    from autograder.stubs import STUB, function_body, given_stub

    marked = 0
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        for cell in cells:
            name = cell.get("metadata", {}).get("norm_kernels", {}).get("stub_from")
            if not name:
                continue
            marked += 1
            source = "".join(cell["source"])
            given = [b for s in sources if s != source for b in [function_body(s, name)] if b]
            assert len(given) == 1, (path.name, name)
            own = [n for n in source.split("\n") if n.startswith("def ")][0].split("(")[0][4:]
            assert function_body(source, own) == given[0], (path.name, own)
            assert "YOUR CODE HERE" not in source
    assert marked == 1
    assert given_stub(f"def f(x):\n    # idea\n    {STUB.replace(chr(10), chr(10) + '    ')}\n",
                      "y = x\nreturn y") == "def f(x):\n    # idea\n    y = x\n    return y\n"
    with pytest.raises(ValueError, match="no stub"):
        given_stub("def f(x):\n    return x\n", "return 1")
    assert function_body("def f(:\n", "f") is None and function_body("def g():\n    pass\n", "f") is None


TRITON_LESSONS = ["04_triton_rmsnorm", "05_triton_layernorm"]


def assert_triton_visible_checks(lesson, capsys):
    """Lessons 04-05: the solution's visible checks run without a crash and print only "ok" verdicts (lesson 05's
    dispatcher check: one launch per rule, each "ok"); in the student copy nothing crashes but the find-the-bugs
    cell, which is handed out holding the seed's errors, and no check says "ok" for an exercise left as the stub."""
    sol, crashed = _visible_check_output(ROOT / "solutions" / f"{lesson}.ipynb", capsys)
    assert not crashed, crashed
    verdicts = [line for line in sol if ": ok (" in line or "FAILED" in line or "expected one launch" in line]
    assert len(verdicts) >= 8 and all(": ok (" in line for line in verdicts), sol
    assert not any("FAILED" in line or "got None" in line for line in sol), sol
    if lesson == "05_triton_layernorm":
        launched = [line for line in sol if "launched" in line]
        assert len(launched) == 4 and all(line.endswith(": ok") for line in launched), launched
    stub, crashed = _visible_check_output(ROOT / "notebooks" / f"{lesson}.ipynb", capsys)
    assert len(crashed) == len(repair_exercises(lesson)), crashed
    assert sum("got None" in line for line in stub) >= 2, stub
    assert not any(line.startswith("N=") and line.endswith(": ok") for line in stub), stub


@pytest.mark.parametrize("lesson", TRITON_LESSONS)
def test_triton_visible_checks_run(lesson, capsys):
    assert_triton_visible_checks(lesson, capsys)
