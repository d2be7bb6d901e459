"""Public helpers: correct answers, diagnostics that teach, and clear errors for bad input."""
import json

import pytest
import torch

import helpers
from helpers import bench
from helpers.compare import compare, is_poison, poison_, tolerance_for, Tolerance
from helpers.reference import rmsnorm_ref
from helpers.validate import check_rows_input

TOL = Tolerance(1e-5, 1e-5)


def test_interpreter_mode_without_gpu():
    if not torch.cuda.is_available():
        import os
        assert os.environ.get("TRITON_INTERPRET") == "1"
        assert helpers.device() == "cpu" and not helpers.on_gpu()


def test_rmsnorm_ref_matches_torch():
    x = torch.randn(4, 7, 33)
    w = torch.randn(33)
    y, rstd = rmsnorm_ref(x, w, 1e-5)
    assert y.dtype == torch.float64 and rstd.shape == (4, 7)
    expect = torch.nn.functional.rms_norm(x.double(), (33,), w.double(), 1e-5)
    assert torch.allclose(y, expect, atol=1e-12)


@pytest.mark.parametrize("bad,err", [((None,), TypeError), ((torch.randn(3, 0),), ValueError),
                                     ((torch.randn(3, 4), torch.randn(5)), ValueError)])
def test_rmsnorm_ref_bad_input(bad, err):
    with pytest.raises(err):
        rmsnorm_ref(*bad)


def test_compare_passes_and_reports_error():
    ref = torch.randn(3, 5, dtype=torch.float64)
    assert compare(ref.float(), ref, TOL).ok
    wrong = ref.float().clone()
    wrong[1, 2] += 1
    r = compare(wrong, ref, TOL)
    assert not r.ok and "(1, 2)" in r.message and "atol=1e-05" in r.message


def test_a_wrong_tail_of_columns_names_the_mask_in_both_languages():
    """Columns from 32 on wrong in every row: a Triton mask, or CUDA C threads past the row that return before
    the reduction (review 03c R18); the hint speaks to both."""
    ref = torch.randn(4, 40, dtype=torch.float64)
    wrong = ref.float().clone()
    wrong[:, 32:] += 1
    m = compare(wrong, ref, TOL).message
    assert "only columns >= 32 are wrong" in m and "cols < N in Triton" in m and "threads past the row" in m


def test_compare_order_shape_dtype_device_unwritten_nan():
    ref = torch.ones(2, 3, dtype=torch.float64)
    assert "shape" in compare(torch.ones(3, 2), ref, TOL).message
    assert "dtype" in compare(torch.ones(2, 3, dtype=torch.float16), ref, TOL, dtype=torch.float32).message
    assert "got None" in compare(None, ref, TOL).message
    y = torch.ones(2, 3)
    poison_(y[:, 2:])
    assert is_poison(y).sum() == 2
    assert "never written" in compare(y, ref, TOL).message
    y = torch.ones(2, 3)
    y[0, 0] = float("nan")
    m = compare(y, ref, TOL).message
    assert "NaN/Inf" in m and "never written" not in m


def test_compare_nan_is_never_a_wildcard():
    ref = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    assert compare(torch.tensor([float("nan"), 1.0]), ref, TOL).ok
    assert not compare(torch.tensor([0.0, 1.0]), ref, TOL).ok


def test_compare_hints():
    ref = torch.randn(4, 10, dtype=torch.float64).abs() + 0.5
    assert "constant factor" in compare((ref * 1.3).float(), ref, TOL).message
    tail = ref.float().clone()
    tail[:, 7:] += 1
    assert "columns >= 7" in compare(tail, ref, TOL).message
    later = ref.float().clone()
    later[1:] = later[1:].flip(-1)
    assert "row stride" in compare(later, ref, TOL).message
    assert "contiguous()" not in compare(later, ref, TOL).message   # a copy of x is what the Triton cases reject
    rstd = ref[:, 0]
    assert "constant factor (x1.3)" in compare((rstd * 1.3).float(), rstd, TOL).message
    assert "constant factor (row 0: x1.00002)" in compare((ref * (1 + 2e-5)).float(), ref, TOL).message


def test_a_layernorm_rstd_too_small_by_one_factor_names_padded_lanes_and_the_chan_term():
    """Review student05 F1/F2: rows alike (mean 5, std 2) get the same share from padded lanes, and a wrong Chan
    weight scales every row's variance alike: the constant-factor hint named neither."""
    rstd = torch.rand(6, dtype=torch.float64) + 0.5
    small = compare((rstd * 0.9333).float(), rstd, TOL, name="rstd", op="layernorm").message
    assert "constant factor" in small and "tl.where(mask, x - mean, 0.0)" in small and "Chan's cross term" in small
    assert "Chan" not in compare((rstd * 1.07).float(), rstd, TOL, name="rstd", op="layernorm").message
    assert "Chan" not in compare((rstd * 0.9333).float(), rstd, TOL, name="rstd", op="rmsnorm").message


def test_compare_hints_that_depend_on_the_output_and_the_input_dtype():
    """Which output is wrong, and from which input dtype, changes the likely cause (review 05b, finding 8)."""
    from helpers.compare import poison_
    g = torch.Generator().manual_seed(3)
    ref = torch.randn(4, 16, dtype=torch.float64, generator=g) + 2.0
    y = poison_(torch.empty(4, 16))
    assert "no element of y was written: is the store reached" in compare(y, ref, TOL).message
    nan_y = ref.float().clone()
    nan_y[2:] = float("nan")
    fp32 = compare(nan_y, ref, TOL, x_dtype=torch.float32).message
    assert "negative variance" in fp32 and "Overflow" not in fp32
    softmax = compare(nan_y, ref, TOL, x_dtype=torch.float32, op="softmax").message
    assert "exp(-inf - (-inf))" in softmax and "variance" not in softmax
    rms_y = compare(nan_y, ref, TOL, x_dtype=torch.float32, op="rmsnorm").message   # RMSNorm has no variance
    assert "eps left out of rsqrt(mean(x^2) + eps)" in rms_y and "variance" not in rms_y
    assert "Overflow? Accumulate in fp32" in compare(nan_y, ref, TOL, x_dtype=torch.float16).message
    rstd = ref[:, 0].abs() + 1.0          # RMSNorm's rstd: a mean of squares is never negative
    inf_rstd = rstd.float().clone()
    inf_rstd[1] = float("inf")
    rms = compare(inf_rstd, rstd, TOL, name="rstd", x_dtype=torch.float32, op="rmsnorm").message
    assert "rsqrt of 0 (eps left out" in rms and "variance" not in rms
    shrunk = rstd * torch.tensor([0.9, 0.8, 0.95, 0.7], dtype=torch.float64)   # not one constant factor
    small = compare(shrunk.float(), rstd, TOL, name="rstd", op="rmsnorm").message
    assert "mean of squares came out too large" in small and "mean^2" not in small
    mean = ref.mean(dim=1)
    zero_mean = compare(torch.zeros(4), mean, TOL, name="mean", x_dtype=torch.float32).message
    assert "every wrong mean is 0" in zero_mean and "fp16" not in zero_mean
    scaled_mean = compare((mean * 0.75).float(), mean, TOL, name="mean").message
    assert "divide the sum by N" in scaled_mean and "eps" not in scaled_mean
    rstd = ref[:, 0].abs() + 0.5
    small = rstd.float().clone() * torch.tensor([0.9, 0.8, 1.0, 0.7])    # too small, by no one factor
    assert "Padded lanes in the sum of squares" in compare(small, rstd, TOL, name="rstd").message
    garbage = ref.float().clone()
    garbage[0, 3] = 1.7e34                                               # bf16 bits read as numbers
    assert "before .to(tl.float32)" in compare(garbage, ref, TOL, x_dtype=torch.bfloat16).message
    assert "before .to(tl.float32)" not in compare(garbage, ref, TOL, x_dtype=torch.float32).message


def test_compare_hints_stay_quiet_on_scattered_rounding_errors():
    """Errors scattered like rounding are blamed on no factor and no mask (a review of lesson 04 found both)."""
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(257, dtype=torch.float64, generator=g).abs() + 0.5
    noisy = ref * (1 + 1e-4 * torch.randn(257, dtype=torch.float64, generator=g))
    m = compare(noisy.float(), ref, TOL).message
    assert not compare(noisy.float(), ref, TOL).ok and "factor" not in m
    ref2 = torch.randn(40, 300, dtype=torch.float64, generator=g)
    spots = ref2.float().clone()
    spots[torch.arange(40), torch.randint(5, 300, (40,), generator=g)] += 0.5   # one wrong value a row, never column 0
    m = compare(spots, ref2, TOL).message
    assert not compare(spots, ref2, TOL).ok and "column mask" not in m and "factor" not in m


def test_hints_for_a_variance_counted_twice_and_for_16_bit_rounding_of_float32_input():
    """Review 03d F7: y off by exactly 1/sqrt(2) is a sum counted twice (a butterfly started at offset 32), not a
    vague "normaliser"; fp32 rows whose errors sit at fp16's precision were held in __half. A wrong mean or
    rstd (an affine error per row) of the same size gets no 16-bit hint."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 1000, dtype=torch.float64, generator=g) * 3 + 1
    mu, var = x.mean(1, keepdim=True), x.var(1, unbiased=False, keepdim=True)
    y = (x - mu) / torch.sqrt(var + 1e-5)
    doubled = compare(((x - mu) / torch.sqrt(2 * var + 1e-5)).float(), y, TOL, x_dtype=torch.float32).message
    assert "came out twice its value" in doubled and "offset equal to the warp size" in doubled
    halved = compare(((x - mu) / torch.sqrt(var / 4 + 1e-5)).float(), y, TOL, x_dtype=torch.float32).message
    assert "came out 1/4 of its value" in halved and "4*N" in halved
    other = compare(((x - mu) / torch.sqrt(1.3 * var + 1e-5)).float(), y, TOL, x_dtype=torch.float32).message
    assert "the normaliser is wrong" in other and "came out" not in other
    half_x = ((x.half().double() - mu) / torch.sqrt(var + 1e-5)).float()
    assert "16-bit type somewhere" in compare(half_x, y, TOL, x_dtype=torch.float32).message
    assert "16-bit type" not in compare(half_x, y, TOL, x_dtype=torch.bfloat16).message
    shifted = ((x - mu - x[:, :1] / 1000) / torch.sqrt(var + 1e-5)).float()    # one element counted twice in the mean
    m = compare(shifted, y, TOL, x_dtype=torch.float32)
    assert not m.ok and "16-bit" not in m.message


def test_the_large_mean_hint_needs_rows_whose_mean_is_far_larger():
    """'Only rows with a large mean are wrong' is said where the wrong rows' mean is far above the right ones'
    (review 05d: outliers in some rows of y, whose means differ by chance, drew it)."""
    g = torch.Generator().manual_seed(1)
    ref = torch.randn(8, 64, dtype=torch.float64, generator=g)
    ref[4:] += 1e4
    got = ref.float().clone()
    got[4:] += torch.randn(4, 64, generator=g)   # cancellation: noise, not a factor
    assert "only rows with a large mean are wrong" in compare(got, ref, TOL).message
    ref = torch.randn(8, 64, dtype=torch.float64, generator=g) + torch.arange(8, dtype=torch.float64)[:, None] * 0.1
    got = ref.float().clone()
    got[6:, 3] += 1.0   # the rows of the two largest means, by a little
    m = compare(got, ref, TOL).message
    assert not compare(got, ref, TOL).ok and "large mean" not in m


def test_a_statistic_off_by_16_bit_rounding_on_16_bit_input_asks_for_float32_sums():
    """rstd or mean of an fp16/bf16 x off by rounding of that size (sums in x's dtype) is told to accumulate in
    float32 (review 04e, F12/L06: the message said only how rstd is defined), also a mean near 0 whose relative
    errors are large; fp32 input, an error of float32 rounding's size (review 05e: shifted sums k + s1/N in fp32)
    or an error far larger than 16-bit rounding does not get it."""
    g = torch.Generator().manual_seed(2)
    ref = torch.rand(64, dtype=torch.float64, generator=g) + 0.5
    rounded = ref * (1 + 3e-3 * torch.randn(64, dtype=torch.float64, generator=g))   # a bf16 sum's error
    tol = tolerance_for("stat", torch.float32)   # statistics are float32 whatever x is
    for name, x_dtype in (("rstd", torch.bfloat16), ("mean", torch.float16)):
        m = compare(rounded.float(), ref, tol, name=name, x_dtype=x_dtype).message
        assert "accumulate in float32" in m and str(x_dtype).replace("torch.", "") + " input" in m, m
    mean = torch.randn(64, dtype=torch.float64, generator=g) * 0.05   # near 0: a bf16 sum's error is relative to |x|
    m = compare((mean + 5e-4 * torch.randn(64, dtype=torch.float64, generator=g)).float(), mean, tol, name="mean",
                x_dtype=torch.bfloat16).message
    assert "accumulate in float32" in m, m
    m = compare(rounded.float(), ref, tol, name="rstd", x_dtype=torch.float32).message
    assert not compare(rounded.float(), ref, tol, name="rstd", x_dtype=torch.float32).ok
    assert "accumulate in float32" not in m
    tiny = ref * (1 + 3e-6 * torch.randn(64, dtype=torch.float64, generator=g))   # float32 rounding (review 05e)
    m = compare(tiny.float(), ref, Tolerance(atol=0, rtol=1e-7), name="rstd", x_dtype=torch.float16).message
    assert "elements off" in m and "accumulate in float32" not in m, m
    far = ref * (1 + 0.2 * torch.randn(64, dtype=torch.float64, generator=g).abs())   # beyond rounding
    assert "accumulate in float32" not in compare(far.float(), ref, tol, name="rstd", x_dtype=torch.bfloat16).message


def test_statistics_of_the_wrong_shape_or_holding_the_standard_deviation_are_named():
    """Review 05e: (M, 1) statistics (keepdim), an (M,) buffer not reshaped to x.shape[:-1] (1-D and 3-D x), and
    an rstd that holds sqrt(var + eps) get notes that say so; y of a wrong shape gets none of them."""
    keep = compare(torch.zeros(4, 9, 1), torch.zeros(4, 9, dtype=torch.float64), TOL, name="rstd").message
    assert "trailing 1 (keepdim)" in keep
    for got, want in ((torch.zeros(1), torch.tensor(0.5, dtype=torch.float64)),
                      (torch.zeros(36), torch.zeros(4, 9, dtype=torch.float64))):
        m = compare(got, want, TOL, name="mean").message
        assert "reshape(x.shape[:-1])" in m and "keepdim" not in m, m
    assert "keepdim" not in compare(torch.zeros(4, 9, 1), torch.zeros(4, 9, dtype=torch.float64), TOL).message
    e = torch.rand(5, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 3 + 0.2
    assert "the standard deviation" in compare((1 / e).float(), e, TOL, name="rstd", op="layernorm").message
    near = e * (1 + 1e-4)   # a small error of rstd, whose product with the reference is near 1 where it is near 1
    assert "standard deviation" not in compare(near.float(), e, TOL, name="rstd", op="layernorm").message


def test_compare_bad_arguments():
    with pytest.raises(TypeError):
        compare(torch.ones(1), torch.ones(1), (1e-5, 1e-5))
    with pytest.raises(TypeError):
        compare(torch.ones(1), [1.0], TOL)
    with pytest.raises(KeyError, match="no tolerance"):
        tolerance_for("nope", torch.float32)


def test_tolerances_separate_fp32_from_fp16_accumulation():
    # The measured bound: fp32 accumulation passes, fp16 rounding of the output does not pass as fp32.
    x = torch.randn(64, 781)
    ref, _ = rmsnorm_ref(x)
    assert compare(ref.float(), ref, tolerance_for("rmsnorm", torch.float32)).ok
    assert not compare(ref.half().float(), ref, tolerance_for("rmsnorm", torch.float32)).ok
    assert compare(ref.half(), ref, tolerance_for("rmsnorm", torch.float16)).ok
    assert not compare(ref.bfloat16().half(), ref, tolerance_for("rmsnorm", torch.float16)).ok


@pytest.mark.parametrize("args,kw,err,text", [
    (([1.0, 2.0],), {}, TypeError, "torch.Tensor"),
    ((torch.ones(3, 4, dtype=torch.int64),), {}, TypeError, "float32"),
    ((torch.tensor(1.0),), {}, ValueError, "at least one dimension"),
    ((torch.ones(3, 0),), {}, ValueError, "no elements"),
    ((torch.ones(4, 3).t(),), {}, ValueError, "contiguous"),
    ((torch.ones(3, 4), torch.ones(5)), {}, ValueError, "shape (4,)"),
    ((torch.ones(3, 4), torch.ones(4, dtype=torch.int32)), {}, TypeError, "weight must be"),
    ((torch.ones(3, 4), None, -1.0), {}, ValueError, "eps"),
    ((torch.ones(3, 4), None, float("nan")), {}, ValueError, "eps"),
    ((torch.ones(2, 70000),), {"max_n": 65536}, ValueError, "too large"),
])
def test_check_rows_input_errors(args, kw, err, text):
    with pytest.raises(err, match=None) as e:
        check_rows_input(*args, **kw)
    assert text in str(e.value)


def test_check_rows_input_returns_rows_and_length():
    assert check_rows_input(torch.ones(2, 3, 5)) == (6, 5)
    assert check_rows_input(torch.ones(7)) == (1, 7)


def test_bench_needs_gpu_and_valid_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown dtype"):
        bench._dtype("float8")
    with pytest.raises(ValueError, match="impls is empty"):
        bench.sweep({}, lesson="x", op="y", make_inputs=None, n_bytes=None, check=None)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="GPU"):
            bench.copy_gbs()
    with pytest.raises(ValueError, match="no rows"):
        bench.plot({"rows": [], "copy_gbs": 1.0, "device": "x"})


def test_timing_passes_retime_points_whose_passes_disagree():
    """A point is timed REPEATS times, then again while its two fastest passes differ by more than AGREE,
    at most MAX_REPEATS times; the other points are not timed again."""
    script = {"steady": [1.0, 1.01], "disturbed": [3.0, 1.5, 1.0, 1.01, 9.0], "noisy": [1.0 + i for i in range(10)]}
    calls = {name: 0 for name in script}

    def timer(name):
        calls[name] += 1
        return script[name][calls[name] - 1]

    passes = []
    runs = bench.timing_passes({name: name for name in script}, timer=timer, on_pass=lambda i, k: passes.append(k))
    assert runs["steady"] == [1.0, 1.01]
    assert runs["disturbed"] == [3.0, 1.5, 1.0, 1.01]                 # stops once 1.0 and 1.01 agree
    assert len(runs["noisy"]) == bench.MAX_REPEATS                     # never settles: capped
    assert passes == [3, 3, 2, 2] + [1] * (bench.MAX_REPEATS - 4)
    assert bench.settled([1.0, 1.02]) and not bench.settled([1.0, 1.03]) and not bench.settled([1.0])


def test_bench_save_merge_and_show_recorded(tmp_path):
    rows = [dict(lesson="L", op="op", impl="a", dtype="float32", M=8, N=n, ms=1.0, gbs=100.0 * n, pct_copy=50.0)
            for n in (512, 1024)]
    res = {"device": "Fake GPU", "copy_gbs": 3000.0, "datasheet_gbs": None, "rows": rows, "failures": []}
    path = bench.save(res, tmp_path)
    assert path.name == "Fake_GPU.json"
    bench.save({**res, "rows": rows[:1]}, tmp_path)  # same lesson/op replaced, not duplicated
    assert len(bench.load_recorded("L", "op", tmp_path)[0]["rows"]) == 1
    figs = bench.show_recorded("L", "op", tmp_path)
    assert len(figs) == 1
    assert bench.show_recorded("L", "missing", tmp_path) == []
    assert bench.rmsnorm_fwd_bytes(2, 4, 2, 4) == 2 * 2 * 4 * 2 + 16


def test_bench_16_bit_panels_show_the_copy_of_the_same_bytes(capsys):
    rows = [dict(lesson="L", op="op", impl="a", dtype=dt, M=8, N=n, ms=1.0, gbs=2000.0 + n, pct_copy=70.0,
                 copy_gbs=3000.0, pct_copy_dtype=70.0, copy_gbs_dtype=copy)
            for dt, copy in (("bfloat16", 2900.0), ("float32", 3000.0)) for n in (512, 1024)]
    res = {"device": "Fake GPU", "copy_gbs": 3000.0, "datasheet_gbs": None, "rows": rows, "failures": []}
    fig = bench.plot(res)
    bf16, fp32 = fig.axes[:2]
    assert [ln.get_ydata()[0] for ln in bf16.lines if ln.get_linestyle() == "-."] == [2900.0]
    assert not [ln for ln in fp32.lines if ln.get_linestyle() == "-."]   # fp32's copy is the roofline itself
    bench.print_table(res)
    out = capsys.readouterr().out
    assert "a bfloat16 copy of the same bytes: 2900 GB/s" in out
    old = {**res, "rows": [{k: v for k, v in r.items() if not k.endswith("_dtype")} for r in rows]}
    assert not [ln for ln in bench.plot(old).axes[0].lines if ln.get_linestyle() == "-."]   # older records


def test_bench_plot_labels_the_first_implementation_and_skips_labels_that_would_overlap():
    """Review student04 F13: near 100 % the labels of four peers printed on top of one another. The first
    implementation (the course's) is labelled at every point and drawn on top; a label that would sit on one
    already placed at the same N is left out; points far apart keep theirs."""
    gbs = {"ours": (2900.0, 1000.0), "peer a": (2899.0, 2000.0), "peer b": (2898.0, 500.0)}
    rows = [dict(lesson="L", op="op", impl=impl, dtype="float32", M=8, N=n, ms=1.0, gbs=g, pct_copy=g / 30,
                 copy_gbs=3000.0) for impl, pair in gbs.items() for n, g in zip((512, 1024), pair)]
    ax = bench.plot({"device": "Fake GPU", "copy_gbs": 3000.0, "rows": rows, "failures": []}).axes[0]
    labels = {(t.xy[0], t.get_text()) for t in ax.texts}
    assert labels == {(512, "97%"), (1024, "33%"), (1024, "67%"), (1024, "17%")}   # at 512 only ours
    ours = next(ln for ln in ax.lines if ln.get_label() == "ours")
    assert ours.get_zorder() > max(ln.get_zorder() for ln in ax.lines if ln is not ours)


@pytest.mark.parametrize("lesson,op,peers", [
    ("04_triton_rmsnorm", "rmsnorm_fwd", {"torch composite", "F.rms_norm", "torch.compile"}),
    ("05_triton_layernorm", "layernorm_fwd", {"F.layer_norm", "torch.compile"}),
])
def test_recorded_results_exist(lesson, op, peers):
    found = bench.load_recorded(lesson, op)
    assert found, f"benchmarks/results/ has no {lesson} results: run `make bench` on a GPU"
    for res in found:
        impls = {r["impl"] for r in res["rows"]}
        assert peers <= impls, res["device"]
        assert any(i.startswith("solution") for i in impls)


def test_layernorm_ref_matches_torch_and_returns_stats():
    from helpers.reference import layernorm_ref

    x = torch.randn(3, 5, 7, dtype=torch.float64) * 2 + 10
    w, b = torch.randn(7, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    y, mean, rstd = layernorm_ref(x, w, b, 1e-5)
    assert torch.allclose(y, torch.nn.functional.layer_norm(x, (7,), w, b, 1e-5), atol=1e-12)
    assert mean.shape == rstd.shape == (3, 5)
    assert torch.allclose(rstd, 1 / torch.sqrt(x.var(-1, unbiased=False) + 1e-5))
    with pytest.raises(ValueError, match="bias must have shape"):
        layernorm_ref(x, w, b[:3])


def test_check_rows_input_validates_the_bias():
    x = torch.randn(4, 8)
    assert check_rows_input(x, torch.ones(8), 1e-5, bias=torch.zeros(8)) == (4, 8)
    with pytest.raises(ValueError, match="bias must have shape"):
        check_rows_input(x, None, 1e-5, bias=torch.zeros(7))
    with pytest.raises(TypeError, match="bias must be"):
        check_rows_input(x, None, 1e-5, bias=torch.zeros(8, dtype=torch.int32))


def test_compare_without_kernel_hints_keeps_the_verdict_drops_the_kernel_advice():
    ref = torch.ones(4, 8, dtype=torch.float64)
    y = ref.float().clone()
    y[:, 5:] = 2.0  # only the tail columns wrong: with kernel hints this points at the mask
    with_hints = compare(y, ref, TOL)
    plain = compare(y, ref, TOL, kernel_hints=False)
    assert not with_hints.ok and not plain.ok
    assert "mask" in with_hints.message and "mask" not in plain.message
    assert plain.message in with_hints.message


def test_compare_outputs_names_an_unbiased_variance_and_blames_no_16_bit_rounding_on_a_wrong_statistic():
    """Review student05 F1/F6: a mean over the padded block, with weight and bias, left y errors that looked like
    16-bit rounding from float32 input, and that guess led the message; an unbiased variance was not named."""
    from helpers.compare import compare_outputs
    from helpers.reference import layernorm_ref
    g = torch.Generator().manual_seed(0)
    x, w, b, eps = torch.randn(30, 1000, generator=g), torch.randn(1000, generator=g), \
        torch.randn(1000, generator=g), 1e-5
    refs = layernorm_ref(x, w, b, eps)

    def run(mean, var):
        rstd = torch.rsqrt(var + eps)
        return compare_outputs("layernorm", ((x - mean[:, None]) * rstd[:, None] * w + b, mean, rstd), refs,
                               torch.float32)
    y, mean, rstd = run(x.sum(-1) / 1024, x.var(-1, correction=0))             # the mean over a block of 1024
    assert not y and not mean and "16-bit" not in y.message and "divide the sum by N" in mean.message
    y, mean, rstd = run(x.mean(-1), x.var(-1, correction=1))                   # divided by N - 1
    assert mean and "which is sqrt((N-1)/N) for N = 1000: the sum divided by N - 1" in rstd.message
    assert "16-bit" not in y.message
    x1 = torch.randn(5, 1, generator=g)
    mean, rstd = x1.mean(-1), torch.full((5,), float("nan"))                   # N = 1: 0/0 from N - 1
    y, _, rstd = compare_outputs("layernorm", (torch.full_like(x1, float("nan")), mean, rstd),
                                 layernorm_ref(x1, None, None, eps), torch.float32)
    for r in (y, rstd):
        assert "NaN in rows of one element: a sum divided by N - 1" in r.message and "0 * 1/sqrt(0)" not in r.message
    # float32 rounding to 16 bits in y with right statistics is still named
    y16 = refs[0].float().to(torch.bfloat16).float()
    r = compare_outputs("layernorm", (y16, refs[1].float(), refs[2].float()), refs, torch.float32)
    assert not r[0] and "16-bit rounding" in r[0].message and r[1] and r[2]


def test_compare_outputs_uses_the_hidden_cases_tolerances():
    from helpers.compare import compare_outputs
    g = torch.Generator().manual_seed(0)
    y_ref, mean_ref, rstd_ref = torch.randn(4, 8, generator=g).double(), torch.full((4,), 1e4).double(), \
        torch.ones(4).double()
    y, mean, rstd = (y_ref + 5e-3).float(), mean_ref.float(), (rstd_ref * (1 + 1e-4)).float()
    plain = compare_outputs("layernorm", (y, mean, rstd), (y_ref, mean_ref, rstd_ref), torch.float32)
    assert [r.message.split(":")[0] for r in plain] == ["y", "mean", "rstd"]
    assert [bool(r) for r in plain] == [False, True, False]          # y off by 5e-3, rstd by 1e-4 relative
    widened = compare_outputs("layernorm", (y, mean, rstd), (y_ref, mean_ref, rstd_ref), torch.float32,
                              atol=1e-2, stat_rtol=3e-4)
    assert all(widened)
    # y must have the dtype given (x's); the statistics float32
    r = compare_outputs("rmsnorm", (y, rstd.double()), (y_ref, rstd_ref), torch.bfloat16, names=("y", "rstd"))
    assert not r[0] and "bfloat16" in r[0].message and not r[1] and "float32" in r[1].message


def test_compare_each_judges_every_output_and_names_what_came_back():
    ref = (torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    tol = helpers.Tolerance(1e-6, 1e-6)
    ok = helpers.compare_each((torch.zeros(3), torch.ones(3)), ref, [tol] * 2, ["a", "b"])
    assert [bool(r) for r in ok] == [True, True]
    off = helpers.compare_each((torch.zeros(3), torch.full((3,), 1.1)), ref, [tol] * 2, ["a", "b"])
    assert [bool(r) for r in off] == [True, False] and "b:" in off[1].message
    for wrong, says in ((None, "got None"), (torch.zeros(3), "got Tensor"), ((torch.zeros(3),), "got a tuple of 1")):
        (r,) = helpers.compare_each(wrong, ref, [tol] * 2, ["a", "b"])
        assert not r and says in r.message, r.message
    (r,) = helpers.compare_each(torch.zeros(3), ref[:1], [tol], ["a"])     # one output: a bare tensor is fine
    assert r
    with pytest.raises(ValueError, match="2 names, 1 tolerances"):
        helpers.compare_each(ok, ref, [tol], ["a", "b"])
    (r,) = helpers.compare_each(torch.zeros(3).numpy(), ref[0], [tol], ["a"])   # a bare reference tensor is fine
    assert not r and "expected a torch.Tensor, got ndarray" in r.message
    (r,) = helpers.compare_each(torch.zeros(3, dtype=torch.float64), ref[0], [tol], ["a"], dtype=torch.float32)
    assert not r and "dtype torch.float64, expected torch.float32" in r.message


def test_print_verdict_says_ok_only_when_all_pass(capsys):
    good = helpers.CompareResult(True, "a: ok (max abs err 1e-7)", 1e-7)
    bad = helpers.CompareResult(False, "b: 3 of 3 elements off")
    assert helpers.print_verdict("x", [good]) is None      # a cell that ends with it shows no stray True/False
    assert "x: ok (max abs err a 1.0e-07" in capsys.readouterr().out
    helpers.print_verdict("y", [good, bad])
    assert capsys.readouterr().out.strip() == "y: FAILED: b: 3 of 3 elements off"
    with pytest.raises(ValueError, match="no results"):
        helpers.print_verdict("z", [])


def test_print_unchanged_speaks_only_of_an_input_changed_in_place(capsys):
    """Review student01 F1: a visible check says that the function changed x, not that correct outputs are wrong."""
    x = torch.randn(3, 4)
    before = x.clone()
    helpers.print_unchanged("x", before, x)
    assert capsys.readouterr().out == ""
    x.sub_(1.0)
    helpers.print_unchanged("x", before, x)
    assert capsys.readouterr().out.startswith("x: FAILED: your function changed its input x in place")


def test_recorded_autotuning_prints_one_line_per_point(capsys):
    """Lesson 05 section 4's CPU path: every recorded GPU's table, with the choice and the tuning time."""
    from helpers import bench_layernorm as lb

    found = lb.show_recorded_autotune()
    assert found, "benchmarks/results/ has no autotuning record: run `make bench` on a GPU"
    out = capsys.readouterr().out
    for res in found:
        assert {r["impl"] for r in res["rows"]} == {lb.TABLE, lb.TUNED}
        points = {(r["dtype"], r["N"]) for r in res["rows"]}
        assert len(points) == len(lb.TUNE_NS) * len(lb.TUNE_DTYPES)
        for r in res["rows"]:
            if r["impl"] == lb.TUNED:
                assert r["tune_s"] > 0 and r["configs_tried"] == len(lb.tune_configs(r["N"]))
                assert f"{r['config']:18} {r['tune_s']:>6.1f} s" in out
        assert out.count(f"{res['device']}, % of the copy roofline") == 1


def test_tune_configs_keep_tiles_small():
    from helpers import bench_layernorm as lb

    for block_n, n in ((512, 25), (2048, 20), (4096, 15), (16384, 5)):
        configs = lb.tune_configs(block_n)
        assert len(configs) == n and all(c.kwargs["BLOCK_M"] * block_n <= lb.TUNE_MAX_TILE for c in configs)


def test_save_merges_rows_and_keeps_every_dtypes_copy(tmp_path):
    row = dict(lesson="L", op="a", impl="x", dtype="bfloat16", M=1, N=1, gbs=1.0, pct_copy=1.0)
    first = {"device": "Fake GPU", "copy_gbs": 3.0, "copy_gbs_by_dtype": {"float16": 2.0, "float32": 3.0},
             "rows": [row], "failures": []}
    bench.save(first, tmp_path)
    later = {"device": "Fake GPU", "copy_gbs": 3.1, "copy_gbs_by_dtype": {"float32": 3.1},
             "rows": [{**row, "op": "b"}], "failures": []}
    data = json.loads(bench.save(later, tmp_path).read_text())
    assert [r["op"] for r in data["rows"]] == ["a", "b"] and "failures" not in data
    assert data["copy_gbs_by_dtype"] == {"float16": 2.0, "float32": 3.1}


def test_version_warnings_name_what_breaks():
    from helpers.env import version_warnings

    assert version_warnings(triton="3.6.0") == []
    assert version_warnings(triton=None) == []                   # macOS: no Triton at all
    old = version_warnings(triton="3.1.0")
    assert len(old) == 1 and "Triton 3.1.0 is older" in old[0] and "triton>=3.2" in old[0]
    assert version_warnings(triton="3.2.0") == []
    assert version_warnings(triton="3.6.0+git1234") == []
    assert version_warnings(triton="weird") == []


@pytest.mark.skipif(helpers.on_gpu(), reason="checks the CPU interpreter's loops")
def test_interpreter_loops_over_a_scalar_bound_with_any_numpy():
    """Triton 3.2-3.6 index with int() of a one-element array: NumPy 2.4 refuses it (TypeError) and older NumPy
    warns (DeprecationWarning, an error here). With helpers' patch the loop runs silently under both."""
    import warnings

    import triton
    import triton.language as tl
    from helpers.env import interpreter_indexes_with_any_numpy
    from triton.runtime import interpreter

    @triton.jit
    def _sum_in_chunks(X, Y, n, BLOCK: tl.constexpr):
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, n, BLOCK):
            offs = off + tl.arange(0, BLOCK)
            acc += tl.load(X + offs, mask=offs < n, other=0.0)
        tl.store(Y, tl.sum(acc, axis=0))

    x, y = torch.arange(37, dtype=torch.float32), torch.empty(1)
    assert interpreter_indexes_with_any_numpy() and interpreter_indexes_with_any_numpy()   # in place, once
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        _sum_in_chunks[(1,)](x, y, 37, BLOCK=8)
    assert y.item() == 666.0
    patched = interpreter._patch_lang_tensor
    interpreter._patch_lang_tensor = patched.original   # Triton's own: the same loop must fail without the patch
    try:
        with warnings.catch_warnings(), pytest.raises(Exception, match="0-dimensional|ndim > 0"):
            warnings.simplefilter("error", DeprecationWarning)
            _sum_in_chunks[(1,)](x, y, 37, BLOCK=8)
    finally:
        interpreter._patch_lang_tensor = patched


@pytest.mark.skipif(helpers.on_gpu(), reason="checks the CPU interpreter's speed patches")
def test_interpreter_skips_only_work_whose_result_nobody_sees(monkeypatch):
    """Two patches for speed (CI's CPU time): triton.language is patched once per launch, not again at every call
    of a @triton.jit helper (tl.sum, tl.zeros) inside it; the int32 overflow check is skipped where the interpreter
    would drop its result (debug off). Same numbers, same language after the launch, and the check still raises
    with debug on."""
    import dataclasses

    import triton
    import triton.language as tl
    from helpers.env import interpreter_patches_the_language_once_per_launch, interpreter_skips_unasserted_overflow_checks
    from triton.runtime import interpreter

    @triton.jit
    def _row_sums(X, Y, M, N, BLOCK: tl.constexpr):
        for row in range(0, M):
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                acc += tl.load(X + row * N + cols, mask=cols < N, other=0.0)
            tl.store(Y + row, tl.sum(acc, axis=0))

    @triton.jit
    def _add_int32(X, Y, K):
        tl.store(Y, tl.load(X) + K)

    assert interpreter_patches_the_language_once_per_launch() and interpreter_skips_unasserted_overflow_checks()
    patches = []
    real = interpreter._patch_builtin
    monkeypatch.setattr(interpreter, "_patch_builtin", lambda *a: (patches.append(a[0]), real(*a))[1])
    x, y = torch.randn(40, 33), torch.empty(40)
    sum_before = tl.sum
    _row_sums[(1,)](x, y, 40, 33, BLOCK=16)
    assert torch.allclose(y, x.sum(-1), atol=1e-5)
    # the launch's own patch and the first helper's (tl.core): a few modules each. Without the patch, 4 or more at
    # each of the 80 calls of tl.zeros and tl.sum (320 and more)
    assert 1 <= len(patches) <= 20, len(patches)
    assert tl.sum is sum_before and not hasattr(tl.tensor, "__index__")   # the launch's patch undone after it
    monkeypatch.undo()

    xi, yi = torch.tensor([2 ** 31 - 2], dtype=torch.int32), torch.empty(1, dtype=torch.int32)
    _add_int32[(1,)](xi, yi, 5)              # wraps, as on a GPU: the check's result was dropped anyway
    assert yi.item() == -(2 ** 31) + 3
    builder = interpreter.interpreter_builder
    options = builder.options
    builder.options = dataclasses.replace(options, debug=True)
    try:
        with pytest.raises(Exception, match="int32 overflow detected"):
            _add_int32[(1,)](xi, yi, 5)
    finally:
        builder.options = options


def test_fp32_to_bf16_bits_round_to_nearest_even_like_torch():
    import numpy as np
    from helpers.env import fp32_to_bf16_bits
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20000, generator=g) * 10.0 ** torch.randint(-40, 39, (20000,), generator=g).float()
    ties = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -(1.0 + 2 ** -8), 3.3961e38, 3.4e38, 1e-40, -1e-42, 0.0, -0.0,
                         float("inf"), -float("inf")])
    x = torch.cat([x, ties])
    mine = torch.from_numpy(fp32_to_bf16_bits(x.numpy()).view(np.int16))
    assert torch.equal(mine, x.to(torch.bfloat16).view(torch.int16))
    assert torch.isnan(torch.from_numpy(fp32_to_bf16_bits(np.array([float("nan")], np.float32)).view(np.int16))
                       .view(torch.bfloat16).float()).all()


@pytest.mark.skipif(helpers.on_gpu(), reason="checks the CPU interpreter's conversion")
def test_interpreter_stores_bf16_rounded_to_nearest_as_the_gpu_does():
    import triton
    import triton.language as tl

    @triton.jit
    def _to_bf16(X, Y, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(Y + offs, tl.load(X + offs, mask=offs < n).to(tl.bfloat16), mask=offs < n)

    x = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.01171875, -3.9921875, 4.0234375, 1.0 + 2 ** -9])
    y = torch.empty(len(x), dtype=torch.bfloat16)
    _to_bf16[(1,)](x, y, len(x), BLOCK=8)
    assert torch.equal(y.view(torch.int16), x.to(torch.bfloat16).view(torch.int16)), (y.tolist(), x.tolist())


@pytest.mark.skipif(helpers.on_gpu(), reason="checks the CPU interpreter's arithmetic and arguments")
def test_interpreter_does_bf16_math_in_fp32_and_takes_a_bool_argument_as_the_gpu_does():
    import triton
    import triton.language as tl

    @triton.jit
    def _mul_add(X, W, Y, n, ADD, BLOCK: tl.constexpr):   # ADD: a runtime bool, not a constexpr
        offs = tl.arange(0, BLOCK)
        x = tl.load(X + offs, mask=offs < n, other=0.0)
        y = x * tl.load(W + offs, mask=offs < n, other=0.0)   # bf16 * bf16: fp32 product, rounded to bf16
        if ADD:
            y = y + x
        tl.store(Y + offs, y, mask=(offs < n) & (y == y))   # a bf16 comparison too (true: no NaN)

    g = torch.Generator().manual_seed(0)
    x, w = (torch.randn(50, generator=g).bfloat16() for _ in range(2))
    product = (x.float() * w.float()).bfloat16()
    for add, want in ((False, product), (True, (product.float() + x.float()).bfloat16())):
        y = torch.empty_like(x)
        _mul_add[(1,)](x, w, y, len(x), add, BLOCK=64)
        assert torch.equal(y.view(torch.int16), want.view(torch.int16)), add


@pytest.mark.skipif(helpers.on_gpu(), reason="checks the CPU interpreter's reductions and casts")
def test_interpreter_reduces_and_casts_bf16_as_numbers_as_the_gpu_does():
    """tl.sum / tl.max / tl.min of bf16 reduce values, not bit patterns (a sum of the patterns came out ~1e6, a max
    of them picked a negative value); float64 stored into bf16 goes through fp32 (it came out 0 or garbage)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _reduce(X, X32, OUT, Z, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(X + offs)                                             # bf16, n == BLOCK
        tl.store(OUT, tl.sum(x, axis=0))
        tl.store(OUT + 1, tl.max(x, axis=0))
        tl.store(OUT + 2, tl.min(x, axis=0))
        wide = tl.load(X32 + offs, mask=offs < n, other=0.0).to(tl.float64)
        tl.store(Z + offs, wide.to(Z.dtype.element_ty), mask=offs < n)

    g = torch.Generator().manual_seed(1)
    x = (torch.randn(256, generator=g) * 0.5 - 0.3).bfloat16()
    out, z = torch.zeros(3, dtype=torch.bfloat16), torch.empty_like(x)
    _reduce[(1,)](x, x.float(), out, z, len(x), BLOCK=256)
    total = x.double().sum().item()
    assert abs(out[0].item() - total) <= 0.02 * abs(total) + 0.05, (out[0].item(), total)   # bf16 adds in a tree
    assert out[1].item() == x.max().item() and out[2].item() == x.min().item()
    assert torch.equal(z.view(torch.int16), x.view(torch.int16))


def test_compare_outputs_says_what_came_back_instead_of_failing_to_unpack():
    y_ref, rstd_ref = rmsnorm_ref(torch.randn(3, 8))
    for wrong, says in ((None, "got None"), ((y_ref.float(),), "got a tuple of 1")):
        (r,) = helpers.compare_outputs("rmsnorm", wrong, (y_ref, rstd_ref), torch.float32, names=("y", "rstd"))
        assert not r and says in r.message
    ok = helpers.compare_outputs("rmsnorm", (y_ref.float(), rstd_ref.float()), (y_ref, rstd_ref), torch.float32,
                                 names=("y", "rstd"))
    assert len(ok) == 2 and all(ok)


def test_hints_for_rows_of_zeros_one_value_per_row_and_tails_off_a_block_boundary():
    ref = torch.zeros(3, 8, dtype=torch.float64)
    ref[1] = 1.0
    y = ref.float().clone()
    y[[0, 2]] = float("nan")                                   # 0 * 1/sqrt(0): eps left out
    assert "eps added inside the square root" in compare(y, ref, TOL).message
    from helpers.compare import poison_
    rstd_out = poison_(torch.empty(40))
    rstd_out[:16] = 1.0
    m = compare(rstd_out, torch.ones(40, dtype=torch.float64), TOL, name="rstd").message
    assert "unwritten from row 16 on" in m and "column" not in m
    m = compare(rstd_out.reshape(4, 10), torch.ones(4, 10, dtype=torch.float64), TOL, name="rstd").message
    assert "unwritten from row 16 on" in m and "column" not in m   # rstd of a 3-D x: rows in x's order (review 04e)
    m = compare(rstd_out, torch.ones(40, dtype=torch.float64), TOL, name="y").message   # a 1-D y is one row
    assert "every row is unwritten from column 16 on" in m and "from row" not in m
    wide = torch.randn(4, 40, dtype=torch.float64).abs() + 0.5
    off_by_one = wide.float().clone()
    off_by_one[:, 1:] += 1                                     # column 0 right by chance, not a block's tail
    assert "column mask" not in compare(off_by_one, wide, TOL).message
    block = wide.float().clone()
    block[:, 16:] += 1                                         # from a block boundary on: the mask
    assert "columns >= 16" in compare(block, wide, TOL).message
