"""Same grading, compiled on a real GPU (marker gpu; `make test-gpu`). Runtime dependencies only.

Only the lessons with GPU kernels (Triton, CUDA C) are run here; lessons 01-02 are CPU PyTorch.
"""
import pytest

from conftest import ROOT, repair_exercises, run_cli, write_variant
from test_mutants import ALL, _id, assert_result_rejects

pytestmark = pytest.mark.gpu

GPU_LESSONS = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb") if p.stem >= "03")
GPU_MUTANTS = [m for m in ALL if m[0] in GPU_LESSONS]
CUDA_C_LESSONS = {"03_pycuda_layernorm"}


@pytest.fixture(autouse=True)
def _cuda_c_needs_pycuda(request):
    """Lesson 03 needs PyCUDA and nvcc beside the GPU: skipped (never passed) where they are missing."""
    params = getattr(request.node, "callspec", None)
    lesson = params.params.get("lesson") if params else None
    if lesson in CUDA_C_LESSONS:
        from helpers.cudac import can_run
        if can_run():
            pytest.skip(f"{lesson}: {can_run()}")


@pytest.mark.parametrize("lesson", GPU_LESSONS)
def test_solutions_full_marks_on_gpu(lesson):
    report, out = run_cli(ROOT / "solutions" / f"{lesson}.ipynb")
    nb = report["notebooks"][0]
    assert nb["earned"] == nb["possible"], out[-4000:]


@pytest.mark.parametrize("lesson", GPU_LESSONS)
def test_stubs_zero_on_gpu(lesson):
    report, _ = run_cli(ROOT / "notebooks" / f"{lesson}.ipynb")
    nb = report["notebooks"][0]
    assert nb["earned"] == 0
    repair = repair_exercises(lesson)
    for ex in nb["exercises"]:
        assert ex["status"] == "graded", ex["id"]  # the `pass` stub compiles inside @triton.jit, the C stub in nvcc
        if ex["id"] in repair:   # handed out as the buggy code (it does not compile): its errors, not "not implemented"
            assert not any(c["passed"] or "not implemented yet" in c["message"] for c in ex["cases"]), ex["id"]
        else:
            assert all("not implemented yet" in c["message"] for c in ex["cases"])


@pytest.mark.parametrize("lesson,exercise,name,edits,expect,needs", GPU_MUTANTS,
                         ids=[_id(m) for m in GPU_MUTANTS])
def test_mutants_rejected_on_gpu(tmp_path, lesson, exercise, name, edits, expect, needs):
    if needs in ("cuda", "nvcc", "gpu"):  # through the CLI, so a kernel fault stays in its own process
        report, out = run_cli(write_variant(tmp_path, edits, src=ROOT / "solutions" / f"{lesson}.ipynb"),
                              "--exercise", exercise, returncode=(0, 3))   # 3: a fault crashed a case
        (ex,) = report["notebooks"][0]["exercises"]
        assert_result_rejects(ex, name, expect)
        return
    from autograder import get, grade
    from autograder.notebook import load

    ns, errors = load(write_variant(tmp_path, edits, src=ROOT / "solutions" / f"{lesson}.ipynb"))
    assert not errors
    result = grade(get(exercise), ns)
    assert result["earned"] < result["possible"], name


@pytest.mark.parametrize("exercise", ["layernorm_fwd", "layernorm"])
def test_an_autotuned_tile_kernel_full_marks_on_gpu(tmp_path, exercise):
    """The tile kernel under @triton.autotune (lesson 05's section 4): the autotuner's ~1000 timing launches per
    config are not the call's, so the dispatcher's and the fused kernel's one-launch cases pass."""
    from test_grader import AUTOTUNED_TILE
    report, out = run_cli(write_variant(tmp_path, AUTOTUNED_TILE, src=ROOT / "solutions" / "05_triton_layernorm.ipynb"),
                          "--exercise", exercise)
    (ex,) = report["notebooks"][0]["exercises"]
    assert ex["earned"] == ex["possible"], out[-4000:]


@pytest.mark.parametrize("variant", ["block pointers", "a list returned", "y through triton.reinterpret"])
def test_correct_tile_kernels_written_otherwise_full_marks_on_gpu(tmp_path, variant):
    """Review 05e's false fails, compiled: block pointers (also in the load-count replay), a list returned, and y
    through triton.reinterpret (the compile case's signature and the replay keep its tl dtype)."""
    from test_grader import CORRECT_TILES
    report, out = run_cli(write_variant(tmp_path, CORRECT_TILES[variant],
                                        src=ROOT / "solutions" / "05_triton_layernorm.ipynb"),
                          "--exercise", "layernorm_fwd")
    (ex,) = report["notebooks"][0]["exercises"]
    assert ex["earned"] == ex["possible"], out[-4000:]


def test_autotuned_tile_is_correct_and_keeps_to_fitting_tiles():
    """Lesson 05 section 4's autotuning wrapper: right numbers (bias only, non-power-of-two N), a chosen config
    from the pruned set, its tuning logged once per key."""
    import torch
    import triton

    import helpers
    from autograder.notebook import load
    from helpers import bench_layernorm as lb

    ns, errors = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not errors
    launch, log = lb.autotuned_tile(ns["_layernorm_fwd_kernel"])
    x = torch.randn(37, 3000, device="cuda", dtype=torch.bfloat16) + 5
    b = torch.randn(3000, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):
        out = launch(x, None, b)
    results = helpers.compare_outputs("layernorm", out, helpers.layernorm_ref(x, None, b, lb.EPS), torch.bfloat16)
    assert all(results), [r.message for r in results]
    (key, (secs, cfg, tried)), = log.items()
    assert key == (3000, "bfloat16") and secs > 0 and cfg in tried and len(tried) == 15
    assert all(c.kwargs["BLOCK_M"] * triton.next_power_of_2(3000) <= lb.TUNE_MAX_TILE for c in tried)
    with pytest.raises(ValueError, match="do not fit a tile"):          # no config fits: said, not a spilling one
        launch(torch.randn(2, 20000, device="cuda"), None, None)


def test_time_ms_does_not_count_the_hosts_launch_time():
    """helpers.bench.time_ms holds the GPU after each L2 flush, so a launcher that spends 200 us on the host
    before its kernel is timed as the kernel alone (do_bench's protocol timed the GPU's wait for it whenever the
    host needed longer per run than the flush's 65-85 us and the kernel, on an H100/H200)."""
    import time

    import torch

    from helpers import bench

    x = torch.randn(2**20, device="cuda")
    y = torch.empty_like(x)

    def slow_host():
        until = time.perf_counter() + 200e-6
        while time.perf_counter() < until:
            pass
        y.copy_(x)

    fast = bench.time_ms(lambda: y.copy_(x))
    slow = bench.time_ms(slow_host)
    assert slow < fast + 0.02, (fast, slow)     # a 4 MB copy: a few us; the host's 200 us are not in it


@pytest.mark.parametrize("lesson", ["04_triton_rmsnorm", "05_triton_layernorm"])
def test_triton_visible_checks_run_on_gpu(lesson, capsys):
    """The visible checks of the Triton lessons on a GPU: the solution's all "ok", the student copy's no crash."""
    from test_notebooks import assert_triton_visible_checks
    assert_triton_visible_checks(lesson, capsys)
