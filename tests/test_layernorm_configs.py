"""Lesson 05's given launch tables (`rows_per_program_for`, `num_warps_for`): the H100's rules wherever no GPU
measured otherwise, and a GPU's own entries on that GPU (chosen by its name; section 4 and
benchmarks/explore/ln_configs.py have the measurements)."""
import pytest

import helpers
from autograder.notebook import load
from conftest import ROOT

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
POWERS = [2 ** k for k in range(18)]


@pytest.fixture(scope="module")
def ns():
    ns, errors = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not errors, errors
    return ns


def on(monkeypatch, name):
    monkeypatch.setattr(helpers, "on_gpu", lambda: True)
    monkeypatch.setattr(helpers, "device_name", lambda: name)


def h100_rows(N, elt):
    row_bytes = N * elt
    return 1 if row_bytes > 8192 else max(2, min(8, 4096 // row_bytes))


def h100_warps(block, elt):
    return max(4, min(32, block * elt // 1024))


@pytest.mark.parametrize("gpu", [None, H100, "NVIDIA A100-SXM4-80GB", "Tesla T4", "NVIDIA GH200 480GB"])
def test_gpus_without_entries_get_the_h100_rules(ns, monkeypatch, gpu):
    if gpu:
        on(monkeypatch, gpu)
    for elt in (2, 4):
        for n in POWERS:
            assert ns["rows_per_program_for"](n, elt) == h100_rows(n, elt), (gpu, n, elt)
            assert ns["num_warps_for"](n, elt) == h100_warps(n, elt), (gpu, n, elt)
    # the rules themselves, at the points the lesson quotes
    assert ns["rows_per_program_for"](512, 2) == 4 and ns["num_warps_for"](4 * 512, 2) == 4
    assert ns["rows_per_program_for"](2048, 4) == 2 and ns["num_warps_for"](2 * 2048, 4) == 16
    assert ns["num_warps_for"](16384, 2) == 32 and ns["num_warps_for"](65536, 4) == 32


def test_an_h200_uses_its_entries_and_the_h100_rules_elsewhere(ns, monkeypatch):
    on(monkeypatch, H200)
    rows, warps = ns["ROWS_MEASURED"]["H200"], ns["WARPS_MEASURED"]["H200"]
    assert rows and warps
    for elt in (2, 4):
        for n in POWERS:
            want_rows = rows.get((elt, n), h100_rows(n, elt)) if n * elt <= 8192 else 1
            assert ns["rows_per_program_for"](n, elt) == want_rows, (n, elt)
            assert ns["num_warps_for"](n, elt) == warps.get((elt, n * elt // 1024), h100_warps(n, elt)), (n, elt)
    # the launches that section 4 quotes for the H200
    assert ns["rows_per_program_for"](512, 2) == 4 and ns["num_warps_for"](4 * 512, 2) == 2     # N = 512 bf16
    assert ns["num_warps_for"](8192, 2) == 8                                                     # N = 8192 bf16
    assert ns["rows_per_program_for"](2048, 4) == 1 and ns["num_warps_for"](2048, 4) == 8       # N = 2048 fp32
    assert ns["num_warps_for"](16384, 4) == 16 and ns["num_warps_for"](32768, 4) == 32          # fp32 16K, 32K
    # a non-power-of-two N takes its block's entry
    assert ns["rows_per_program_for"](1500, 4) == 1


def test_measured_entries_are_launchable(ns):
    for gpu, entries in ns["ROWS_MEASURED"].items():
        for (elt, n), r in entries.items():
            assert elt in (2, 4) and n & (n - 1) == 0 and n * elt <= 8192, (gpu, elt, n)
            assert r >= 1 and r & (r - 1) == 0 and r * n <= 16384, (gpu, elt, n, r)
    for gpu, entries in ns["WARPS_MEASURED"].items():
        for (elt, kb), w in entries.items():
            assert elt in (2, 4) and kb & (kb - 1) == 0, (gpu, elt, kb)
            assert w in (1, 2, 4, 8, 16, 32), (gpu, elt, kb, w)
