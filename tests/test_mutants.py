"""Deliberately wrong implementations are rejected, with a message that points at the mistake."""
import pytest

from autograder import grade, get
from autograder.notebook import load

from conftest import write_variant
from mutants import MUTANTS


def test_at_least_five_mutants_per_exercise():
    for ex in ("rmsnorm_fwd", "rmsnorm_fwd_rows", "rmsnorm_fwd_looped"):
        assert sum(m[0] == ex for m in MUTANTS) >= 5, ex


@pytest.mark.parametrize("exercise,name,edits,expect", MUTANTS, ids=[f"{m[0]}:{m[1]}" for m in MUTANTS])
def test_mutant_rejected(tmp_path, exercise, name, edits, expect):
    path = write_variant(tmp_path, edits)
    ns, errors = load(path)
    assert not errors, errors
    result = grade(get(exercise), ns)
    failed = [c for c in result["cases"] if not c["passed"]]
    assert failed, f"mutant '{name}' scored full marks"
    assert result["earned"] < result["possible"]
    if expect:
        messages = " | ".join(c["message"] for c in failed)
        assert expect in messages, f"no failing case says {expect!r}: {messages[:1500]}"
    assert not any("not implemented yet" in c["message"] for c in failed)
