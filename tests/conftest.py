import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import helpers  # noqa: E402,F401  (interpreter switch before triton)
import autograder  # noqa: E402
from autograder import notebook  # noqa: E402

SOLUTION_04 = ROOT / "solutions" / "04_triton_rmsnorm.ipynb"
STUDENT_04 = ROOT / "notebooks" / "04_triton_rmsnorm.ipynb"


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (make test-gpu on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def repair_exercises(lesson: str) -> set[str]:
    """Exercises whose student cell starts from given buggy code (metadata `stub_from`) rather than a stub."""
    import ast

    names = set()
    for cell in json.loads((STUDENT_04.parent / f"{lesson}.ipynb").read_text())["cells"]:
        if cell.get("metadata", {}).get("norm_kernels", {}).get("stub_from"):
            names |= {n.name for n in ast.parse("".join(cell["source"])).body if isinstance(n, ast.FunctionDef)}
    return {ex.id for ex in autograder.for_lesson(lesson) if names & set(ex.functions)}


def run_cli(*args, timeout=600, returncode=0):
    """python -m autograder ... in a subprocess; returns the parsed --json report (the exit status must be
    `returncode`, or one of them: 3 where an exercise crashed or timed out)."""
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"grade-{os.getpid()}-{abs(hash(args))}.json"
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, args), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode in ((returncode,) if isinstance(returncode, int) else returncode), proc.stderr[-2000:]
    report = json.loads(out.read_text())
    out.unlink()
    return report, proc.stdout


def write_variant(tmp_path, replacements, src=SOLUTION_04, name=None):
    """A copy of a notebook with exact text replacements in its code cells; each must match once."""
    return notebook.write_variant(src, replacements, tmp_path / (name or src.name))
