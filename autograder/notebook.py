"""Run a notebook's code cells without Jupyter: runtime dependencies only (json, no nbformat).

Cells that only look (tagged `visible-check`, `benchmark` or `figure`) and nbgrader grade cells that are
not answers (the `check(...)` cells) are skipped, unless their tag is asked for (`run_tags`); IPython magics
and shell lines do nothing (`strip_magics`), except `%time` and `%%time`, which run their code.
A cell that raises is recorded and the rest still run, as they would for a student; with `cell_timeout`, a cell
that runs longer is stopped and recorded the same way (as nbgrader's `interrupt_on_timeout` does).
"""
from __future__ import annotations

import contextlib
import io
import json
import linecache
import os
import re
import signal
import threading
from pathlib import Path

SKIP_TAGS = {"visible-check", "benchmark", "figure"}


class CellTimeout(BaseException):
    """Raised into a cell that ran past load()'s cell_timeout; a BaseException, so `except Exception` in the
    cell does not swallow it (and it is raised again every second, for a bare `except:`)."""


def code_cells(path: str | Path, run_tags=()) -> list[tuple[int, str, dict]]:
    path = Path(path)
    try:
        text = path.read_text()
        nb = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        why = str(e)
        if isinstance(e, json.JSONDecodeError):
            why = ("it is empty (0 bytes)" if not text.strip() else
                   "it is not a notebook's JSON (a .py or other file? open it in Jupyter and save it as .ipynb)"
                   if path.suffix != ".ipynb" or not text.lstrip().startswith("{") else why)
        raise ValueError(f"cannot read notebook {path}: {why}") from None
    if isinstance(nb, dict) and nb.get("nbformat", 4) < 4:
        raise ValueError(f"{path} is an nbformat {nb['nbformat']} notebook: convert it with "
                         "`jupyter nbconvert --to notebook --nbformat 4`")
    if not isinstance(nb, dict) or "cells" not in nb:
        raise ValueError(f"{path} is not a Jupyter notebook (no 'cells')")
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {})
        tags = set(meta.get("tags", []))
        nbg = meta.get("nbgrader", {})
        if tags & (SKIP_TAGS - set(run_tags)) or (nbg.get("grade") and not nbg.get("solution")):
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        out.append((i, src, meta))
    return out


# cell magics whose body runs in the notebook's namespace, as IPython runs it (the others, %%timeit, %%writefile,
# %%bash..., are not run: their body's names never reach the namespace in IPython either, or they act outside it)
RUN_BODY_MAGICS = ("time", "capture")
_CELL_MAGIC = re.compile(r"\s*%%(\w+)")
_ASSIGNED_MAGIC = re.compile(r"^(\s*)([\w.\[\], ]+?)\s*=\s*[%!](?!=)")


def strip_magics(src: str) -> str:
    """Python that runs a cell as IPython would, without a kernel: with IPython installed its own transformer
    (string-aware, the same as Jupyter's), whose `get_ipython()` calls the namespace's stub answers; without it,
    each magic or shell line becomes `pass` at its indentation (the block around it stays a block), and
    `x = %timeit -o f()` / `x = !ls` assign None. A `%%time` or `%%capture` header becomes a blank line (the body
    runs, with its line numbers); the body of any other cell magic does not run."""
    lines = src.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and (m := _CELL_MAGIC.match(lines[first])):
        if m.group(1) not in RUN_BODY_MAGICS:
            return ""
        lines[first] = ""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        inside = _starts_inside_a_string(lines)
        return "\n".join(line if i in inside else _plain_line(line) for i, line in enumerate(lines))
    return TransformerManager().transform_cell("\n".join(lines))


def _starts_inside_a_string(lines: list[str]) -> set[int]:
    """The indices of the lines that begin inside a string literal (a triple-quoted string, or a quoted one whose
    line ends in a backslash): a `%` or `!` at their start is the string's text, not a magic (lesson 03's CUDA C
    sources, a markdown table in a string). A magic or shell line is not scanned for quotes (`!echo it's`)."""
    inside, quote = set(), None          # quote: the delimiter of the string still open after the lines so far
    for n, line in enumerate(lines):
        if quote is not None:
            inside.add(n)
        elif line.lstrip().startswith(("%", "!")) or _ASSIGNED_MAGIC.match(line):
            continue
        i = 0
        while i < len(line):
            if quote is None:
                if line[i] == "#":
                    break
                if line[i] in "'\"":
                    quote = line[i:i + 3] if line[i:i + 3] in ("'''", '"""') else line[i]
                    i += len(quote)
                    continue
            elif line[i] == "\\":
                i += 2                   # an escaped character, a quote included (in a raw string too)
                continue
            elif line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
            i += 1
        if quote is not None and len(quote) == 1 and not line.endswith("\\"):
            quote = None                 # a one-line string left open: Python reports the syntax error
    return inside


def _plain_line(line: str) -> str:
    indent = line[:len(line) - len(line.lstrip())]
    if (m := _ASSIGNED_MAGIC.match(line)) is not None:
        return f"{m.group(1)}{m.group(2)} = None"
    stripped = line.strip()
    if stripped.startswith("%time "):   # %time runs its statement
        return indent + stripped[len("%time "):]
    # `f?` is left alone: a line of a CUDA C string may start or end with `?` (a ternary), and the rules cannot tell
    if stripped.startswith(("%", "!")):
        return indent + "pass"
    return line


class _NoIPython:
    """`get_ipython()` in a notebook run without a kernel: `%time stmt` runs stmt (its names stay, as in IPython),
    every other magic and shell command does nothing and returns None (`!ls` output: an empty list)."""

    def __init__(self, ns: dict):
        self.ns = ns
        self.user_ns = ns

    def run_line_magic(self, name, line, *args, **kwargs):
        if name == "time" and line.strip():
            exec(compile(line, "<%time>", "exec"), self.ns)
        return None

    def run_cell_magic(self, name, line, cell, *args, **kwargs):
        return None

    def system(self, cmd, *args, **kwargs):
        return None

    def getoutput(self, cmd, *args, **kwargs):
        return []

    def __getattr__(self, name):   # anything else a notebook asks of IPython (magic(), events...): a no-op
        return lambda *args, **kwargs: None


def _display(*objs, **kwargs):
    """display() where IPython is missing: prints the objects, as IPython does in a terminal."""
    for obj in objs:
        print(repr(obj))


def load(path: str | Path, quiet: bool = True, run_tags=(), cell_timeout: float | None = None,
         skip_cells=()) -> tuple[dict, list[str]]:
    """Execute the notebook's code cells in a fresh namespace; return (namespace, cell errors).

    run_tags: tags of looking cells to run too, in notebook order (e.g. ("visible-check",) with quiet=False).
    cell_timeout: seconds a cell may run (checked between Python bytecodes, so a single long C call finishes
    first); needs the main thread of a POSIX process, elsewhere it is ignored.
    skip_cells: {cell index: why} of cells not to run (the CLI passes the cells that ran out of time for an
    earlier exercise of the same notebook); each is recorded as a cell error.
    """
    import helpers  # noqa: F401  (switches Triton to the interpreter before any kernel is defined)

    # as in Jupyter: __name__ is "__main__" (code under `if __name__ == "__main__":` runs), display() and
    # get_ipython() exist (the latter's magics are no-ops, see _NoIPython)
    ns: dict = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        from IPython.display import display
    except ImportError:
        display = _display
    shell = _NoIPython(ns)
    ns["display"] = display
    ns["get_ipython"] = lambda: shell
    errors = []
    stem = Path(path).stem
    exit_process, pid = os._exit, os.getpid()

    def exit_refused(code=0):   # a cell that exits the process is a cell error, as sys.exit() is; forks still exit
        if os.getpid() != pid:
            exit_process(code)
        raise SystemExit(f"os._exit({code}) called")

    os._exit = exit_refused
    try:
        _run_cells(path, run_tags, ns, errors, stem, quiet, cell_timeout, dict(skip_cells))
    finally:
        os._exit = exit_process
    return ns, errors


def _time_limit(seconds: float | None):
    """A context in which CellTimeout is raised after `seconds` (and every second after), where signals allow."""
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return contextlib.nullcontext()

    def overrun(signum, frame):
        raise CellTimeout(f"ran over {seconds:g} s and was stopped")

    @contextlib.contextmanager
    def limited():
        previous = signal.signal(signal.SIGALRM, overrun)
        signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    return limited()


def stopped_cells(errors: list[str]) -> list[int]:
    """The indices of the cells that load() stopped at its cell_timeout, read from the errors it returned."""
    return [int(e.split(":", 1)[0].split()[1]) for e in errors if e.split(":", 1)[1].startswith(" ran over ")]


def _run_cells(path, run_tags, ns: dict, errors: list, stem: str, quiet: bool, cell_timeout=None,
               skip_cells=None) -> None:
    skip_cells = skip_cells or {}
    for i, src, _ in code_cells(path, run_tags):
        if i in skip_cells:
            errors.append(f"cell {i}: not run: {skip_cells[i]}")
            continue
        code = strip_magics(src)
        filename = f"<{stem}-cell-{i}>"
        # Triton (and inspect) read kernel source through linecache, as in Jupyter.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink) if quiet else contextlib.nullcontext(), _time_limit(cell_timeout):
                exec(compile(code, filename, "exec"), ns)
        except CellTimeout as e:
            errors.append(f"cell {i}: {e} (a loop at top level that never ends, or work that belongs in a "
                          "function?)")
        except (Exception, SystemExit, KeyboardInterrupt) as e:  # a broken cell: keep going, as in Jupyter
            errors.append(f"cell {i}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])


def write_variant(src: str | Path, replacements, dest: str | Path) -> Path:
    """Write a copy of notebook `src` to `dest` with exact text replacements [(old, new), ...] in its code
    cells (mutants in the tests, kernel variants in benchmarks/explore); each old text must occur once."""
    nb = json.loads(Path(src).read_text())
    for old, new in replacements:
        hits = 0
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if old in text:
                hits += text.count(old)
                cell["source"] = text.replace(old, new)
        if hits != 1:
            raise ValueError(f"replacement target found {hits} times in {src} (the solution changed?): {old!r}")
    dest = Path(dest)
    dest.write_text(json.dumps(nb))
    return dest
