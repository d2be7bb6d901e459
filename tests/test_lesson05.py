"""Lesson 05's given split kernel (one row over several programs that exchange statistics through
atomics). On CPU the interpreter runs programs one after another, so every program but a row's last
gives up waiting and takes the fallback path, and the last one merges: both paths are checked here.
The GPU tests (marker gpu) check long rows, repeated launches, and that the counters end at zero."""
import pytest
import torch

from autograder.notebook import load
from conftest import ROOT
from helpers import Tolerance, compare, layernorm_ref, tolerance_for

LESSON = "05_triton_layernorm"


@pytest.fixture(scope="module")
def ns():
    ns, errors = load(ROOT / "solutions" / f"{LESSON}.ipynb")
    assert not errors, errors
    return ns


def _inputs(shape, dtype, device, offset=0.0, row_pad=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    M, N = shape
    x = (torch.randn(M, N + row_pad, generator=g) * 2 + offset).to(dtype)[:, :N].to(device)
    w = (torch.randn(N, generator=g) * 0.5 + 1).to(dtype).to(device)
    b = (torch.randn(N, generator=g) * 0.5).to(dtype).to(device)
    return x, w, b


def _assert_close(out, x, w, b, eps=1e-5, stat_rtol=1e-5):
    """As the hidden cases judge: rows of mean 1e4 (stat_rtol > 1e-5) allow atol 1e-2 on y, since fp32
    spacing at 1e4 is 1e-3 and y = (x - mean) * rstd inherits the rounding of the mean."""
    y, mean, rstd = out
    y_ref, mean_ref, rstd_ref = layernorm_ref(x, w, b, eps)
    tol = tolerance_for("layernorm", x.dtype)
    if stat_rtol > 1e-5:
        tol = Tolerance(atol=1e-2, rtol=tol.rtol)
    r = compare(y, y_ref, tol, dtype=x.dtype)
    assert r.ok, r.message
    torch.testing.assert_close(mean.double().cpu(), mean_ref.cpu(), rtol=stat_rtol, atol=1e-5)
    torch.testing.assert_close(rstd.double().cpu(), rstd_ref.cpu(), rtol=stat_rtol, atol=0)


@pytest.mark.parametrize("shape,dtype,chunk,kw", [
    ((3, 5000), torch.float32, 1024, {"offset": 1e4}),          # 5 chunks, mean 1e4: exact merge needed
    ((4, 1000), torch.bfloat16, 256, {}),                        # last chunk partial
    ((5, 300), torch.float16, 64, {"row_pad": 9}),               # strided rows
    ((2, 1), torch.float32, None, {}),                           # N = 1: one program, one element
    ((3, 700), torch.float32, 1024, {}),                         # chunk longer than the row: SPLIT = 1
])
def test_split_matches_the_reference_on_both_paths(ns, shape, dtype, chunk, kw):
    x, w, b = _inputs(shape, dtype, ns["DEVICE"], **kw)
    _assert_close(ns["layernorm_fwd_split"](x, w, b, 1e-5, chunk=chunk), x, w, b,
                  stat_rtol=5e-5 if kw.get("offset") else 1e-5)


def test_split_without_weight_and_bias(ns):
    x, _, _ = _inputs((3, 900), torch.float32, ns["DEVICE"], seed=3)
    _assert_close(ns["layernorm_fwd_split"](x, None, None, 1e-5, chunk=128), x, None, None)


@pytest.mark.parametrize("chunk", [1000, 0, -4, 2.0])
def test_split_rejects_a_chunk_that_is_not_a_power_of_two(ns, chunk):
    x, w, b = _inputs((2, 64), torch.float32, ns["DEVICE"])
    with pytest.raises(ValueError, match="chunk must be a power of two"):
        ns["layernorm_fwd_split"](x, w, b, 1e-5, chunk=chunk)


def test_split_rejects_bad_input_before_launching(ns):
    x, w, b = _inputs((2, 64), torch.float32, ns["DEVICE"])
    with pytest.raises(ValueError):
        ns["layernorm_fwd_split"](x, w[:10], b, 1e-5)
    with pytest.raises((ValueError, TypeError)):
        ns["layernorm_fwd_split"](x.to(torch.int32), w, b, 1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype,kw", [
    ((512, 65536), torch.bfloat16, {}),
    ((256, 65536), torch.float32, {"offset": 1e4}),
    ((64, 131072), torch.float32, {}),
    ((300, 40001), torch.float16, {"row_pad": 7}),
])
def test_split_long_rows_on_gpu_leave_the_counters_at_zero(ns, shape, dtype, kw):
    x, w, b = _inputs(shape, dtype, "cuda", **kw)
    first = ns["layernorm_fwd_split"](x, w, b, 1e-5)
    _assert_close(first, x, w, b, stat_rtol=5e-5 if kw.get("offset") else 1e-5)
    for _ in range(20):                                  # repeated launches reuse the cached counters
        again = ns["layernorm_fwd_split"](x, w, b, 1e-5)
    torch.cuda.synchronize()
    _assert_close(again, x, w, b, stat_rtol=5e-5 if kw.get("offset") else 1e-5)
    part, sync = ns["split_workspace"](shape[0], 1, x.device)
    assert int(sync.abs().sum()) == 0, "a launch left its row counters non-zero"
