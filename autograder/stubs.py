"""The student stub that replaces a solution region, shared by `make notebooks` and nbgrader_config.py.

nbgrader's default stub `raise NotImplementedError()` does not compile inside a @triton.jit body; `pass`
does, and `check()` recognises an untouched stub. Inside a CUDA C string (lesson 03) the Python stub would be
C source, so `CStubs` turns it into the C comment `// YOUR CODE HERE` (`helpers.cudac.c_source` also accepts
the Python form, for notebooks made without it). Needs nbgrader (the `dev` / `instructor` extras); the
grader itself never imports this module.
"""
from __future__ import annotations

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


def with_c_stubs(preprocessors: list) -> list:
    """A preprocessor list with CStubs inserted right after ClearSolutions (which must be in it)."""
    if ClearSolutions not in preprocessors:
        raise ValueError("with_c_stubs: the list has no ClearSolutions to follow")
    at = preprocessors.index(ClearSolutions) + 1
    return [*preprocessors[:at], CStubs, *preprocessors[at:]]
