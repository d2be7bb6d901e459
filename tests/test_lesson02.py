"""Lesson 02's helpers: the given state helpers, the experiments behind its prose, and its figures."""
import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import helpers.reductions02 as r02  # noqa: E402
from autograder.cases import stable_reductions as cases  # noqa: E402


def test_first_overflowing_logits_match_the_prose():
    assert r02.first_overflowing_logit(torch.float16) == pytest.approx(11.09375)
    assert math.ceil(r02.first_overflowing_logit(torch.float32)) == 89
    assert math.ceil(r02.first_overflowing_logit(torch.bfloat16)) == 89
    assert math.ceil(r02.first_overflowing_logit(torch.float64)) == 710
    for dt, bits in ((torch.float16, torch.int16), (torch.float32, torch.int32)):
        first = torch.tensor([r02.first_overflowing_logit(dt)], dtype=dt)
        below = (first.view(bits) - 1).view(dt)                      # the next smaller value of dt
        assert torch.isinf(torch.exp(first)).item() and torch.isfinite(torch.exp(below)).item()


def test_naive_softmax_breaks_where_the_lesson_says():
    assert torch.isnan(r02.naive_softmax(torch.tensor([10.0, 50.0, 100.0]))).any()
    assert torch.isnan(r02.naive_softmax(torch.tensor([-1000.0, -1001.0]))).all()
    assert torch.isnan(r02.naive_softmax(torch.tensor([10.0, 12.0]).half())).any()


def test_variance_experiment_shows_cancellation():
    res = r02.variance_error_experiment(ratios=[1.0, 1e4], n=1024, trials=3)
    err = res["errors"]
    assert err["one-pass E[x²]-E[x]²"][1] > 0.1            # noise at mean/std = 1e4
    assert err["two-pass"][1] < 1e-5
    assert err["chunks of 256 + Chan merge"][1] < 1e-4
    assert err["Welford (one value at a time)"][1] < 1e-2
    assert all(e[0] < 1e-5 for e in err.values())            # mean/std = 1: every method is fine


def test_identity_states_and_lane_helpers():
    m, l = r02.softmax_identity((2, 3), torch.float64)
    assert m.shape == (2, 3) and torch.isneginf(m).all() and (l == 0).all() and l.dtype == torch.float64
    assert all((t == 0).all() and t.shape == (4,) for t in r02.welford_empty((4,)))
    assert r02.check_lanes((torch.zeros(32), torch.zeros(32, 3))) == 32
    with pytest.raises(ValueError):
        r02.check_lanes(torch.zeros(31))
    with pytest.raises(TypeError):
        r02.lanes_map(lambda t: t, {"m": torch.zeros(32)})
    out = r02.lanes_map(lambda t: t + 1, (torch.zeros(2), [torch.ones(1)]))
    assert isinstance(out, tuple) and isinstance(out[1], list) and out[1][0].item() == 2


@pytest.mark.parametrize("bad,err", [((torch.arange(3), 4), TypeError), ((torch.zeros(3, 0), 4), ValueError),
                                     ((torch.zeros(3, 4), 0), ValueError), ((torch.zeros(3, 4), 2.0), ValueError),
                                     (([1.0], 4), TypeError)])
def test_check_rows_rejects_bad_input(bad, err):
    with pytest.raises(err):
        r02.check_rows(*bad)


def test_butterfly_partners_pair_up_and_cover_the_warp():
    partners = r02.butterfly_partners()
    reach = [{lane} for lane in range(32)]
    for row in partners:
        assert all(row[row[lane]] == lane for lane in range(32))      # an exchange is mutual
        reach = [reach[lane] | reach[row[lane]] for lane in range(32)]
    assert all(len(r) == 32 for r in reach)


def test_reference_butterfly_matches_a_plain_reduction():
    v = torch.randn(32, 3, dtype=torch.float64)
    out = cases.butterfly_ref(v, lambda a, b: a + b)
    assert torch.allclose(out, v.sum(0).expand(32, 3))
    # a rotation reaches the same sum, which is why the cases use a non-commutative merge to catch it
    rot = cases.butterfly_ref(v, lambda a, b: a + b, partner_of=lambda lane, off: (lane + off) % 32)
    assert torch.allclose(rot, out)
    mats = torch.eye(2, dtype=torch.float64) + 0.3 * torch.randn(32, 2, 2, dtype=torch.float64)
    xor = cases.butterfly_ref(mats, lambda a, b: a @ b)
    rot = cases.butterfly_ref(mats, lambda a, b: a @ b, partner_of=lambda lane, off: (lane + off) % 32)
    assert not torch.allclose(xor, rot)


def test_figures_render():
    import matplotlib.pyplot as plt

    res = r02.variance_error_experiment(ratios=[1.0, 1e2, 1e4], n=512, trials=2)
    fig = r02.plot_variance_error(res)
    assert fig.axes and len(fig.axes[0].lines) >= 5
    fig.canvas.draw()
    fig2 = r02.plot_butterfly()
    fig2.canvas.draw()
    plt.close("all")


def test_torch_special_is_forbidden_like_torch():
    from autograder.harness import student_call

    x = torch.randn(2, 5)
    originals = [getattr(torch.special, n) for n in cases.SOFTMAX_FORBIDDEN if hasattr(torch.special, n)]
    with student_call(forbidden=cases.SOFTMAX_FORBIDDEN) as spy:
        torch.special.softmax(x, -1)
        torch.special.log_softmax(x, -1)
        torch.special.logsumexp(x, -1)
    # each is recorded by name first, then again by the routes below it (torch function, ATen op)
    named = [f for f in spy.forbidden if f.startswith("torch.special.")]
    assert named == ["torch.special.softmax", "torch.special.log_softmax", "torch.special.logsumexp"]
    assert [getattr(torch.special, n) for n in cases.SOFTMAX_FORBIDDEN if hasattr(torch.special, n)] == originals


def test_ascending_offsets_build_another_tree():
    mats = torch.eye(2, dtype=torch.float64) + 0.3 * torch.randn(32, 2, 2, dtype=torch.float64)
    down = cases.butterfly_ref(mats, lambda a, b: a @ b)
    up = cases.butterfly_ref(mats, lambda a, b: a @ b, offsets=cases.OFFSETS[::-1])
    assert not torch.allclose(down, up)                # what the message for ascending offsets relies on
    v = torch.randn(32, dtype=torch.float64)
    assert torch.allclose(cases.butterfly_ref(v, lambda a, b: a + b, offsets=cases.OFFSETS[::-1]), v.sum().expand(32))


def test_fp16_case_of_mean_300_needs_fp32_chunk_statistics():
    """Chunk statistics in fp16 fail the case, in fp32 they pass: the case tests the upcast, not the data."""
    spec = next(s for s in cases.VAR_SPECS if s.dtype == torch.float16 and s.mean == 300.0)
    x = cases.var_input(spec)
    ref_var, _ = cases.var_mean_ref(x, spec.correction)

    def chunked(dtype):
        n = mean = m2 = torch.zeros(x.shape[:-1], dtype=torch.float32)
        for c in x.split(spec.chunk, dim=-1):
            c = c.to(dtype)
            mean_c = c.mean(-1)
            m2_c = ((c - mean_c.unsqueeze(-1)) ** 2).sum(-1)          # fp16: mean_c rounded to 0.25 shifts M2_c
            nb = torch.full_like(n, c.shape[-1])
            delta = mean_c.float() - mean
            n, mean, m2 = n + nb, mean + delta * nb / (n + nb), m2 + m2_c.float() + delta * delta * n * nb / (n + nb)
        return (m2 / (n - spec.correction)).to(x.dtype)

    tol = r02.VAR_TOL[torch.float16]
    assert cases.compare(chunked(torch.float32), ref_var, tol, dtype=x.dtype)
    assert not cases.compare(chunked(torch.float16), ref_var, tol, dtype=x.dtype)


def test_a_stream_whose_state_stayed_the_identity_is_told_so():
    x = torch.randn(3, 13)
    untouched = torch.exp(x - (-math.inf)) / 0.0                      # (m, l) = (-inf, 0): every output +inf
    ok, msg = cases._judge_probs(untouched, x, -1, stream=True)
    assert not ok and "no chunk was merged" in msg
    ok, msg = cases._judge_probs(untouched, x, -1)                    # stable_softmax keeps the overflow hint
    assert not ok and "no chunk was merged" not in msg and "subtract the max" in msg
    big = torch.full((2, 4), 200.0)                                   # exp(200) overflows: not the identity
    ok, msg = cases._judge_probs(torch.exp(big) / 4, big, -1, stream=True)
    assert not ok and "no chunk was merged" not in msg
    merged = torch.exp(x) * 0 + math.inf                              # +inf, though every chunk was merged
    ok, msg = cases._judge_probs(merged, x, -1, stream=True, merges=(2, 3))
    assert not ok and "no chunk was merged" not in msg and "own max m_c" in msg


@pytest.mark.parametrize("route", [
    lambda x: torch._softmax(x, -1, False),
    lambda x: torch._C._VariableFunctions.softmax(x, -1),
    lambda x: torch._C.TensorBase.softmax(x, -1),
    lambda x: torch._safe_softmax(x, -1),
])
def test_private_routes_to_the_softmax_kernel_are_forbidden(route):
    """Every Python route ends in the same ATen op, which the grader's dispatch mode sees; legitimate ops pass."""
    from autograder.harness import student_call

    x = torch.randn(2, 5)
    with student_call(forbidden=cases.SOFTMAX_FORBIDDEN) as spy:
        route(x)
    assert spy.forbidden and "softmax" in spy.forbidden[0]             # the torch function, by its name
    assert any(f.startswith("torch.ops.aten.") and "softmax" in f for f in spy.forbidden)   # and its ATen op
    with student_call(forbidden=cases.SOFTMAX_FORBIDDEN) as spy:
        z = x - x.amax(-1, keepdim=True)
        z.exp() / z.exp().sum(-1, keepdim=True)
    assert spy.forbidden == []


def test_a_stub_that_the_exercise_relies_on_is_named(tmp_path):
    """var_mean_welford written, welford_merge (exercise 3) still the stub: every failure says so."""
    import json

    from autograder import get, grade
    from autograder.notebook import load, write_variant
    from conftest import ROOT

    def cell_defining(path, name):
        cells = json.loads(path.read_text())["cells"]
        return next("".join(c["source"]) for c in cells if f"def {name}(" in "".join(c["source"]))

    student = ROOT / "notebooks" / "02_stable_reductions.ipynb"
    solved = cell_defining(ROOT / "solutions" / "02_stable_reductions.ipynb", "var_mean_welford")
    solved = solved.replace("    ### BEGIN SOLUTION\n", "").replace("    ### END SOLUTION\n", "")
    path = write_variant(student, [(cell_defining(student, "var_mean_welford"), solved)], tmp_path / "var.ipynb")
    ns, _ = load(path)
    result = grade(get("var_mean_welford"), ns, gpu=False)
    failed = [c for c in result["cases"] if not c["passed"]]
    assert failed and all("welford_merge (exercise welford) is still a TODO stub" in c["message"] for c in failed)


@pytest.mark.parametrize("count", ["torch.full(mean_c.shape, float(c.shape[-1]))",     # the default dtype, fp32
                                   "torch.full(mean_c.shape, c.shape[-1])"])            # int64
def test_a_count_of_another_dtype_beside_the_state_is_not_a_precision_loss(tmp_path, count):
    """Whole-number counts are exact in any dtype and the merge promotes them: only mean and M2 are judged by
    dtype (an fp64 input's stream with an fp32 count was told to convert its chunks to fp64)."""
    from autograder import get, grade
    from autograder.notebook import load, write_variant
    from conftest import ROOT

    path = write_variant(ROOT / "solutions" / "02_stable_reductions.ipynb",
                         [("torch.full_like(mean_c, c.shape[-1])", count)], tmp_path / "count.ipynb")
    ns, _ = load(path)
    result = grade(get("var_mean_welford"), ns, gpu=False)
    assert result["earned"] == result["possible"], [c["message"] for c in result["cases"] if not c["passed"]]


def test_a_column_no_chunk_held_is_named_in_the_stream():
    """+inf beside finite outputs in a stream: exp(x - m) overflowed, m below that x (a column left out)."""
    x = torch.tensor([[1.0, 2.0, 300.0, 0.5]])
    m, l = torch.tensor([2.0]), torch.tensor([1.5])                    # column 2 never reached the state
    y = torch.exp(x - m.unsqueeze(-1)) / l.unsqueeze(-1)
    ok, msg = cases._judge_probs(y, x, -1, stream=True, merges=(1, 2))
    assert not ok and "did any chunk hold this column?" in msg and "column 2" in msg
    ok, msg = cases._judge_probs(y, x, -1)                                # stable_softmax: the overflow hint
    assert not ok and "did any chunk hold" not in msg


def test_an_l_that_underflows_in_fp32_is_not_blamed_on_the_merge():
    """Review 02d M5: a row whose l underflows to 0 in fp32 (1e-48 in float64) broke the merge-rule check's relative
    test, and a right merge was told "your online_softmax_merge returned a wrong (m, l)". A floor of fp32's tiny."""
    a = (torch.tensor([0.0]), torch.tensor([0.0]))
    b = (torch.tensor([-110.0]), torch.tensor([1.0]))
    m = torch.maximum(a[0], b[0])
    right = (m, a[1] * torch.exp(a[0] - m) + b[1] * torch.exp(b[0] - m))   # fp32: exp(-110) = 0
    assert float(right[1]) == 0.0
    assert not cases._breaks_merge_rule("online_softmax_merge", a, b, right)
    wrong = (m, torch.tensor([1e-30]))
    assert cases._breaks_merge_rule("online_softmax_merge", a, b, wrong)
