"""Lesson 01's helpers: the reduce-set picture, op counting, and the claims the notebook makes."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from helpers import norms01  # noqa: E402


@pytest.mark.parametrize("kind,size", [("batch", 4 * 5), ("layer", 6 * 5), ("instance", 5), ("group", 3 * 5)])
def test_reduce_set_sizes(kind, size):
    m = norms01.reduce_set_mask(kind, N=4, C=6, HW=5, groups=2, i=(1, 2))
    assert m.shape == (4, 6, 5) and int(m.sum()) == size
    assert bool(m[1, 2].all())  # element i is in its own set


def test_group_sets_are_consecutive_channels():
    m = norms01.reduce_set_mask("group", N=2, C=6, HW=1, groups=3, i=(0, 3))
    assert m[0, :, 0].tolist() == [False, False, True, True, False, False]


@pytest.mark.parametrize("kwargs", [dict(kind="group", C=6, groups=4), dict(kind="nope"), dict(kind="batch", i=(9, 0))])
def test_reduce_set_mask_rejects_bad_input(kwargs):
    with pytest.raises(ValueError):
        norms01.reduce_set_mask(**kwargs)


def test_reduce_sets_figure_draws_four_panels():
    import matplotlib.pyplot as plt

    fig = norms01.reduce_sets_figure()
    try:
        assert len(fig.axes) == 4
        titles = " ".join(ax.get_title() for ax in fig.axes)
        for name in ("Batch", "Layer", "Instance", "Group"):
            assert name in titles
        fig.canvas.draw()
    finally:
        plt.close(fig)


def test_manual_layer_norm_matches_torch():
    x, w, b = torch.randn(5, 64, dtype=torch.float64), torch.randn(64, dtype=torch.float64), torch.randn(64, dtype=torch.float64)
    torch.testing.assert_close(norms01.manual_layer_norm(x, w, b), F.layer_norm(x, (64,), w, b))


def test_op_counts_and_passes_the_notebook_quotes():
    out = norms01.unfused_vs_fused(M=256, N=512, quiet=True)
    assert out["fused"]["n_ops"] == 1 and out["manual"]["n_ops"] >= 6
    assert out["fused"]["passes"] == pytest.approx(2.0, abs=0.05)
    assert out["manual"]["passes"] == pytest.approx(9.0, abs=0.2)


def test_aten_ops_skips_views():
    x = torch.randn(8, 8)
    ops = norms01.aten_ops(lambda: x.view(64).unsqueeze(0).sum())
    assert [o["op"].split(".")[1] for o in ops] == ["sum"]


def test_unfused_vs_fused_prints_a_table(capsys):
    norms01.unfused_vs_fused(M=64, N=128)
    out = capsys.readouterr().out
    assert "passes over x" in out and "native_layer_norm" in out


def test_tolerances_cover_the_lesson_dtypes():
    for dt in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        assert dt in norms01.TOL
    assert norms01.compute_dtype(torch.bfloat16) == torch.float32
    assert norms01.compute_dtype(torch.float64) == torch.float64


def test_rms_norm_eps_none_is_the_compute_dtype_epsilon():
    # The lesson's claim about eps=None (section 2), kept honest against the installed torch.
    x = torch.full((1, 8), 1e-3)
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        got = F.rms_norm(x.to(dt), (8,), eps=None).double()
        want = F.rms_norm(x.to(dt).double(), (8,), eps=torch.finfo(torch.float32).eps)
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    got = F.rms_norm(x.double(), (8,), eps=None)
    torch.testing.assert_close(got, F.rms_norm(x.double(), (8,), eps=torch.finfo(torch.float64).eps))


def test_torch_cpu_bf16_batch_norm_rounds_its_mean():
    # The note in section 3: torch's CPU bf16 BatchNorm (bf16 or no running stats) rounds the batch mean
    # to bf16, so at a mean of 50 it is off by ~0.1; with float32 running stats it is not. If this
    # fails, torch changed: update the note (the hidden cases hold students to float32 math either way).
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(8, 16, 6, 6, generator=g) + 50).bfloat16()
    ref = F.batch_norm(x.double(), None, None, training=True)
    err_bf16 = (F.batch_norm(x, None, None, training=True).double() - ref).abs().max().item()
    err_f32_stats = (F.batch_norm(x, torch.zeros(16), torch.ones(16), training=True).double() - ref).abs().max().item()
    assert err_bf16 > 0.05 and err_f32_stats < 0.016
