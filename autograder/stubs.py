"""The student stub that replaces a solution region, shared by `make notebooks` and nbgrader_config.py.

nbgrader's default stub `raise NotImplementedError()` does not compile inside a @triton.jit body; `pass`
does, and `check()` recognises an untouched stub. Inside a CUDA C string (lesson 03) the Python stub would be
C source, so `CStubs` turns it into the C comment `// YOUR CODE HERE` (`helpers.cudac.c_source` also accepts
the Python form, for notebooks made without it). A find-the-bugs exercise starts from the given buggy code
instead: `GivenStubs` puts the body of the function that the cell's metadata names
(`"norm_kernels": {"stub_from": "<function>"}`) where the stub would be. Needs nbgrader (the `dev` / `instructor` extras); the
grader itself never imports this module.
"""
from __future__ import annotations

import ast
import textwrap

from nbformat.v4 import new_output
from nbgrader.preprocessors import ClearSolutions, NbGraderPreprocessor

from .runner import STUB_MARKER

STUB = f"# {STUB_MARKER}\npass"
C_STUB = f"// {STUB_MARKER}"


def c_stubs(source: str) -> str:
    """Inside triple-quoted strings (CUDA C), turn nbgrader's Python stub lines into one C comment."""
    out, in_string = [], False
    lines = source.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if (in_string and line.strip() == STUB.split("\n")[0] and i + 1 < len(lines)
                and lines[i + 1].strip() == "pass"):
            out.append(line[:len(line) - len(line.lstrip())] + C_STUB)
            i += 2
            continue
        out.append(line)
        if line.count('"""') % 2 == 1:
            in_string = not in_string
        i += 1
    return "\n".join(out)


class CStubs(NbGraderPreprocessor):
    """Runs right after ClearSolutions: the stubs it wrote inside CUDA C strings become C comments."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            cell.source = c_stubs(cell.source)
        return cell, resources


def function_body(source: str, name: str) -> str | None:
    """The body of the top-level function `name` in a cell's source (its lines as written, dedented), or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            lines = source.split("\n")[node.body[0].lineno - 1:node.end_lineno]
            return textwrap.dedent("\n".join(lines))
    return None


def given_stub(source: str, body: str) -> str:
    """Replace the stub (`# YOUR CODE HERE` / `pass`) in a source with `body`, at the stub's indentation."""
    lines = source.split("\n")
    for i, line in enumerate(lines[:-1]):
        if line.strip() == STUB.split("\n")[0] and lines[i + 1].strip() == "pass":
            indent = line[:len(line) - len(line.lstrip())]
            return "\n".join([*lines[:i], textwrap.indent(body, indent), *lines[i + 2:]])
    raise ValueError("given_stub: the source holds no stub to replace")


class GivenStubs(NbGraderPreprocessor):
    """Runs after ClearSolutions: a solution cell whose metadata says `norm_kernels.stub_from: "<function>"` starts
    with that function's body (defined in another cell of the notebook) in place of the empty stub, so a
    find-and-fix-the-bugs exercise hands the student the buggy code to repair where it is graded."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            name = cell.metadata.get("norm_kernels", {}).get("stub_from")
            if cell.cell_type != "code" or not name:
                continue
            bodies = [b for c in nb.cells if c.cell_type == "code" and c is not cell
                      for b in [function_body(c.source, name)] if b is not None]
            if len(bodies) != 1:
                raise ValueError(f"stub_from: {name!r} must be defined in exactly one other cell, found {len(bodies)}")
            cell.source = given_stub(cell.source, bodies[0])
        return nb, resources


def with_course_stubs(preprocessors: list) -> list:
    """A preprocessor list with CStubs and GivenStubs inserted right after ClearSolutions (which must be in it)."""
    if ClearSolutions not in preprocessors:
        raise ValueError("with_course_stubs: the list has no ClearSolutions to follow")
    at = preprocessors.index(ClearSolutions) + 1
    return [*preprocessors[:at], CStubs, GivenStubs, *preprocessors[at:]]


class ScoreRequired(NbGraderPreprocessor):
    """Runs in autograde after Execute, before SaveAutoGrades: a grade cell that calls check(...) must show the
    score check returned. nbgrader gives full credit to a grade cell with no output and no error, so a `check`
    redefined to return nothing, or a grade cell whose call printed no score, would score every point; such a
    cell gets an error output instead (0 points) that says why."""

    def preprocess_cell(self, cell, resources, index):
        nbg = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not nbg.get("grade") or nbg.get("solution") or "check(" not in cell.source:
            return cell, resources
        outputs = cell.get("outputs", [])
        if any(o.get("output_type") == "error" for o in outputs):
            return cell, resources
        scores = [o for o in outputs if o.get("output_type") == "execute_result"
                  and _is_number(o.get("data", {}).get("text/plain", ""))]
        if not scores:
            cell.outputs = [*outputs, new_output(
                "error", ename="NoScore",
                evalue="check(...) showed no score: this grade cell must end with the points that check returns",
                traceback=["NoScore: check(...) showed no score (was check redefined in the notebook?)"])]
        return cell, resources


def _is_number(text) -> bool:
    text = "".join(text) if isinstance(text, list) else str(text)
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


def with_score_required(preprocessors: list) -> list:
    """autograde's preprocessor list with ScoreRequired inserted right before SaveAutoGrades."""
    from nbgrader.preprocessors import SaveAutoGrades
    if SaveAutoGrades not in preprocessors:
        raise ValueError("with_score_required: the list has no SaveAutoGrades to precede")
    at = preprocessors.index(SaveAutoGrades)
    return [*preprocessors[:at], ScoreRequired, *preprocessors[at:]]
