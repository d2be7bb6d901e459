"""Lesson 04's given dispatcher `rmsnorm`: which kernel each row length goes to (by bytes per row, at the
crossovers measured on the H100), and that its answers match the reference on each path. The launches
are counted by the grader's own spy (autograder.harness.student_call), as for lesson 05's dispatcher."""
import pytest
import torch

from autograder.harness import student_call
from autograder.notebook import load
from conftest import ROOT
from helpers import compare, rmsnorm_ref, tolerance_for

ROWS, ONE_ROW, SPLIT = "_rmsnorm_fwd_rows_kernel", "_rmsnorm_fwd_kernel", "_rmsnorm_fwd_split_kernel"


@pytest.fixture(scope="module")
def ns():
    ns, errors = load(ROOT / "solutions" / "04_triton_rmsnorm.ipynb")
    assert not errors, errors
    return ns


@pytest.mark.parametrize("N,dtype,kernel", [
    (512, torch.bfloat16, ROWS),        # 1 KB rows
    (1023, torch.float16, ROWS),        # just under 2 KB
    (512, torch.float32, ONE_ROW),      # 2 KB rows
    (5000, torch.bfloat16, ONE_ROW),
    (32768, torch.float32, ONE_ROW),    # 128 KB rows
    (65536, torch.bfloat16, ONE_ROW),   # 128 KB rows
    (32769, torch.float32, SPLIT),      # just over 128 KB
    (65537, torch.float16, SPLIT),
])
def test_rmsnorm_dispatches_by_bytes_per_row(ns, N, dtype, kernel):
    x = torch.randn(2, N, dtype=dtype, device=ns["DEVICE"])
    w = torch.randn(N, dtype=dtype, device=ns["DEVICE"])
    with student_call() as spy:
        y, rstd = ns["rmsnorm"](x, w, 1e-6)
    assert set(spy.launches) == {kernel}, spy.launches
    y_ref, rstd_ref = rmsnorm_ref(x, w, 1e-6)
    res = compare(y, y_ref, tolerance_for("rmsnorm", dtype), dtype=dtype)
    assert res.ok, res.message
    assert compare(rstd, rstd_ref, tolerance_for("stat", torch.float32), name="rstd").ok
