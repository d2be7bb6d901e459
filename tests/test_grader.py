"""The grader, both ways: solutions score full marks, untouched stubs score zero without crashing,
and one exercise that raises, hangs or crashes loses only its own points."""
import json
from pathlib import Path

import pytest

from autograder import check, for_lesson, get, grade
from autograder.notebook import load

from conftest import ROOT, SOLUTION_04, STUDENT_04, repair_exercises, run_cli, write_variant

LESSONS = sorted(p.stem for p in (SOLUTION_04.parent).glob("*.ipynb"))


def _grade_cells(path):
    nb = json.loads(path.read_text())
    return {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"]
            if c["metadata"].get("nbgrader", {}).get("grade") and not c["metadata"]["nbgrader"]["solution"]}


def test_lesson_04_exercises():
    assert {ex.id for ex in for_lesson("04_triton_rmsnorm")} == {"rmsnorm_fwd", "rmsnorm_fwd_rows",
                                                                  "rmsnorm_fwd_looped"}


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_exercise_has_at_least_12_hidden_cases(lesson):
    exercises = for_lesson(lesson)
    assert exercises, f"no exercises registered for {lesson}"
    for ex in exercises:
        assert len(ex.cases) >= 12, ex.id


@pytest.mark.parametrize("lesson", LESSONS)
def test_grade_cell_points_match_the_registry(lesson):
    cells = _grade_cells(SOLUTION_04.parent / f"{lesson}.ipynb")
    for ex in for_lesson(lesson):
        cell = cells[f"check_{ex.id}"]
        assert "".join(cell["source"]).strip() == f'check("{ex.id}")'
        assert cell["metadata"]["nbgrader"]["points"] == ex.points, ex.id


@pytest.mark.parametrize("lesson", LESSONS)
def test_solutions_score_full_marks_through_the_cli(lesson):
    """Full marks of what can run here; the rest (CUDA C numerics without a GPU) is skipped, never passed."""
    report, out = run_cli(SOLUTION_04.parent / f"{lesson}.ipynb")
    nb = report["notebooks"][0]
    skipped = sum(ex["skipped"] for ex in nb["exercises"])
    assert nb["possible"] > 0 and nb["earned"] + skipped == nb["possible"], out[-3000:]
    for ex in nb["exercises"]:
        assert ex["status"] == "graded"
        assert not ex.get("cell_errors"), ex["cell_errors"]
        assert all(c["passed"] or c["skipped"] for c in ex["cases"]), ex["id"]
        assert not any(c["passed"] and c["skipped"] for c in ex["cases"]), ex["id"]
        if not any(c["skipped"] for c in ex["cases"]):
            assert ex["earned"] == ex["possible"], ex["id"]


@pytest.mark.parametrize("lesson", LESSONS)
def test_student_stubs_score_zero_and_say_not_implemented(lesson):
    report, _ = run_cli(STUDENT_04.parent / f"{lesson}.ipynb")
    nb = report["notebooks"][0]
    assert nb["earned"] == 0 and nb["possible"] > 0
    repair = repair_exercises(lesson)
    for ex in nb["exercises"]:
        assert ex["status"] == "graded"  # graded, not crashed
        ran = [c for c in ex["cases"] if not c["skipped"]]
        if ex["id"] in repair:   # handed out as the buggy code: its own errors, every case failed
            assert ran and not any(c["passed"] or "not implemented yet" in c["message"] for c in ran), ex["id"]
        else:
            assert all("not implemented yet" in c["message"] for c in ran), ex["id"]


def test_check_returns_points_for_nbgrader_and_prints_the_table(capsys):
    ns, errors = load(SOLUTION_04)
    assert not errors
    score = check("rmsnorm_fwd", ns)
    out = capsys.readouterr().out
    points = get("rmsnorm_fwd").points
    # Triton older than 3.3 cannot compile for a GPU on a CPU: that case is skipped, never counted as passed
    skipped = sum(c["points"] for c in score.result["cases"] if c["skipped"])
    assert float(score) == points - skipped and score.possible == points
    assert repr(score) == repr(float(points - skipped))  # nbgrader parses text/plain
    assert "PASS" in out and f"score: {points - skipped}/{points}" in out


def test_check_reports_missing_functions(capsys):
    score = check("rmsnorm_fwd", {})
    assert float(score) == 0
    assert "not defined: rmsnorm_fwd" in capsys.readouterr().out


def test_a_case_that_needs_more_gpu_memory_than_is_free_is_skipped(monkeypatch):
    """The far-rows case allocates 4 GiB: skipped (never passed) where that much is not free, or with no GPU."""
    import torch

    from autograder.registry import Case
    from autograder.runner import skip_reason

    case = Case("far rows", lambda ns: (True, ""), needs_gpu=True, needs_gib=5)
    assert skip_reason(case, gpu=False) == "needs a CUDA GPU"
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (3 * 2**30, 16 * 2**30))
    assert skip_reason(case, gpu=True) == "needs 5 GiB of free GPU memory (3.0 GiB free here)"
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (6 * 2**30, 16 * 2**30))
    assert skip_reason(case, gpu=True) is None


def test_a_case_that_runs_after_passes_waits_for_every_case_before_it():
    from autograder.registry import Case, Exercise

    ran = []
    last = Case("far rows", lambda ns: (ran.append(1) or True, "ok"), after_passes=True)
    for first_passes in (True, False):
        ex = Exercise("t", "lesson", "t", ("f",), cases=[Case("plain", lambda ns, ok=first_passes: (ok, "m")), last])
        result = grade(ex, {"f": None}, gpu=False)
        assert result["cases"][1]["passed"] is first_passes
        assert first_passes or result["cases"][1]["message"].startswith("not run: it runs once every case")
    assert ran == [1]
    # such cases do not wait on one another (a kernel that reads x twice still gets the far-rows case), and a
    # string says why the case waits
    counted = Case("loads counted", lambda ns: (False, "x read twice"), after_passes="counted once right")
    ex = Exercise("t", "lesson", "t", ("f",), cases=[Case("plain", lambda ns: (False, "m")), counted, last])
    rows = grade(ex, {"f": None}, gpu=False)["cases"]
    assert rows[1]["message"] == "not run: it runs once every case before it passes ('plain' fails); counted once right"
    ex = Exercise("t", "lesson", "t", ("f",), cases=[Case("plain", lambda ns: (True, "m")), counted, last])
    rows = grade(ex, {"f": None}, gpu=False)["cases"]
    assert [r["passed"] for r in rows] == [True, False, True] and ran == [1, 1]


def test_check_rejects_unknown_exercise():
    with pytest.raises(KeyError, match="unknown exercise"):
        check("no_such_exercise", {})


LAUNCH = "    _rmsnorm_fwd_kernel[(M,)](\n"


@pytest.mark.parametrize("kind,edit,status,message", [
    ("raises", "    raise RuntimeError('student bug')\n", "graded", "RuntimeError: student bug"),
    # an endless loop that sleeps: it holds no core of a 2-core CI machine for the 40 s it waits
    ("hangs", "    import time\n    while True:\n        time.sleep(0.05)\n", "timeout", "timed out"),
    ("crashes", "    import os; os.abort()\n", "crashed", "crashed"),
])
def test_a_broken_exercise_loses_only_itself(tmp_path, kind, edit, status, message):
    # one other exercise of the same run (the quickest) shows that the broken one took nothing else down; only the
    # hang needs a short limit, which a loaded 2-core machine must not reach on the other exercise
    path = write_variant(tmp_path, [(LAUNCH, edit + LAUNCH)])
    limit = ["--timeout", "40"] if kind == "hangs" else []
    report, _ = run_cli(path, "--exercise", "rmsnorm_fwd", "--exercise", "rmsnorm_fwd_rows", *limit,
                        returncode=0 if status == "graded" else 3)
    by_id = {ex["id"]: ex for ex in report["notebooks"][0]["exercises"]}
    broken = by_id["rmsnorm_fwd"]
    assert broken["status"] == status and broken["earned"] == 0
    assert message in broken["cases"][0]["message"]     # the first case's call is the first to fail
    if status != "graded":   # the process stopped there: the cases after it did not run, and say so
        assert all(c["message"].startswith("not run: the grading process stopped in case")
                   for c in broken["cases"][1:] if not c["skipped"])
    for other in ("rmsnorm_fwd_rows",):
        assert by_id[other]["earned"] + by_id[other]["skipped"] == by_id[other]["possible"], other
        assert all(c["passed"] or c["skipped"] for c in by_id[other]["cases"]), other


def test_out_of_bounds_write_is_caught(tmp_path, capsys):
    # Store one element past the row: the last row writes into the guard band after y.
    import torch
    from autograder import run_guarded
    path = write_variant(tmp_path, [("tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)",
                                     "tl.store(Y + row * stride_y + cols + 1, y.to(Y.dtype.element_ty), mask=mask)")])
    ns, _ = load(path)
    result = grade(get("rmsnorm_fwd"), ns)
    messages = " | ".join(c["message"] for c in result["cases"] if not c["passed"])
    assert result["earned"] < result["possible"]
    assert "wrote out of bounds" in messages
    capsys.readouterr()
    run_guarded(ns["rmsnorm_fwd"], torch.randn(5, 300), None, 1e-6)   # a visible check's call: fails loudly
    assert capsys.readouterr().out.startswith("FAILED: rmsnorm_fwd wrote out of bounds")


def test_a_visible_check_sees_loads_out_of_bounds_and_rows_read_n_apart(tmp_path, capsys):
    """Review student04 F5/F6: run_guarded names the argument a load overran (not "argument 0"), and guards rows
    of a wider tensor with NaN between them, so that a kernel that takes rows N apart fails the visible check."""
    import torch
    from autograder import run_guarded
    from mutants_04 import FWD_LOAD, MUTANTS
    unmasked = write_variant(tmp_path, [(FWD_LOAD, "x = tl.load(X + row * stride_x + cols + 8, mask=mask, other=0.0)"
                                                   ".to(tl.float32)")], name="unmasked.ipynb")
    ns, _ = load(unmasked)
    run_guarded(ns["rmsnorm_fwd"], torch.randn(5, 300), None, 1e-6)
    assert "read out of bounds: a tl.load reached past the last element of x" in capsys.readouterr().out
    n_apart = next(edits for ex, name, edits, *_ in MUTANTS if name == "ignores the row stride")
    ns, _ = load(write_variant(tmp_path, n_apart, name="n_apart.ipynb"))
    x = torch.randn(5, 337)[:, :300]
    y, _ = run_guarded(ns["rmsnorm_fwd"], x, None, 1e-6)
    assert bool(y[0].isfinite().all()) and bool(y[1:].isnan().any())   # row 1 on read the NaN between the rows
    y, _ = ns["rmsnorm_fwd"](x, None, 1e-6)
    assert bool(y.isfinite().all())   # unguarded, the same kernel reads x's own numbers from the wrong places


def test_a_visible_check_says_what_the_hidden_cases_fail_whatever_the_numbers(tmp_path, capsys):
    """Review student05 F3: run_guarded printed nothing for a launcher that modified x or did the math in PyTorch
    (check() scores such a launcher near zero), and an interpreter error came without check()'s hint."""
    import torch
    from autograder import run_guarded, run_launched

    def in_place(x, weight, eps):
        x.mul_(2)
        return x.clone(), x[:, 0].clone()

    def torch_math(x, weight, eps):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), None

    def raises(x, weight, eps):
        raise TypeError("'float' object cannot be interpreted as an integer")

    x = torch.randn(3, 40)
    before = x.clone()
    run_guarded(in_place, x, None, 1e-6)
    out = capsys.readouterr().out
    assert out.startswith("FAILED: in_place modified its input x: ") and torch.equal(x, before)   # on a copy
    run_guarded(torch_math, x, None, 1e-6)
    assert capsys.readouterr().out.startswith("FAILED: torch_math computed with PyTorch outside the kernel (aten ")
    with pytest.raises(TypeError):
        run_guarded(raises, x, None, 1e-6)
    assert "pass N=N by name" in capsys.readouterr().out
    ns, _ = load(SOLUTION_04)
    y, launched = run_launched(ns["rmsnorm_fwd"], x, None, 1e-6)     # the solution: nothing said, one launch
    assert capsys.readouterr().out == "" and launched == ["_rmsnorm_fwd_kernel(BLOCK_N=64)"], launched


def test_a_timeout_on_a_cpu_names_a_combine_function_of_ones_own(tmp_path):
    """Review student05 F2: a per-lane Welford kernel merged by tl.reduce with its own combine function is right,
    and takes minutes in the interpreter: the CLI's timeout message says so, next to "an endless loop?"."""
    from autograder.cli import _slow_in_interpreter
    assert _slow_in_interpreter(SOLUTION_04) == ""
    path = write_variant(tmp_path, [(LAUNCH, "    m = tl.reduce(x, 0, combine)   # (never run)\n" + LAUNCH)])
    assert "a tl.reduce / tl.associative_scan with a combine function of your own" in _slow_in_interpreter(path)


def test_cli_checks_every_path_before_grading(tmp_path):
    import subprocess, sys
    good = tmp_path / "01_pytorch_norms.ipynb"
    good.write_text(json.dumps({"cells": []}))
    bad = tmp_path / "99_unknown.ipynb"
    bad.write_text(json.dumps({"cells": []}))
    out = tmp_path / "grades.json"
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(good), str(bad), str(tmp_path / "gone"),
                           "--json", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "nothing was graded" in proc.stderr
    assert "no lesson matches" in proc.stderr and "gone: no such file" in proc.stderr
    assert "01_pytorch_norms.ipynb:" not in proc.stdout and not out.exists()    # nothing graded, fast
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(good), "--exercise", "rms_nrom"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "unknown exercise rms_nrom" in proc.stderr
    # review instructor2: a directory, an exercise of no lesson given, a --json that cannot be written (it was found
    # only after grading) are refused before anything runs
    for args, said in [([str(tmp_path)], f"{tmp_path}: is a directory: pass its notebooks"),
                       ([str(good), "--exercise", "rmsnorm_fwd"],
                        "--exercise rmsnorm_fwd: in none of the lessons of the notebooks given (01_pytorch_norms)"),
                       ([str(good), "--json", str(tmp_path / "gone" / "x.json")], "cannot write a file in"),
                       ([str(good), "--json", str(tmp_path)], "is a directory")]:
        proc = subprocess.run([sys.executable, "-m", "autograder", "grade", *args], capture_output=True, text=True,
                              cwd=ROOT)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    help_text = subprocess.run([sys.executable, "-m", "autograder", "--help"], capture_output=True, text=True,
                               cwd=ROOT).stdout
    assert "_worker" not in help_text and "Grades notebooks" in help_text


def test_student_call_restores_everything_when_a_patch_fails(monkeypatch):
    """A Triton without the attribute the harness patches must not leave torch.empty wrapped for the
    next case (before, a half-done set-up stayed in place and every later case recursed)."""
    import torch
    from autograder import harness

    class NoRun:  # a launcher class without .run, as an unknown Triton might have
        pass

    originals = (torch.empty, torch.empty_like, torch.Tensor.new_empty, torch.nn.functional.softmax)
    monkeypatch.setattr(harness, "_triton_launchers", lambda: (NoRun, NoRun))
    with pytest.raises(AttributeError):
        with harness.student_call():
            pass
    assert (torch.empty, torch.empty_like, torch.Tensor.new_empty, torch.nn.functional.softmax) == originals


def test_student_call_runs_without_triton(monkeypatch):
    """Triton installs on Linux only; lessons 01-02 are graded without it (macOS, Windows)."""
    import sys

    import torch
    from autograder.harness import student_call
    monkeypatch.setitem(sys.modules, "triton.runtime.jit", None)           # import of it raises ImportError
    monkeypatch.setitem(sys.modules, "triton.runtime.interpreter", None)
    with student_call() as spy:
        x = torch.empty(3, 4)                                               # still guarded by the harness
        torch.nn.functional.softmax(x.fill_(1.0), dim=-1)
    assert spy.launches == {}


STUB_BODY = "    # YOUR CODE HERE\n    pass\n"


@pytest.mark.parametrize("source,stub", [
    ("def f(x):\n    check(x)\n" + STUB_BODY, True),                               # untouched
    ("def f(x):\n" + STUB_BODY + "    return y.view(x.shape)\n", True),             # lesson 03's given return
    ("class N:\n    def a(self):\n        # YOUR CODE HERE\n        pass\n\n    def b(self):\n", True),
    ("def f(x):\n" + STUB_BODY + "    y = x + 1\n    return y\n", False),         # comment and pass kept, code below
    ("def f(x):\n    # YOUR CODE HERE\n    return x + 1\n", False),                 # comment kept, pass replaced
    ("def f(x):\n    return x + 1\n", False),
    ("__global__ void k() {\n    // YOUR CODE HERE\n}\n", True),
    ("__global__ void k() {\n    // YOUR CODE HERE\n    y[i] = 0.f;\n}\n", False),
    ("__global__ void k() {\n    # YOUR CODE HERE\n    pass\n}\n", True),         # the Python form inside a C string
    ("__global__ void k() {\n    // YOUR CODE HERE\n#pragma unroll\n    for (;;) {}\n}\n", False),   # pragma at column 0
    ("def f(x):\n" + STUB_BODY + "# the idea: scale by rstd\n    y = x * 2\n    return y\n", False),  # a comment, code
])
def test_holds_stub_tells_an_untouched_region_from_a_filled_one(source, stub):
    from autograder.runner import holds_stub
    assert holds_stub(source) is stub


def _grade_student_02(tmp_path, edits, exercise):
    path = write_variant(tmp_path, edits, src=STUDENT_04.parent / "02_stable_reductions.ipynb")
    ns, errors = load(path)
    assert not errors, errors
    failed = [c for c in grade(get(exercise), ns)["cases"] if not c["passed"]]
    assert failed
    return " | ".join(c["message"] for c in failed)


def test_a_kept_todo_comment_does_not_hide_the_real_message(tmp_path):
    """A student who writes below `# YOUR CODE HERE` / `pass` gets the hints, not "not implemented yet"."""
    bug = ("    z = x.float()\n    e = torch.exp(z - z.max())\n"   # one max for the whole tensor
           "    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)\n")
    messages = _grade_student_02(tmp_path, [('    check_float_tensor(x, "x")\n' + STUB_BODY.rstrip(),
                                             '    check_float_tensor(x, "x")\n' + STUB_BODY + bug)], "stable_softmax")
    assert "not implemented yet" not in messages and "amax(dim, keepdim=True)" in messages


def test_a_stub_beside_written_code_is_named_next_to_the_real_message(tmp_path):
    written = "    count = count + 1\n    delta = x - mean\n    mean = mean + delta / count\n" \
              "    m2 = m2 + delta * delta\n    return count, mean, m2\n"   # the update's classic bug
    messages = _grade_student_02(tmp_path, [("    x = x.to(mean.dtype)\n" + STUB_BODY.rstrip(),
                                             "    x = x.to(mean.dtype)\n" + written)], "welford")
    assert "delta*delta overcounts" in messages and "(still a TODO stub: welford_merge)" in messages
    assert "not implemented yet" not in messages


def test_a_case_hint_is_said_only_when_the_case_without_its_cause_passes(tmp_path):
    """The large-mean, outlier and swapped-view cases each carry a hint naming one cause. Padded lanes in the
    variance fail those cases too, and their hints would send the student the wrong way; a one-pass variance
    fails the large-mean case because of the large mean, and is told so."""
    from autograder.cases.layernorm import BIG_MEAN, SPIKE
    from autograder.rowcases import SWAPPED

    solution = ROOT / "solutions" / "05_triton_layernorm.ipynb"

    def failed(edits, name):
        ns, errors = load(write_variant(tmp_path, edits, src=solution, name=name))
        assert not errors, errors
        return {c["name"]: c["message"] for c in grade(get("layernorm_fwd"), ns)["cases"] if not c["passed"]}

    padded = failed([("xc = tl.where(mask, x - mean[:, None], 0.0)", "xc = x - mean[:, None]")], "padded.ipynb")
    big, spike, swapped = (next(m for n, m in padded.items() if key in n) for key in ("mean 1e4", "outlier", "swapped"))
    assert "rstd" in big and BIG_MEAN not in big and SPIKE not in spike and SWAPPED not in swapped
    one_pass = failed([("rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)",
                        "rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N - mean * mean + eps)")], "one_pass.ipynb")
    assert BIG_MEAN in next(m for n, m in one_pass.items() if "mean 1e4" in n)


def test_the_table_wraps_long_case_names_and_messages_instead_of_cutting_them():
    from autograder.runner import format_table

    name = "rows_per_program=4, M=5 (the last program has 1 row of 4)"
    message = "y: 3 of 5 rows wrong " * 8
    table = format_table({"title": "T", "id": "t", "earned": 0, "possible": 2, "cases": [
        {"name": name, "points": 2, "skipped": False, "passed": False, "message": message}]})
    lines = table.splitlines()[2:-1]
    assert " ".join(line[:44].strip() for line in lines).strip() == name
    assert " ".join(line[58:] for line in lines) == message.rstrip()   # wrapped at spaces, none lost
    assert all(len(line) <= 110 for line in lines)
    assert lines[0][45:56] == "  2  FAIL  "


def test_loads_reaching_a_guard_band_are_reported_in_the_interpreter():
    """A load without its mask (rows past M, columns past N) reads the guard band around x; the stores may be
    masked, so only the load gives it away. In the interpreter the harness checks every load's unmasked lanes."""
    import torch
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from autograder.harness import guarded_input, student_call
    if torch.cuda.is_available():
        pytest.skip("the load check is the interpreter's (a GPU has none)")

    @triton.jit
    def copy16(X, Y, N, START, MASKED: tl.constexpr):
        cols = START + tl.arange(0, 16)
        if MASKED:
            x = tl.load(X + cols, mask=(cols >= 0) & (cols < N), other=0.0)
        else:
            x = tl.load(X + cols)
        tl.store(Y + tl.arange(0, 16), x)

    x = guarded_input(torch.arange(10.0))
    y = torch.zeros(16)
    reports = []
    for start, masked in ((0, True), (-3, True), (0, False), (-3, False)):
        with student_call() as spy:
            spy.watch("x", x)
            copy16[(1,)](x, y, 10, start, MASKED=masked)
        reports.append(spy.oob_reads)
    assert reports[0] == [] and reports[1] == []
    assert len(reports[2]) == 1 and "a tl.load reached past the last element of x" in reports[2][0]
    assert "before the first element of x" in reports[3][0] and "mask every load" in reports[3][0]


def test_launches_replayed_in_the_interpreter_stop_at_the_first_access_outside_the_tensors():
    """autograder/loadcheck.py, the GPU's way to the same check: launches recorded (not run), replayed in another
    process where each tensor argument has exactly its view's bytes; the first load or store outside them is said."""
    import torch
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from autograder import loadcheck
    from autograder.gpu_compile import module_text

    @triton.jit
    def copy16(X, Y, N, START, MASKED: tl.constexpr, STORE_ALL: tl.constexpr):
        cols = START + tl.arange(0, 16)
        if MASKED:
            x = tl.load(X + cols, mask=(cols >= 0) & (cols < N), other=0.0)
        else:
            x = tl.load(X + cols)
        if STORE_ALL:
            tl.store(Y + tl.arange(0, 16), x)
        else:
            tl.store(Y + tl.arange(0, 16), x, mask=tl.arange(0, 16) < N)

    x, y = torch.arange(40.0)[10:20], torch.zeros(10)    # x: a view of 10 elements inside a larger storage
    verdicts = []
    for start, masked, store_all in ((0, True, False), (0, False, False), (-3, False, False), (0, True, True)):
        with loadcheck.recording_launches() as launches:
            copy16[(1,)](x, y, 10, start, MASKED=masked, STORE_ALL=store_all)
        assert len(launches) == 1 and launches[0]["grid"] == (1,) and torch.equal(y, torch.zeros(10))  # not run
        verdicts.append(loadcheck.replay_elsewhere(module_text({"copy16": copy16}, ["copy16"]), launches))
    assert verdicts[0] is None
    assert verdicts[1] == ("tl.load", "a tl.load in copy16 reached past the last element of X")
    assert verdicts[2] == ("tl.load", "a tl.load in copy16 reached before the first element of X")
    assert verdicts[3] == ("tl.store", "a tl.store in copy16 reached past the last element of Y")


def test_element_loads_of_a_tensor_are_counted_here_and_in_the_replay():
    """How many times a kernel reads x (lesson 05's "read twice" case): the unmasked lanes of every tl.load that
    fall on x's elements, counted by the Spy in this process and by loadcheck's replay for compiled launches."""
    import torch
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from autograder import loadcheck
    from autograder.gpu_compile import module_text
    from autograder.harness import student_call

    @triton.jit
    def reread(X, W, Y, N, PASSES: tl.constexpr):
        cols = tl.arange(0, 16)
        acc = tl.zeros([16], dtype=tl.float32)
        for _ in range(PASSES):   # each pass reads the N elements of X; the 16 - N masked lanes read nothing
            acc += tl.load(X + cols, mask=cols < N, other=0.0) * tl.load(W + cols, mask=cols < N, other=0.0)
        tl.store(Y + cols, acc, mask=cols < N)

    x, w, y = torch.arange(40.0)[10:20], torch.ones(10), torch.zeros(10)
    for passes in (1, 3):
        with student_call() as spy:
            spy.count_loads(x)
            reread[(1,)](x, w, y, 10, PASSES=passes)
        assert spy.loads_of(x) == 10 * passes and spy.loads_of(w) == 0   # w was not named: not counted
        with loadcheck.recording_launches() as launches:
            reread[(1,)](x, w, y, 10, PASSES=passes)
        loads = []
        assert loadcheck.replay_elsewhere(module_text({"reread": reread}, ["reread"]), launches, loads=loads) is None
        assert loads == [{"X": 10 * passes, "W": 10 * passes, "Y": 0}]
        assert launches[0]["args"][0]["ptr"] == x.data_ptr()   # how a judge finds the argument that is x


def test_cli_survives_messy_submissions(tmp_path):
    """What real submissions do, on lesson 02's quickest exercise: an LMS prefix on the name, cells that exit the
    process or wait for input, a process left running, code that reaches into the grader (listed as suspicious),
    an unreadable file, and a function that segfaults on one case (the cases before it keep their points)."""
    import time
    solution = json.loads((ROOT / "solutions" / "02_stable_reductions.ipynb").read_text())

    def notebook(name, extra=(), edit=None):
        nb = json.loads(json.dumps(solution))
        for cell in nb["cells"]:
            src = "".join(cell["source"])
            if edit and edit[0] in src:
                cell["source"] = src.replace(edit[0], edit[1])
        nb["cells"] += [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
                        for s in extra]
        path = tmp_path / name
        path.write_text(json.dumps(nb))
        return path

    messy = notebook("jdoe_42_02_stable_reductions.ipynb", [
        "import sys\nsys.exit()\n", "import os\nos._exit(0)\n", "name = input('your name: ')\n",
        "import subprocess\nsubprocess.Popen(['sleep', '120'])\n", "import autograder.runner as _runner\n"])
    segv = notebook("02_stable_reductions_segv.ipynb", edit=(
        "    z = x.to(acc_dtype(x.dtype))\n",
        "    if dim == 0:\n        import ctypes; ctypes.string_at(0)\n    z = x.to(acc_dtype(x.dtype))\n"))
    unreadable = tmp_path / "02_stable_reductions_empty.ipynb"
    unreadable.write_text("")
    start = time.monotonic()
    report, out = run_cli(messy, segv, unreadable, "--exercise", "stable_softmax", "--jobs", "2", returncode=3)
    assert time.monotonic() - start < 120          # the sleep left running is not waited for
    by_path = {Path(nb["path"]).name: nb for nb in report["notebooks"]}
    assert list(by_path) == [messy.name, segv.name, unreadable.name]    # the order given
    nb = by_path[messy.name]
    (ex,) = nb["exercises"]
    assert ex["status"] == "graded" and ex["earned"] == ex["possible"] and nb["status"] == "graded"
    assert [e.split(":")[1].strip() for e in ex["cell_errors"]] == ["SystemExit", "SystemExit", "EOFError"]
    first = len(solution["cells"])
    assert nb["suspicious"] == [f"cell {first + 1}: os._exit(0)", f"cell {first + 4}: import autograder.runner as _runner"]
    (ex,) = by_path[segv.name]["exercises"]
    crashed = next(c for c in ex["cases"] if not c["passed"])
    assert ex["status"] == "crashed" and 0 < ex["earned"] < ex["possible"]
    assert by_path[segv.name]["status"] == "partial"     # the notebook: one of its exercises was not graded
    assert "Segmentation fault" in crashed["message"] and "in stable_softmax" in crashed["message"]
    (ex,) = by_path[unreadable.name]["exercises"]
    assert by_path[unreadable.name]["status"] == "unreadable" and ex["status"] == "unreadable"
    assert "cannot read notebook" in ex["cases"][0]["message"]


def test_a_cell_that_never_ends_is_stopped_once_per_notebook(tmp_path):
    """A top-level loop (here one that swallows every exception) becomes a cell error after the cell limit, the
    exercise keeps its points, and the notebook's next exercise does not run that cell again."""
    from autograder.cli import grade_in_subprocess
    nb = json.loads((ROOT / "solutions" / "02_stable_reductions.ipynb").read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                        "source": "while True:\n    try:\n        pass\n    except:\n        pass\n"})
    path = tmp_path / "02_stable_reductions.ipynb"
    path.write_text(json.dumps(nb))
    last, stopped = len(nb["cells"]) - 1, {}
    first = grade_in_subprocess(path, get("butterfly_reduce"), 60, cell_timeout=2, stopped_cells=stopped)
    assert first["status"] == "graded" and first["earned"] == first["possible"]
    assert first["cell_errors"] == [f"cell {last}: ran over 2 s and was stopped (a loop at top level that never "
                                    "ends, or work that belongs in a function?)"]
    assert list(stopped) == [last] and first["seconds"] > 2
    second = grade_in_subprocess(path, get("stable_softmax"), 60, cell_timeout=2, stopped_cells=stopped)
    assert second["earned"] == second["possible"]
    assert second["cell_errors"] == [f"cell {last}: not run: it ran over 2 s while exercise butterfly_reduce "
                                     "was graded"]


def test_a_notebook_under_another_lessons_name_is_named(tmp_path):
    from autograder.cli import grade_in_subprocess
    path = tmp_path / "01_pytorch_norms.ipynb"
    path.write_text((ROOT / "solutions" / "02_stable_reductions.ipynb").read_text())
    result = grade_in_subprocess(path, get("rms_norm"), 60)
    assert result["earned"] == 0
    assert "defines the functions of lesson 02_stable_reductions, not 01_pytorch_norms" in result["cases"][0]["message"]


AUTOTUNED_TILE = [
    ("@triton.jit\ndef _layernorm_fwd_kernel(",
     "@triton.autotune(configs=[triton.Config({}, num_warps=w) for w in (2, 4)], key=[\"N\", \"BLOCK_M\", \"BLOCK_N\"])\n"
     "@triton.jit\ndef _layernorm_fwd_kernel("),
    (",\n        num_warps=num_warps_for(BLOCK_M * BLOCK_N, x.element_size()))\n    return y.reshape(x.shape), mean",
     ")\n    return y.reshape(x.shape), mean"),
]


def test_a_tile_kernel_under_triton_autotune_scores_full_marks(tmp_path, exercise="layernorm_fwd"):
    """Lesson 05's section 4 invites @triton.autotune on the tile kernel. In the interpreter the kernel runs once
    with its first config (Triton's own timing there raises "0 active drivers"); on a GPU the autotuner's ~1000
    timing launches per config are not the call's (tests/test_gpu.py grades the dispatcher that way too)."""
    ns, errors = load(write_variant(tmp_path, AUTOTUNED_TILE, src=ROOT / "solutions" / "05_triton_layernorm.ipynb"))
    assert not errors, errors
    cases = grade(get(exercise), ns)["cases"]
    failed = [(c["name"], c["message"]) for c in cases if not c["passed"] and not c["skipped"]]
    assert not failed, failed
    assert sum(c["passed"] for c in cases) >= 25


BLOCK_POINTER_TILE = [   # review 05e T24: x and y through 2-D block pointers, a documented Triton idiom
    ("    x_ptrs = X + rows[:, None] * stride_x + cols[None, :]\n"
     "    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_last\").to(tl.float32)\n",
     "    x_bp = tl.make_block_ptr(base=X, shape=(M, N), strides=(stride_x, 1), offsets=(tl.program_id(0) * BLOCK_M, 0),\n"
     "                             block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))\n"
     "    x = tl.load(x_bp, boundary_check=(0, 1), padding_option=\"zero\", eviction_policy=\"evict_last\").to(tl.float32)\n"),
    ("    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_first\").to(tl.float32)\n",
     "    x = tl.load(x_bp, boundary_check=(0, 1), padding_option=\"zero\", eviction_policy=\"evict_first\").to(tl.float32)\n"),
    ("    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)\n",
     "    y_bp = tl.make_block_ptr(base=Y, shape=(M, N), strides=(stride_y, 1), offsets=(tl.program_id(0) * BLOCK_M, 0),\n"
     "                             block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))\n"
     "    tl.store(y_bp, y.to(Y.dtype.element_ty), boundary_check=(0, 1))\n"),
]
LIST_RETURN = [("        num_warps=num_warps_for(BLOCK_M * BLOCK_N, x.element_size()))\n"
                "    return y.reshape(x.shape), mean.reshape(x.shape[:-1]), rstd.reshape(x.shape[:-1])\n",
                "        num_warps=num_warps_for(BLOCK_M * BLOCK_N, x.element_size()))\n"
                "    return [y.reshape(x.shape), mean.reshape(x.shape[:-1]), rstd.reshape(x.shape[:-1])]\n")]

REINTERPRET_Y = [   # review 05e T10: an older idiom, still in Triton
    ("    _layernorm_fwd_kernel[(triton.cdiv(M, BLOCK_M),)](\n        x2, y, x2 if weight is None else weight,",
     "    _layernorm_fwd_kernel[(triton.cdiv(M, BLOCK_M),)](\n"
     "        x2, triton.reinterpret(y, {torch.float32: tl.float32, torch.float16: tl.float16,\n"
     "                                   torch.bfloat16: tl.bfloat16}[y.dtype]),\n"
     "        x2 if weight is None else weight,")]
CORRECT_TILES = {"block pointers": BLOCK_POINTER_TILE, "a list returned": LIST_RETURN,
                 "y through triton.reinterpret": REINTERPRET_Y}


@pytest.mark.parametrize("variant", CORRECT_TILES)
def test_correct_tile_kernels_written_otherwise_score_full_marks(tmp_path, variant):
    """Review 05e: a tile kernel through tl.make_block_ptr crashed the grader's load checks (the interpreter hands
    them a bare NumPy mask: 2/34), a launcher returning [y, mean, rstd] scored 6/34 ("must return a tuple"), and y
    passed as triton.reinterpret(y, its tl dtype) 0/34 (its stores "outside every tensor given to the kernel")."""
    edits = CORRECT_TILES[variant]
    ns, errors = load(write_variant(tmp_path, edits, src=ROOT / "solutions" / "05_triton_layernorm.ipynb"))
    assert not errors, errors
    ex = get("layernorm_fwd")
    picked = [c for c in ex.cases if c.name.startswith(("loads stay", "301x781", "64x1151", "3-D", "non-contiguous",
                                                          "rows_per_program=4"))]
    assert len(picked) == 7
    cases = grade(ex, ns, cases=picked)["cases"]
    failed = [(c["name"], c["message"]) for c in cases if not c["passed"]]
    assert not failed, failed


def test_a_cpu_tensor_given_to_a_gpu_kernel_is_told_where_to_allocate():
    """Outputs allocated without device= reach a GPU kernel from CPU memory (review 04d); Triton's own message asks
    "(cpu tensor?)", the grader's says where to allocate them."""
    from autograder.registry import Case
    from autograder.runner import run_case

    def launch(ns):
        raise ValueError("Pointer argument (at 1) cannot be accessed from Triton (cpu tensor?)")
    ok, msg = run_case(Case("a case", launch), {})
    assert not ok and "device=x.device" in msg and msg.startswith("raised ValueError: Pointer argument")


@pytest.mark.parametrize("lesson, exercise, function, valid", [
    ("04_triton_rmsnorm", "rmsnorm_fwd", "rmsnorm_fwd", "x of 3x33, float32"),
    ("02_stable_reductions", "online_softmax", "online_softmax", "x of 3x9, chunk 4"),
    ("01_pytorch_norms", "layer_norm", "layer_norm", "x of 3x8"),
])
def test_a_bad_input_case_whose_valid_call_fails_names_that_call(lesson, exercise, function, valid):
    """The bad-input cases make one valid call first (an untouched stub must not earn the given validation's points);
    when only that call's shape goes wrong, the message names it, not the bad input (review 03d F6)."""
    ns, errors = load(ROOT / "solutions" / f"{lesson}.ipynb")
    assert not errors
    right = ns[function]

    def wrong_on_the_valid_call(x, *args, **kwargs):
        out = right(x, *args, **kwargs)
        if tuple(x.shape) != tuple(int(d) for d in valid.split(",")[0].split()[-1].split("x")):
            return out
        return (out[0] + 1, *out[1:]) if isinstance(out, tuple) else out + 1
    ns[function] = wrong_on_the_valid_call
    ex = get(exercise)
    bad = [c for c in ex.cases if c.name.startswith("bad input") or "bad" in c.name.split(":")[0]]
    assert bad
    rows = grade(ex, ns, cases=bad, gpu=False)["cases"]
    assert all(not r["passed"] and f"a valid call ({valid}) failed first" in r["message"] for r in rows), rows


@pytest.mark.parametrize("ipython", [True, False])
def test_magics_display_and_main_guard_run_as_in_jupyter(tmp_path, monkeypatch, ipython):
    """Review instructor2 F1/F2/F8: a %timeit inside a loop, `t = %timeit -o ...`, `files = !ls`, `f?`, `%time`,
    `%%time` and `%%writefile` cells, display() and get_ipython() in a function, code under
    `if __name__ == "__main__":`: Jupyter runs them all; the grader lost the whole cell (an empty block, a syntax
    error) or the function (NameError). With IPython installed its own transformer is used, without it the grader's
    line rules, which leave the lines of a multi-line string alone."""
    if not ipython:
        for name in ("IPython", "IPython.display", "IPython.core.inputtransformer2"):
            monkeypatch.setitem(__import__("sys").modules, name, None)
    monkeypatch.chdir(tmp_path)
    solution = ROOT / "solutions" / "02_stable_reductions.ipynb"
    extra = [
        "for n in (1, 2):\n    %timeit stable_softmax(torch.randn(4, n))\nt = %timeit -o stable_softmax(torch.ones(2, 2))\n"
        "files = !ls\n" + ("stable_softmax?\n" if ipython else "")
        + "%time probe = stable_softmax(torch.ones(2, 3))\nafter_magics = 1\n",
        "%%time\nfrom_time_cell = 2\n",
        "%%writefile written.txt\nnot_python = [\n",
        "if __name__ == '__main__':\n    main_guard = 3\nget_ipython().run_line_magic('matplotlib', 'inline')\n",
        'kept = """\n%d rows\n!done\n"""\n',   # text of a string, as a CUDA C source has: no magic, no shell line
    ]
    nb = json.loads(solution.read_text())
    nb["cells"] += [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
                    for s in extra]
    path = write_variant(tmp_path, [("    check_float_tensor(x, \"x\")\n",
                                     "    check_float_tensor(x, \"x\")\n    display(x.shape)\n")], src=solution)
    nb_variant = json.loads(path.read_text())
    nb_variant["cells"] += nb["cells"][len(nb_variant["cells"]):]
    path.write_text(json.dumps(nb_variant))
    ns, errors = load(path)
    assert errors == []
    assert ns["after_magics"] == 1 and ns["t"] is None and tuple(ns["probe"].shape) == (2, 3)
    assert ns["from_time_cell"] == 2 and ns["main_guard"] == 3 and "not_python" not in ns
    assert ns["kept"] == "\n%d rows\n!done\n"
    assert not (tmp_path / "written.txt").exists()
    result = grade(get("stable_softmax"), ns, gpu=False)
    assert result["earned"] == result["possible"], [c for c in result["cases"] if not c["passed"]][:1]


def test_an_interrupted_check_keeps_the_points_so_far_and_shows_no_grader_code(capsys):
    """Review instructor2 F3: nbgrader interrupts a cell at its timeout; the KeyboardInterrupt ran up through the
    hidden cases' frames, and the feedback showed their code. check() now ends the table at the stopped case and
    returns the points earned before it. sys.exit() in a graded function fails its case only (F9)."""
    ns, errors = load(ROOT / "solutions" / "02_stable_reductions.ipynb")
    assert not errors
    right, calls = ns["stable_softmax"], []

    def hangs_on_the_third_call(x, dim=-1):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt   # what nbgrader's interrupt raises in a loop that never ends
        return right(x, dim)
    ns["stable_softmax"] = hangs_on_the_third_call
    points = check("stable_softmax", ns)
    out = capsys.readouterr().out
    rows = points.result["cases"]
    assert [r["passed"] for r in rows[:2]] == [True, True] and float(points) == sum(r["points"] for r in rows[:2])
    assert rows[2]["message"].startswith("stopped here: interrupted") and "stopped here" in out
    assert all(r["message"] == "not run: grading was interrupted before it" for r in rows[3:])
    assert len(rows) == len(get("stable_softmax").cases) and "Traceback" not in out

    def exits(x, dim=-1):
        import sys
        sys.exit(1)
    ns["stable_softmax"] = exits
    rows = grade(get("stable_softmax"), ns, gpu=False)["cases"]
    assert all(not r["passed"] and r["message"].startswith("called sys.exit(1)") for r in rows[:-1]), rows[0]


def test_ctrl_c_stops_the_cli_at_once(tmp_path):
    """Review instructor2 F4: after Ctrl-C the pool still ran every queued exercise (the workers live in sessions of
    their own, so the terminal's SIGINT never reaches them) before exiting. Now the running workers are killed and
    the queue dropped."""
    import signal, subprocess, sys, time
    nb = json.loads((ROOT / "solutions" / "02_stable_reductions.ipynb").read_text())
    sleeping = tmp_path / "sleeping"
    nb["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                        "source": f"import time\nopen({str(sleeping)!r}, 'w').close()\ntime.sleep(40)\n"})
    path = tmp_path / "02_stable_reductions.ipynb"
    path.write_text(json.dumps(nb))
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(path), "--cell-timeout", "45",
                             "--timeout", "100"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Ctrl-C once the first exercise's worker sleeps in its cell (four more are queued); a fixed wait sent it, on a
    # loaded machine, while the CLI was still starting
    deadline = time.monotonic() + 60
    while not sleeping.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sleeping.exists(), f"the worker never reached the sleeping cell: {proc.poll()}"
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"still running 60 s after Ctrl-C: {out[-1500:]} {err[-1500:]}")
    assert proc.returncode == 130 and "interrupted" in err, (proc.returncode, err[-2000:])
    assert time.monotonic() - start < 15


def test_a_missing_function_is_blamed_on_the_cell_that_defines_it(tmp_path):
    """Review instructor2 F7: "not defined: welford_merge; the notebook's cells raised: cell 2: No module named
    'seaborn'" quoted the first error, not the cell whose `def welford_merge` failed to compile."""
    from autograder.cli import _defining_error
    cells = ["import seaborn\n", "def welford_update(state, x):\n    return state\n",
             "def welford_merge(a, b)\n    return a\n"]
    path = tmp_path / "02_stable_reductions.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "cells": [
        {"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None} for s in cells]}))
    errors = ["cell 0: ModuleNotFoundError: No module named 'seaborn'", "cell 2: SyntaxError: expected ':'"]
    assert _defining_error(path, ["welford_merge"], errors) == errors[1]
    assert _defining_error(path, ["welford_empty"], errors) == errors[0]


def test_a_missing_function_costs_only_the_cases_that_use_it(tmp_path):
    """Review instructor2 F7 (A28): a syntax error in welford_merge's cell cost the correct welford_update its
    points. Now the cases that use only the functions that are defined run; those that use the missing one (a case
    looking it up, or a student function calling it) say "not defined", with the error of the cell that defines it;
    so do var_mean_welford's, which calls welford_merge."""
    import tempfile

    from autograder.cli import worker

    path = write_variant(tmp_path, [("def welford_merge(a, b):", "def welford_merge(a, b)")],
                         src=ROOT / "solutions" / "02_stable_reductions.ipynb")
    results = {}
    for exercise in ("welford", "var_mean_welford"):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            worker(str(path), exercise, out.name)
            results[exercise] = json.loads(Path(out.name).read_text())
    cases = results["welford"]["cases"]
    update = [c for c in cases if c["name"].startswith("update:")]
    merge = [c for c in cases if c["name"].startswith("merge:")]
    assert update and all(c["passed"] for c in update)
    for c in merge + results["var_mean_welford"]["cases"]:
        assert not c["passed"] and c["message"].startswith("not defined: welford_merge (run the cell that defines it)")
        assert "the notebook's cells raised: cell" in c["message"] and "SyntaxError" in c["message"]

    solution_01 = ROOT / "solutions" / "01_pytorch_norms.ipynb"
    for drop in ("group_norm", "instance_norm"):   # instance_norm calls group_norm
        ns, errors = load(solution_01)
        assert not errors, errors
        del ns[drop]
        cases = grade(get("group_norm"), ns)["cases"]
        of_instance = [c for c in cases if c["name"].startswith("instance_norm")]
        others = [c for c in cases if not c["name"].startswith("instance_norm")]
        assert of_instance and others
        if drop == "group_norm":   # every case fails, instance_norm's when it calls group_norm
            assert all(c["message"] == "not defined: group_norm (run the cell that defines it)" for c in cases)
        else:
            assert all(c["passed"] for c in others)
            assert all(c["message"] == "not defined: instance_norm (run the cell that defines it)"
                       for c in of_instance)


def test_a_helper_defined_in_a_visible_check_cell_is_said_to_be_skipped(tmp_path):
    """Review instructor2 A19: Jupyter ran the visible-check cell that defines the student's helper, the grader
    does not; the NameError says where the helper is and why it is missing."""
    from autograder.cli import worker

    cells = [({"tags": ["visible-check"]}, "def my_max(x, dim):\n    return x.amax(dim, keepdim=True)\n"),
             ({}, "import torch\n\ndef stable_softmax(x, dim=-1):\n    e = torch.exp(x - my_max(x, dim))\n"
                  "    return e / e.sum(dim, keepdim=True)\n")]
    path = tmp_path / "02_stable_reductions.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "cells": [
        {"cell_type": "code", "metadata": m, "source": s, "outputs": [], "execution_count": None} for m, s in cells]}))
    out = tmp_path / "result.json"
    worker(str(path), "stable_softmax", str(out))
    messages = [c["message"] for c in json.loads(out.read_text())["cases"] if not c["passed"]]
    assert messages and all("NameError: name 'my_max' is not defined" in m for m in messages)
    assert all("(my_max is defined in cell 0, tagged visible-check, which the grader does not run" in m
               for m in messages)


def test_a_hint_that_y_and_rstd_share_is_said_once(tmp_path):
    """Review student04 F8: dividing by BLOCK_N scales y and rstd alike, and each said the same five-line hint."""
    from mutants_04 import MUTANTS
    edits = next(e for ex, name, e, *_ in MUTANTS if "/ BLOCK_N + eps" in e[0][1])
    ns, _ = load(write_variant(tmp_path, edits))
    ex = get("rmsnorm_fwd")
    (row,) = grade(ex, ns, cases=[c for c in ex.cases if c.name.startswith("1823x781")])["cases"]
    assert "also rstd:" in row["message"] and "(the same cause as for y)" in row["message"]
    assert row["message"].count("Is eps inside the square root") == 1
