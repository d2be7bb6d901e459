"""Generate notebooks/ (student copies) from solutions/ with nbgrader's own preprocessors.

Solution regions (### BEGIN SOLUTION ... ### END SOLUTION) become a stub that is valid both in
plain Python and inside a @triton.jit body (`pass`; nbgrader's default `raise NotImplementedError()`
does not compile in a Triton kernel). Inside a CUDA C string (lesson 03) that stub becomes the C
comment `// YOUR CODE HERE`. Outputs are stripped; checksums are computed so nbgrader knows untouched
answer cells. `--check` exits 1 when notebooks/ is stale.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbgrader.preprocessors import (CheckCellMetadata, ClearHiddenTests, ClearMarkScheme, ClearOutput,
                                    ClearSolutions, ComputeChecksums, LockCells)
from traitlets.config import Config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from autograder.stubs import STUB, with_course_stubs  # noqa: E402  (the stubs nbgrader_config.py uses too)


def student_copy(src: Path) -> str:
    nb = nbformat.read(src, as_version=4)
    cfg = Config()
    cfg.ClearSolutions.code_stub = {"python": STUB}
    resources = {}
    for pp in with_course_stubs([LockCells, ClearSolutions, ClearOutput, ClearHiddenTests, ClearMarkScheme,
                            CheckCellMetadata, ComputeChecksums]):
        nb, resources = pp(config=cfg).preprocess(nb, resources)
    for cell in nb.cells:
        cell.pop("id", None)
        if cell.cell_type == "code":
            cell.execution_count = None
    nb.metadata.pop("widgets", None)
    nb.nbformat_minor = 4
    return nbformat.writes(nb) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--check", action="store_true", help="fail if notebooks/ differs from a fresh generation")
    a = p.parse_args(argv)
    stale = []
    for src in sorted((ROOT / "solutions").glob("*.ipynb")):
        dst = ROOT / "notebooks" / src.name
        text = student_copy(src)
        if a.check:
            if not dst.exists() or dst.read_text() != text:
                stale.append(dst.name)
        else:
            dst.parent.mkdir(exist_ok=True)
            dst.write_text(text)
            print("wrote", dst.relative_to(ROOT))
    if stale:
        print("stale student notebooks (run `make notebooks`):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
