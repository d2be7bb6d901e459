"""python -m autograder grade PATH... [--json FILE] [--timeout S] [--cell-timeout S] [--exercise ID] [--lesson L] [--jobs N]

Grades notebooks with runtime dependencies only. Each exercise runs in its own process (its own session, its
input closed) with a timeout, so a crash (even a CUDA illegal address), a hang or a process left behind loses
only that exercise; the cases graded before a crash keep their result, and the message names the case (or the
notebook's loading) that crashed or ran out of time. Cases that cannot run here (needs a GPU) are reported as
skipped, never as passed. A cell of the notebook that runs longer than --cell-timeout is stopped and recorded
as a cell error, and not run again for the notebook's other exercises. Every path is checked before anything is graded, the JSON is rewritten after each
notebook, and the exit status is 0 when every exercise was graded, 3 when one crashed, timed out or wrote an
invalid result or a file could not be read (the JSON lists them all), 2 for a bad command line, 130 after Ctrl-C.

Grading runs the submission's code in the grading process, as Jupyter and nbgrader do: a student who writes code
against the grader can change what it reports. Lines of a submission that touch the grader and are not in the
student copy of the lesson are listed as "suspicious" (JSON and text), for a look by hand.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .registry import EXERCISES, for_lesson, get, lessons
from .runner import unfinished

ROOT = Path(__file__).resolve().parent.parent
CRASHED = ("crashed", "timeout", "unreadable", "invalid", "interrupted")
CELL_TIMEOUT = 60.0   # seconds a notebook cell may run while the worker loads it (only definitions run there)
# code that reaches into the grader or the process (patching it, or rewriting its result file)
SUSPICIOUS = re.compile(r"\bautograder\b|\batexit\b|sys\.argv|os\._exit|\bdef check\b|\bcheck\s*=[^=]|"
                        r"sys\.modules|__builtins__|\bbuiltins\b|sys\.settrace|\bgc\.get_objects\b|"
                        # switching off what records torch's own functions (the torch modes, the profile hook)
                        r"setprofile|DisableTorchFunction|_disable_current_modes|DisableTorchDispatch|_pop_mode")


def lesson_of(path: Path) -> str:
    """The lesson a notebook belongs to, by its file name: it starts with the lesson's stem, or holds it after a
    prefix that a learning platform adds (`jdoe_1234_01_pytorch_norms.ipynb`)."""
    stem = path.stem
    for lesson in lessons():
        if stem == lesson or stem.startswith(lesson):
            return lesson
    for lesson in lessons():
        if lesson in stem:
            return lesson
    raise ValueError(f"{path}: no lesson matches its name (known: {', '.join(lessons())}); name the lesson "
                     "with --lesson")


def _valid(result: dict, ex) -> bool:
    """The worker's result has every case of the exercise, in order, and its totals add up."""
    try:
        cases = result["cases"]
        return ([(c["name"], c["points"]) for c in cases] == [(c.name, c.points) for c in ex.cases]
                and result["possible"] == ex.points
                and result["earned"] == sum(c["points"] for c in cases if c["passed"] and not c["skipped"]))
    except (KeyError, TypeError):
        return False


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)     # the worker's session: whatever it started goes too
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def grade_in_subprocess(path: Path, ex, timeout: float, gpu: bool = False, cell_timeout: float = CELL_TIMEOUT,
                        stopped_cells: dict | None = None) -> dict:
    """Grade exercise `ex` of notebook `path` in a worker process; its wall time is the result's "seconds".
    stopped_cells: {cell index: why} of cells that ran out of time for another exercise of this notebook; the
    worker does not run them, and the cells that run out of time here are added to it."""
    start, cell_timeout = time.monotonic(), min(cell_timeout, timeout / 2)
    result = _grade_in_subprocess(path, ex, timeout, gpu, cell_timeout, stopped_cells)
    for i in result.pop("stopped_cells", []):
        if stopped_cells is not None:
            stopped_cells.setdefault(i, f"it ran over {cell_timeout:g} s while exercise {ex.id} was graded")
    result["seconds"] = round(time.monotonic() - start, 1)
    return result


# Ctrl-C in main(): no new worker starts, and the running ones are killed (they run in sessions of their own, so
# the terminal's SIGINT does not reach them)
_STOP = threading.Event()
_RUNNING: set = set()
_RUNNING_LOCK = threading.Lock()


def _stop_workers() -> None:
    with _RUNNING_LOCK:
        _STOP.set()
        running = list(_RUNNING)
    for proc in running:
        _kill_group(proc)


def _grade_in_subprocess(path: Path, ex, timeout: float, gpu: bool, cell_timeout: float,
                         stopped_cells: dict | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out, progress, log = Path(tmp) / "result.json", Path(tmp) / "progress.json", Path(tmp) / "log.txt"
        cmd = [sys.executable, "-X", "faulthandler", "-m", "autograder", "_worker", str(path), ex.id, str(out),
               str(progress), "--cell-timeout", str(cell_timeout),
               "--skip-cells", json.dumps({str(i): why for i, why in dict(stopped_cells or {}).items()})]
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONBREAKPOINT="0")
        with open(log, "w") as sink:
            with _RUNNING_LOCK:
                if _STOP.is_set():
                    return unfinished(ex, "interrupted", "not run: grading was interrupted (Ctrl-C)", gpu=gpu)
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                        env=env, start_new_session=True)
                _RUNNING.add(proc)
            try:
                proc.wait(timeout=timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            _kill_group(proc)
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
        if out.exists():
            result = json.loads(out.read_text())
            if _valid(result, ex):
                return result
            return unfinished(ex, "invalid", "the grading process wrote a result that does not match this exercise's "
                                          "cases (the notebook's code changed it?): grade it by hand", gpu=gpu)
        state = json.loads(progress.read_text()) if progress.exists() else {"phase": "starting", "cases": []}
        phase, done = state["phase"], state["cases"]
        if phase in ("starting", "loading"):
            where, done = "while the notebook's cells ran (before any case)", []
        else:
            where = f"in case {phase!r}"
        rest = f"not run: the grading process stopped {where}"
        if timed_out:
            why = "a cell at top level that never ends?" if not done and phase == "loading" else \
                "an endless loop, or a kernel that never finishes?" + ("" if gpu else _slow_in_interpreter(path))
            return unfinished(ex, "timeout", f"timed out after {timeout:g} s {where}: {why} (the other exercises were "
                                          "graded)", done, gpu, rest)
        code = proc.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return unfinished(ex, "crashed", f"the grading process crashed ({how}) {where}: {_crash_summary(log)} (an "
                                      "out-of-bounds access? the other exercises were graded)", done, gpu, rest)


_OWN_COMBINE = re.compile(r"\btl\.(reduce|associative_scan)\s*\(")


def _slow_in_interpreter(path: Path) -> str:
    """A note for a timeout on a CPU: Triton's interpreter runs a tl.reduce or tl.associative_scan with a combine
    function of one's own in Python, pair by pair, minutes where tl.sum takes seconds (review student05 F2)."""
    from .notebook import code_cells
    try:
        found = any(_OWN_COMBINE.search(src) for _, src, _ in code_cells(path))
    except ValueError:
        return ""
    return (" Or a tl.reduce / tl.associative_scan with a combine function of your own: Triton's CPU interpreter "
            "runs it in Python, pair by pair, minutes where tl.sum takes seconds. A correct kernel built that way "
            "is graded on a GPU (or in the notebook, with check(), which has no time limit)") if found else ""


def _crash_summary(log: Path) -> str:
    """What the crashed worker said last: faulthandler's fatal error and the notebook line it was in, or the
    last lines of its output (the helpers' banner left out)."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()
             and not ln.startswith("[helpers]")]
    fatal = next((ln for ln in lines if ln.startswith("Fatal Python error")), None)
    if fatal:
        frame = next((ln for ln in lines if re.match(r'File "<.*-cell-\d+>"', ln)), None)
        return fatal + (f" ({frame})" if frame else "")
    lines = [ln for ln in lines if not ln.startswith(("Extension modules", "Current thread", "Thread 0x"))]
    return " | ".join(lines[-3:])[:300]


def _lesson_defined(ns: dict, lesson: str) -> str | None:
    """Another lesson all of whose graded functions the notebook's namespace defines (a notebook saved under the
    wrong lesson's name), else None."""
    for other in lessons():
        needed = {n for ex in for_lesson(other) for n in ex.functions}
        if other != lesson and needed and all(n in ns for n in needed):
            return other
    return None


def worker(path: str, exercise_id: str, out: str, progress: str | None = None, cell_timeout: float | None = None,
           skip_cells: dict | None = None) -> int:
    from .notebook import load, stopped_cells
    from .runner import grade

    def note(phase: str, cases: list) -> None:
        if progress:
            Path(progress).write_text(json.dumps({"phase": phase, "cases": cases}))

    note("loading", [])
    ns, errors = load(path, cell_timeout=cell_timeout, skip_cells=skip_cells or {})
    ex = get(exercise_id)
    result = grade(ex, ns, on_case=note)
    for c in result["cases"]:
        if c["message"].startswith("not defined: "):
            names = c["message"][len("not defined: "):].split(" (", 1)[0].split(", ")
            if errors:   # the cell that defines it raised: say which
                c["message"] += f"; the notebook's cells raised: {_defining_error(path, names, errors)}"
            if not any(n in ns for n in ex.functions) and (other := _lesson_defined(ns, ex.lesson)):
                c["message"] += (f"; this notebook defines the functions of lesson {other}, not {ex.lesson}: is it "
                                 f"that lesson's notebook under another name? (grade it with --lesson {other})")
        elif (name := re.search(r"NameError: name '(\w+)' is not defined", c["message"])) and (
                cell := _skipped_definition(path, name.group(1))):
            c["message"] += (f" ({name.group(1)} is defined in cell {cell[0]}, tagged {cell[1]}, which the grader "
                             "does not run: define it in the exercise's own cell)")
    result["cell_errors"] = errors
    result["stopped_cells"] = stopped_cells(errors)
    Path(out).write_text(json.dumps(result))
    return 0


def _defines(names) -> re.Pattern:
    """A line that defines one of `names`: `def name(`, `class name`, `name =`, or an import that binds it."""
    alt = "|".join(map(re.escape, names))
    return re.compile(rf"^\s*(?:(?:def|class)\s+(?:{alt})\b|(?:{alt})\s*(?::[^=]*)?=(?!=)|"
                      rf"(?:from\s+\S+\s+)?import\s.*\b(?:{alt})\s*(?:,|$))", re.M)


def _skipped_definition(path, name: str) -> tuple[int, str] | None:
    """(cell index, tag) of a cell that load() skips (tagged visible-check, benchmark or figure) and that defines
    `name`: the student ran it in Jupyter, so the name existed there (review instructor2 A19)."""
    from .notebook import SKIP_TAGS, code_cells

    ran = {i for i, _, _ in code_cells(path)}
    for i, src, meta in code_cells(path, run_tags=SKIP_TAGS):
        if i not in ran and _defines([name]).search(src):
            return i, min(set(meta.get("tags", [])) & SKIP_TAGS)
    return None


def _defining_error(path, names: list, errors: list[str]) -> str:
    """The error of the cell whose code defines one of `names` (_defines), else the first error."""
    from .notebook import code_cells

    cells = {i for i, src, _ in code_cells(path) if _defines(names).search(src)}
    return next((e for e in errors if int(e.split(":", 1)[0].split()[1]) in cells), errors[0])


def suspicious_lines(path: Path, lesson: str) -> list[str]:
    """Lines of the submission's code that touch the grader or the process and are not in the student copy."""
    from .notebook import code_cells

    given = set()
    student = ROOT / "notebooks" / f"{lesson}.ipynb"
    if student.exists():
        given = {ln.strip() for _, src, _ in code_cells(student, run_tags=("visible-check", "benchmark", "figure"))
                 for ln in src.splitlines()}
    found = []
    for i, src, _ in code_cells(path, run_tags=("visible-check", "benchmark", "figure")):
        for ln in src.splitlines():
            if SUSPICIOUS.search(ln) and ln.strip() not in given and not ln.strip().startswith("#"):
                found.append(f"cell {i}: {ln.strip()[:120]}")
    return found


def _readable(path: Path) -> str | None:
    """None when path is a notebook the worker can run, else why not."""
    from .notebook import code_cells
    try:
        code_cells(path)
    except ValueError as e:
        return str(e)
    return None


def main(argv=None) -> int:
    from .runner import format_table

    p = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{grade}")   # _worker is the CLI's own
    g = sub.add_parser("grade", help="grade notebook files")
    g.add_argument("paths", nargs="+", type=Path)
    g.add_argument("--json", type=Path, help="write per-notebook, per-exercise, per-case results here")
    g.add_argument("--timeout", type=float, default=None, help="seconds per exercise (default: the exercise's)")
    g.add_argument("--exercise", action="append", help="grade only this exercise id (repeatable)")
    g.add_argument("--lesson", help="the lesson of every path, where file names do not say it (e.g. 01_pytorch_norms)")
    g.add_argument("--jobs", "-j", type=int, default=1, help="exercises graded at once (default 1)")
    g.add_argument("--cell-timeout", type=float, default=CELL_TIMEOUT,
                   help=f"seconds a notebook cell may run before it is stopped (default {CELL_TIMEOUT:g}, at most "
                        "half the exercise's timeout)")
    w = sub.add_parser("_worker")
    w.add_argument("path"); w.add_argument("exercise"); w.add_argument("out"); w.add_argument("progress", nargs="?")
    w.add_argument("--cell-timeout", type=float); w.add_argument("--skip-cells", type=json.loads, default={})
    a = p.parse_args(argv)
    if a.cmd == "_worker":
        return worker(a.path, a.exercise, a.out, a.progress, a.cell_timeout,
                      {int(i): why for i, why in a.skip_cells.items()})

    # everything the command line says is checked before anything is graded
    if a.timeout is not None and a.timeout <= 0:
        p.error(f"--timeout must be a positive number of seconds, got {a.timeout:g}")
    if a.cell_timeout <= 0:
        p.error(f"--cell-timeout must be a positive number of seconds, got {a.cell_timeout:g}")
    if a.jobs < 1:
        p.error(f"--jobs must be at least 1, got {a.jobs}")
    known = lessons()            # loads the registry
    if a.lesson is not None and a.lesson not in known:
        p.error(f"--lesson {a.lesson}: unknown (known: {', '.join(known)})")
    unknown = [e for e in a.exercise or () if e not in EXERCISES]
    if unknown:
        p.error(f"unknown exercise {', '.join(unknown)} (known: {', '.join(sorted(EXERCISES))})")
    if a.json is not None and (a.json.is_dir() or not a.json.parent.is_dir()
                               or not os.access(a.json.parent, os.W_OK)):
        p.error(f"--json {a.json}: " + ("is a directory" if a.json.is_dir() else
                                         f"cannot write a file in {a.json.parent} (no such directory, or not "
                                         "writable)"))
    problems, plan, seen = [], [], set()
    for path in a.paths:
        if path.is_dir():
            problems.append(f"{path}: is a directory: pass its notebooks ({path}/*.ipynb)")
            continue
        if not path.is_file():
            problems.append(f"{path}: no such file")
            continue
        if path.resolve() in seen:
            print(f"{path}: given twice, graded once", file=sys.stderr)
            continue
        seen.add(path.resolve())
        try:
            lesson = a.lesson or lesson_of(path)
        except ValueError as e:
            problems.append(str(e))
            continue
        plan.append((path, lesson))
    if a.exercise and plan and not any(ex.id in a.exercise for _, lesson in plan for ex in for_lesson(lesson)):
        problems.append(f"--exercise {', '.join(a.exercise)}: in none of the lessons of the notebooks given "
                        f"({', '.join(sorted({lesson for _, lesson in plan}))})")
    if problems:
        p.error("nothing was graded:\n  " + "\n  ".join(problems))

    from helpers.env import on_gpu
    gpu = on_gpu()
    report = {"notebooks": []}
    entries, tasks = [], []
    for path, lesson in plan:
        exercises = [ex for ex in for_lesson(lesson) if not a.exercise or ex.id in a.exercise]
        if not exercises:
            print(f"{path}: none of the exercises asked for belongs to lesson {lesson}", file=sys.stderr)
        entry = {"path": str(path), "lesson": lesson, "earned": 0, "possible": sum(ex.points for ex in exercises),
                 "skipped": 0, "exercises": [None] * len(exercises), "suspicious": [], "status": "graded"}
        why = _readable(path)
        if why:
            entry["status"] = "unreadable"
            entry["exercises"] = [unfinished(ex, "unreadable", f"not graded: {why}", gpu=gpu) for ex in exercises]
        else:
            entry["suspicious"] = suspicious_lines(path, lesson)
            tasks += [(len(entries), k, ex) for k, ex in enumerate(exercises)]
        entries.append(entry)

    def finish(entry) -> None:
        results = entry["exercises"]
        entry["earned"] = sum(r["earned"] for r in results)
        entry["skipped"] = sum(r["skipped"] for r in results)
        if entry["status"] == "graded" and any(r["status"] != "graded" for r in results):
            entry["status"] = "partial"   # some of its exercises crashed, timed out or were invalid
        for res in results:
            print(f"\n{entry['path']}"); print(format_table(res))
        errors = next((r.get("cell_errors") for r in results if r.get("cell_errors")), [])
        if errors:
            print(f"\n{entry['path']}: cells that raised while the notebook ran:\n  " + "\n  ".join(errors))
        if entry["suspicious"]:
            print(f"\n{entry['path']}: code that touches the grader, not in the student copy (check by hand):\n  "
                  + "\n  ".join(entry["suspicious"]))
        skipped = f" ({entry['skipped']} skipped here)" if entry["skipped"] else ""
        print(f"\n{entry['path']}: {entry['earned']}/{entry['possible']} points{skipped}")
        entry["done"] = True
        report["notebooks"] = [{k: v for k, v in e.items() if k != "done"} for e in entries if e.get("done")]
        if a.json:
            a.json.write_text(json.dumps(report, indent=1))

    pending = {i: sum(1 for t in tasks if t[0] == i) for i in range(len(entries))}
    _STOP.clear()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs)
    try:
        for i, entry in enumerate(entries):
            if pending[i] == 0:
                finish(entry)
        stopped = [{} for _ in entries]   # per notebook: cells that ran out of time for one of its exercises
        futures = {pool.submit(grade_in_subprocess, entries[i]["path"], ex, a.timeout or ex.timeout_s, gpu,
                               a.cell_timeout, stopped[i]): (i, k) for i, k, ex in tasks}
        for fut in concurrent.futures.as_completed(futures):
            i, k = futures[fut]
            entries[i]["exercises"][k] = fut.result()
            pending[i] -= 1
            if pending[i] == 0:
                finish(entries[i])
    except KeyboardInterrupt:
        # queued exercises are dropped and running workers killed: without that, the pool's exit waited for every
        # exercise queued (review instructor2 F4)
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_workers()
        print("\ninterrupted: the JSON holds the notebooks finished so far", file=sys.stderr)
        return 130
    finally:
        pool.shutdown(wait=False)
    bad = [(e["path"], r["id"], r["status"]) for e in report["notebooks"] for r in e["exercises"]
           if r["status"] in CRASHED]
    graded = sum(len(e["exercises"]) for e in report["notebooks"])
    said = [f"{p}: unreadable" for p in dict.fromkeys(p for p, _, s in bad if s == "unreadable")]
    said += [f"{p} {i}: {s}" for p, i, s in bad if s != "unreadable"]
    print(f"\n{len(report['notebooks'])} notebook(s), {graded} exercise(s): {graded - len(bad)} graded"
          + (", " + ", ".join(said) if said else ""))
    return 3 if bad else 0
