"""python -m autograder grade PATH... [--json FILE] [--timeout S] [--exercise ID]

Grades notebooks with runtime dependencies only. Each exercise runs in its own process with a
timeout, so a crash (even a CUDA illegal address) or a hang loses only that exercise.
Cases that cannot run here (needs a GPU) are reported as skipped, never as passed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .registry import for_lesson, get, lessons


def lesson_of(path: Path) -> str:
    stem = path.stem
    for lesson in lessons():
        if stem == lesson or stem.startswith(lesson):
            return lesson
    raise ValueError(f"{path.name}: no lesson matches; known lessons: {lessons()}")


def _failed(ex, status: str, message: str) -> dict:
    return {"id": ex.id, "title": ex.title, "earned": 0, "possible": ex.points, "skipped": 0, "status": status,
            "cases": [{"name": c.name, "points": c.points, "passed": False, "skipped": False, "message": message}
                      for c in ex.cases]}


def grade_in_subprocess(path: Path, ex, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "autograder", "_worker", str(path), ex.id, str(out)]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return _failed(ex, "timeout", f"timed out after {timeout:g} s: an endless loop, or a kernel "
                                          "that never finishes? (the other exercises were graded)")
        if out.exists():
            return json.loads(out.read_text())
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])[:300]
        code = proc.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return _failed(ex, "crashed", f"the grading process crashed ({how}): {tail} "
                                      "(an out-of-bounds access? the other exercises were graded)")


def worker(path: str, exercise_id: str, out: str) -> int:
    from .notebook import load
    from .runner import grade

    ns, errors = load(path)
    result = grade(get(exercise_id), ns)
    result["cell_errors"] = errors
    Path(out).write_text(json.dumps(result))
    return 0


def main(argv=None) -> int:
    from .runner import format_table

    p = argparse.ArgumentParser(prog="python -m autograder")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grade", help="grade notebook files")
    g.add_argument("paths", nargs="+", type=Path)
    g.add_argument("--json", type=Path, help="write per-notebook, per-exercise, per-case results here")
    g.add_argument("--timeout", type=float, default=None, help="seconds per exercise (default: the exercise's)")
    g.add_argument("--exercise", action="append", help="grade only this exercise id (repeatable)")
    w = sub.add_parser("_worker")
    w.add_argument("path"); w.add_argument("exercise"); w.add_argument("out")
    a = p.parse_args(argv)
    if a.cmd == "_worker":
        return worker(a.path, a.exercise, a.out)

    report = {"notebooks": []}
    for path in a.paths:
        if not path.exists():
            p.error(f"no such file: {path}")
        try:
            lesson = lesson_of(path)
        except ValueError as e:
            p.error(str(e))
        exercises = [ex for ex in for_lesson(lesson) if not a.exercise or ex.id in a.exercise]
        results = []
        for ex in exercises:
            res = grade_in_subprocess(path, ex, a.timeout or ex.timeout_s)
            results.append(res)
            print(f"\n{path.name}"); print(format_table(res))
        earned = sum(r["earned"] for r in results)
        possible = sum(r["possible"] for r in results)
        report["notebooks"].append({"path": str(path), "lesson": lesson, "earned": earned, "possible": possible,
                                    "exercises": results})
        print(f"\n{path.name}: {earned}/{possible} points")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1))
    return 0
