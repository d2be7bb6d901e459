"""Lesson 04's given dispatcher `rmsnorm`: which kernel each row length goes to (by bytes per row, at the
crossovers measured on the H100), and that its answers match the reference on each path."""
import pytest
import torch

from autograder.notebook import load
from conftest import ROOT
from helpers import compare, rmsnorm_ref, tolerance_for

ROUTES = ("rmsnorm_fwd_rows", "rmsnorm_fwd", "rmsnorm_fwd_split")


@pytest.fixture(scope="module")
def ns():
    ns, errors = load(ROOT / "solutions" / "04_triton_rmsnorm.ipynb")
    assert not errors, errors
    return ns


@pytest.mark.parametrize("N,dtype,route", [
    (512, torch.bfloat16, "rmsnorm_fwd_rows"),      # 1 KB rows
    (1023, torch.float16, "rmsnorm_fwd_rows"),      # just under 2 KB
    (512, torch.float32, "rmsnorm_fwd"),            # 2 KB rows
    (5000, torch.bfloat16, "rmsnorm_fwd"),
    (32768, torch.float32, "rmsnorm_fwd"),          # 128 KB rows
    (65536, torch.bfloat16, "rmsnorm_fwd"),         # 128 KB rows
    (32769, torch.float32, "rmsnorm_fwd_split"),    # just over 128 KB
    (65537, torch.float16, "rmsnorm_fwd_split"),
])
def test_rmsnorm_dispatches_by_bytes_per_row(ns, N, dtype, route):
    called = []
    saved = {name: ns[name] for name in ROUTES}
    for name in ROUTES:
        ns[name] = lambda *a, _name=name, **k: called.append(_name) or saved[_name](*a, **k)
    try:
        x = torch.randn(2, N, dtype=dtype, device=ns["DEVICE"])
        w = torch.randn(N, dtype=dtype, device=ns["DEVICE"])
        y, rstd = ns["rmsnorm"](x, w, 1e-6)
    finally:
        ns.update(saved)
    assert called == [route]
    y_ref, rstd_ref = rmsnorm_ref(x, w, 1e-6)
    res = compare(y, y_ref, tolerance_for("rmsnorm", dtype), dtype=dtype)
    assert res.ok, res.message
    assert compare(rstd, rstd_ref, tolerance_for("stat", torch.float32), name="rstd").ok
