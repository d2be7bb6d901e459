"""Lesson 03 (CUDA C with PyCUDA) on any machine: the nvcc compile checks, the launch wrapper's clear
errors, the stub handling, and the references. The numerics run in `make test-gpu`."""
import numpy as np
import pytest
import torch

from autograder import for_lesson, get
from autograder.notebook import load
from conftest import ROOT
from helpers import cudac, softmax_ref
from helpers.validate import check_rows_input

LESSON = "03_pycuda_layernorm"
needs_nvcc = pytest.mark.skipif(not cudac.has_nvcc(), reason="needs nvcc")

GOOD = r"""
extern "C" __global__ void scale(float* y, const float* x, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""


def test_nbgrader_python_stub_becomes_a_c_comment():
    src = 'extern "C" __global__ void k(float* y) {\n    # YOUR CODE HERE\n    pass\n}\n'
    out = cudac.c_source(src)
    assert "    // # YOUR CODE HERE" in out and "    // pass" in out and "\n    pass" not in out


@pytest.mark.parametrize("bad,err", [(None, TypeError), (b"int x;", TypeError), ("   \n", ValueError)])
def test_c_source_rejects_what_is_not_cuda_text(bad, err):
    with pytest.raises(err):
        cudac.c_source(bad)


@needs_nvcc
def test_compile_check_passes_good_code_and_names_its_kernels():
    assert cudac.compile_check(GOOD, ("scale",)) == "compiles for sm_80, sm_90; exports scale"


@needs_nvcc
def test_compile_errors_quote_nvcc_with_the_line():
    with pytest.raises(cudac.CudaCompileError, match=r"line 4 of the source: error: .*undefined"):
        cudac.compile_check(GOOD.replace("a * x[i]", "a * z[i]"), ("scale",))


@needs_nvcc
def test_a_mangled_kernel_name_is_reported():
    with pytest.raises(cudac.CudaCompileError, match='no kernel named scale.*extern "C"'):
        cudac.compile_check(GOOD.replace('extern "C" ', ""), ("scale",))


@needs_nvcc
def test_every_student_cuda_string_compiles_before_any_work():
    """The student starts from code that compiles: each stub is a C comment, not Python."""
    ns, errors = load(ROOT / "notebooks" / f"{LESSON}.ipynb")
    assert not errors
    for ex in for_lesson(LESSON):
        src = ns[ex.functions[1]]
        assert "// YOUR CODE HERE" in src and "pass" not in src.split("YOUR CODE HERE")[1].split("\n")[1]
        # ...and the visible check says that it is still a stub
        assert "write the kernel there" in cudac.compile_check(src, ex.kernels)


def test_one_spelling_of_the_stub_marker():
    from autograder.runner import STUB_MARKER
    from autograder.stubs import C_STUB, STUB
    assert cudac.STUB_TODO == STUB_MARKER and STUB_MARKER in STUB and STUB_MARKER in C_STUB


@needs_nvcc
def test_show_compile_is_compile_check_where_nvcc_is_installed():
    assert cudac.show_compile(GOOD, ("scale",)) == cudac.compile_check(GOOD, ("scale",))
    assert cudac.show_compile(GOOD.replace("a * x[i]", "a * z[i]"), ("scale",)).startswith(
        "does NOT compile: nvcc (sm_80) failed: line 4 of the source: error: identifier \"z\" is undefined")


def test_show_compile_without_nvcc_says_why_instead_of_raising(monkeypatch):
    monkeypatch.setattr(cudac, "has_nvcc", lambda: False)
    assert cudac.show_compile(GOOD, ("scale",)).startswith("not compiled: nvcc")


def test_without_a_gpu_kernels_cannot_run_and_say_why():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert cudac.can_run() == "needs a CUDA GPU"
    with pytest.raises(RuntimeError, match="cannot run here: needs a CUDA GPU"):
        cudac.context()


def test_launch_arguments_need_their_c_type():
    with pytest.raises(TypeError, match=r"np.int32\(C\)"):
        cudac._arg("k", 3, 1024)
    with pytest.raises(TypeError, match="Python float"):
        cudac._arg("k", 4, 1e-5)
    with pytest.raises(TypeError, match="on cpu"):
        cudac._arg("k", 0, torch.zeros(3))
    assert cudac._arg("k", 1, None) == 0
    assert cudac._arg("k", 2, np.int32(7)) == 7
    with pytest.raises(TypeError, match=r"numpy float64 .*8 bytes.*np.float32\(eps\)"):   # too wide for a C float
        cudac._arg("k", 5, np.float64(1e-5))
    with pytest.raises(TypeError, match=r"numpy int64 .*np.int32\(C\)"):
        cudac._arg("k", 6, np.int64(1000))
    with pytest.raises(TypeError, match=r"numpy bool .*1 byte; .*np.int32\(C\)"):   # a flag for an int parameter
        cudac._arg("k", 8, np.bool_(True))
    with pytest.raises(TypeError, match=r"numpy float16 .*2 bytes.*np.float32\(eps\)"):
        cudac._arg("k", 9, np.float16(1e-5))
    assert cudac._arg("k", 10, np.uint32(3)) == 3 and cudac._arg("k", 11, np.float32(0.5)) == 0.5


def test_a_partial_warp_mask_gets_a_note_not_a_failure():
    """__shfl_xor_sync(0x0000ffff, ...) called by 32 lanes is undefined behaviour that an H100 runs right and no
    sanitizer reports (review 03c R02/S05): the compile case says so, without taking points."""
    from helpers.cudac import partial_warp_masks
    full = "v += __shfl_xor_sync(0xffffffff, v, 16); w = __shfl_down_sync(4294967295u, w, 1); // __shfl_sync(1, a, 0)"
    assert partial_warp_masks(full) == ""
    note = partial_warp_masks("int a;\n  v += __shfl_xor_sync(0x0000ffffu, v, 8);\n  /* __any_sync(3, p) */")
    assert note.startswith("; note (no points): __shfl_xor_sync(0x0000ffff, ...) on line 2 names 16 of 32 lanes")
    ballot = ("unsigned mask = __ballot_sync(0xffffffff, lane < C);\n"
              "for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(mask, v, o);\n")   # review 03d S21
    assert partial_warp_masks(ballot).startswith("; note (no points): __shfl_xor_sync(mask, ...) on line 2 takes "
                                                 "its mask from __ballot_sync: is every lane that reaches it in mask?")
    assert partial_warp_masks(ballot.replace("(mask, v", "(0xffffffff, v")) == ""
    for ex in for_lesson(LESSON):   # the lesson's own kernels name whole warps
        assert partial_warp_masks(load(ROOT / "solutions" / f"{LESSON}.ipynb")[0][ex.functions[1]]) == ""


@pytest.mark.parametrize("dims,what,err", [(0, "block", ValueError), ((2048,), "block", ValueError),
                                           ("8", "grid", TypeError), ((1, 2, 3, 4), "grid", TypeError),
                                           ((-1,), "grid", ValueError)])
def test_bad_launch_dimensions(dims, what, err):
    with pytest.raises(err):
        cudac._dims(dims, what, (2**31 - 1, 65535, 65535) if what == "grid" else (1024, 1024, 64))


def test_more_than_1024_threads_per_block_is_refused():
    k = cudac.CudaKernel(function=lambda *a, **kw: pytest.fail("must not launch"), name="k")
    with pytest.raises(ValueError, match="more than 1024 threads"):
        k(grid=(1,), block=(32, 64))
    with pytest.raises(ValueError, match="not a multiple of 32: the last warp would be partial"):
        k(grid=(1,), block=(250,))


def test_softmax_ref_is_float64_and_masks_minus_inf():
    x = torch.randn(3, 7) * 50
    x[:, 2] = float("-inf")
    y = softmax_ref(x)
    assert y.dtype == torch.float64
    assert torch.allclose(y, torch.softmax(x.double(), -1), atol=1e-15)
    assert (y[:, 2] == 0).all() and torch.allclose(y.sum(-1), torch.ones(3, dtype=torch.float64))


def test_rows_input_can_restrict_dtypes_and_say_what_to_use_for_longer_rows():
    x = torch.randn(2, 8, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"one of \(float32\) for this CUDA kernel, got torch.float16"):
        check_rows_input(x, dtypes=(torch.float32,), what="CUDA kernel")
    with pytest.raises(ValueError, match="at most 4 elements.*use layernorm_block"):
        check_rows_input(x.float(), max_n=4, what="warp kernel", longer="use layernorm_block for longer rows")


def test_ladder_benchmark_tells_kernels_apart_by_signature():
    from helpers.bench_cuda03 import check, kind_of

    assert kind_of(lambda x, weight=None, bias=None, eps=1e-5: 0) == "layernorm"
    assert kind_of(lambda x, weight=None, eps=1e-6: 0) == "rmsnorm"
    assert kind_of(lambda x: 0) == "softmax"
    x, w, b = torch.randn(4, 16), torch.rand(16) + 0.5, torch.randn(16)
    y = torch.nn.functional.layer_norm(x, (16,), w, b, 1e-5)
    assert check(("layernorm", (y, None, None)), (x, w, b))[0]
    assert not check(("softmax", y), (x, w, b))[0]


def test_make_notebooks_turns_stubs_inside_cuda_strings_into_c_comments():
    from autograder.stubs import c_stubs

    src = 'S = r"""\nvoid f() {\n    # YOUR CODE HERE\n    pass\n}\n"""\ndef g():\n    # YOUR CODE HERE\n    pass\n'
    assert c_stubs(src) == 'S = r"""\nvoid f() {\n    // YOUR CODE HERE\n}\n"""\ndef g():\n    # YOUR CODE HERE\n    pass\n'


# Verbatim from compute-sanitizer 2025.3.1 racecheck on an H100 (host frames and two more hazards cut): v4 without
# block_sum's second block.sync(), its source compiled with -lineinfo; the GPU tests run the tool on the mutant.
BLOCK_SUM = "cooperative_groups::__v1::thread_block &, cooperative_groups::__v1::thread_block_tile<(unsigned int)32, void> &"
RACECHECK_OUTPUT = f"""========= COMPUTE-SANITIZER
========= Error: Potential WAR hazard detected at __shared__ 0x41c in block (0,0,0) :
=========     Read Thread (39,0,0) at block_sum(float, {BLOCK_SUM}, float *)+0x670 in kernel.cu:13
=========     Write Thread (224,0,0) at block_sum(float, {BLOCK_SUM}, float *)+0xe60 in kernel.cu:11
=========     Current Value : 115, Incoming Value : 75
=========     Saved host backtrace up to driver entry point at kernel launch time
========= 
REPLAY DONE
========= RACECHECK SUMMARY: 4 hazards displayed (89 errors, 12 warnings)
"""


def test_racecheck_report_is_read_and_said_in_words():
    from autograder.racecheck import parse_report

    src = "\n" * 10 + "    if (lane == 0) partial[w] = v;\n\n    float t = partial[lane];\n"
    hazards, first = parse_report(RACECHECK_OUTPUT, {"layernorm_block_k4": src})
    assert hazards == 89 + 12
    assert first == ("Potential WAR hazard on shared memory in block (0,0,0): read by thread (39,0,0) in block_sum, "
                     "line 13 `float t = partial[lane];`; write by thread (224,0,0) in block_sum, line 11 "
                     "`if (lane == 0) partial[w] = v;`")
    # without -lineinfo: no lines to quote, the threads and functions still said
    _, first = parse_report(RACECHECK_OUTPUT.replace(" in kernel.cu:13", "").replace(" in kernel.cu:11", ""), {})
    assert first.endswith("read by thread (39,0,0) in block_sum; write by thread (224,0,0) in block_sum")
    assert parse_report("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)", {}) == (0, "")
    with pytest.raises(ValueError, match="no RACECHECK SUMMARY"):
        parse_report("Segmentation fault", {})


# Verbatim from compute-sanitizer memcheck on an H100 (host frames and three more errors cut): review 03d's B21,
# `__shared__ float partial[16]` written by the 22nd warp of a 704-thread block, inside the __device__ block_sum.
LAYERNORM_BLOCK = "float *, float *, float *, const float *, const float *, const float *, int, int, float"
MEMCHECK_OUTPUT = f"""========= COMPUTE-SANITIZER
========= Invalid __shared__ write of size 4 bytes
=========     at block_sum(float, {BLOCK_SUM}, float *)+0x1f90 in kernel.cu:11
=========     by thread (704,0,0) in block (0,0,0)
=========     Access to 0x458 is out of bounds
=========         Device Frame: void layernorm_block<(int)16, (bool)1>({LAYERNORM_BLOCK})+0x1d90 in kernel.cu:50
=========         Device Frame: layernorm_block_k16_vec+0x10 in kernel.cu:106
=========     Saved host backtrace up to driver entry point at kernel launch time
========= 
========= ERROR SUMMARY: 4 errors
"""


def test_memcheck_report_names_the_kernel_that_called_the_device_function():
    """Review 03d F5: the `at` line names block_sum; the kernel is in the device frames, not the first one
    recorded (k4_vec, whose blocks have no thread 704)."""
    from autograder.racecheck import parse_memcheck

    src = "\n" * 10 + "    if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = v;\n"
    sources = {"layernorm_block_k4_vec": src, "layernorm_block_k4": src, "layernorm_block_k16_vec": src}
    errors, first = parse_memcheck(MEMCHECK_OUTPUT, sources)
    assert errors == 4
    assert first == ("a 4-byte write of shared memory outside every allocation, in layernorm_block_k16_vec line 11 "
                     "`if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = v;` (thread (704,0,0) of "
                     "block (0,0,0))")
    # no frame names a recorded kernel: the line is quoted from the one source without naming a kernel
    bare = MEMCHECK_OUTPUT.replace("layernorm_block_k16_vec+", "something_else+")
    _, first = parse_memcheck(bare, sources)
    assert ", in line 11 `if (warp.thread_rank()" in first and "layernorm_block_k" not in first
    _, first = parse_memcheck(bare, {"a": src, "b": "other"})
    assert ", at line 11 of the CUDA C (thread" in first
    assert parse_memcheck("========= ERROR SUMMARY: 0 errors", {}) == (0, "")


def test_racecheck_records_launches_without_running_them_and_keeps_the_bytes_around_a_view():
    from autograder.racecheck import _unpack, recording_cuda_launches

    k = cudac.CudaKernel(function=lambda *a, **kw: pytest.fail("must not launch"), name="k", src="// the source")
    buf = torch.arange(20.0)
    view = buf[3:15].view(3, 4)
    with recording_cuda_launches() as launches:
        k(view, None, np.int32(12), grid=(3,), block=(32,))
    assert [(launch["name"], launch["src"], launch["grid"], launch["block"]) for launch in launches] == [
        ("k", "// the source", (3,), (32,))]
    packed = launches[0]["args"]
    assert packed[1] is None and packed[2] == 12
    assert torch.equal(packed[0]["tensor"], buf) and torch.equal(_unpack(packed[0]), view)
    assert cudac.CudaKernel.__call__ is not None and "record" not in cudac.CudaKernel.__call__.__qualname__


def test_racecheck_case_is_skipped_without_a_gpu_never_passed():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    from autograder import grade

    ns, _ = load(ROOT / "solutions" / f"{LESSON}.ipynb")
    for exercise in ("layernorm_block", "layernorm_welford"):
        rows = [c for c in grade(exercise, ns)["cases"] if "racecheck" in c["name"]]
        assert len(rows) == 1 and rows[0]["skipped"] and not rows[0]["passed"], rows


def test_ncu_replays_once_more_when_the_profiler_itself_fails(monkeypatch):
    """The H100 once saw ncu fail to profile the correct softmax_online among 14 test processes ("Failed to
    profile ... returned an error code (9)"; alone it passed): run_ncu_loads replays a second time, and only then
    says the replay failed. A replay that fails otherwise (a kernel's fault) is not replayed again."""
    from autograder import racecheck

    metric = racecheck.LOAD_METRIC
    failed = ('==ERROR== Failed to profile "softmax_online" in process 20057\n'
              "==ERROR== The application returned an error code (9).\n")
    counted = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
               f'"Metric Name","Metric Unit","Metric Value"\n"0","1","python","h","softmax_online","1","7","",'
               f'"{metric}","byte","1,024"\nREPLAY DONE\n')
    fault = "CUDA error: an illegal memory access was encountered\n"
    launches = [{"name": "softmax_online"}]
    for texts, calls, expect in (([failed, counted], 2, {"softmax_online": 1024.0}), ([failed, failed], 2, None),
                                 ([fault, counted], 1, None)):
        seen = []
        monkeypatch.setattr(racecheck, "_replay_under", lambda *a, **k: seen.append(1) or texts[len(seen) - 1])
        monkeypatch.setattr(racecheck, "ncu_path", lambda: "ncu")
        if expect is None:
            with pytest.raises(RuntimeError, match="failed when replayed"):
                racecheck.run_ncu_loads(launches, ("softmax_online",))
        else:
            assert racecheck.run_ncu_loads(launches, ("softmax_online",)) == expect
        assert len(seen) == calls


def test_a_narrow_shuffle_gets_a_note():
    """Review student03 F5: a width below 32 shuffles within segments, and an offset of the width or more gives
    a lane its own value back (a butterfly then merges a lane with itself)."""
    from helpers.cudac import narrow_shuffles
    assert narrow_shuffles("o.n = __shfl_xor_sync(0xffffffff, s.n, off);  // __shfl_xor_sync(m, v, o, 16)") == ""
    note = narrow_shuffles("int a;\no.n = __shfl_xor_sync(0xffffffff, f(s.n, 1), off, 16);")
    assert note.startswith("; note (no points): __shfl_xor_sync(..., 16) on line 2 shuffles within segments")


@needs_nvcc
def test_a_launch_is_checked_against_the_kernels_parameters():
    """Review student03 F1: the launch's arguments in number and kind (pointer, int, float) from the kernel's PTX,
    named from its signature; PyCUDA would pass them anyway and the kernel read the wrong bytes."""
    assert cudac.kernel_params(GOOD) == {"scale": ["pointer", "pointer", "int", "float"]}
    assert cudac.param_names(GOOD, "scale") == ["y", "x", "n", "a"]
    macro = ('#define K(NAME, T) \\\n  extern "C" __global__ void NAME(T* out, int n) { out[0] = n; }\nK(k_f, float)\n'
             'K(k_i, int)\n')
    assert cudac.param_names(macro, "k_f") == ["out", "n"] and cudac.kernel_params(macro)["k_i"] == ["pointer", "int"]
    kernel = cudac.CudaKernel(None, "scale", GOOD)
    x = torch.ones(4)
    kernel.checked([x, x, np.int32(4), np.float32(2)], 1, 32, pointers=False)   # right: no error
    for args, says in [([x, x, np.int32(4)], r"scale takes 4 arguments \(y: pointer, x: pointer, n: int, a: float\); "
                                             r"the launch passes 3"),
                       ([x, x, np.float32(2), np.int32(4)], r"argument 2 \(n\) is an int in the kernel, but the launch "
                                                            r"passes np.float32\(2.0\) there: np.int32\(...\). Are the "
                                                            r"arguments in the kernel's order \(y, x, n, a\)\?"),
                       ([x, 7, np.int32(4), np.float32(2)], r"argument 1 \(x\) is a pointer in the kernel, but the "
                                                            r"launch passes a Python int \(7\)"),
                       ([x, x, 4, np.float32(2)], r"argument 2 is a Python int \(4\); give it its C type")]:
        with pytest.raises(TypeError, match=says):
            kernel.checked(args, 1, 32, pointers=False)


@needs_nvcc
def test_show_compile_and_show_launches_say_what_happened_without_raising():
    """Review student03 F3/F8: on a machine without a GPU the visible check shows what the launcher launches (its
    kernels compiled, not run) and says that the numbers are not checked; a compile error is said, not raised."""
    ns, errors = load(ROOT / "solutions" / f"{LESSON}.ipynb")
    assert not errors
    shown = cudac.show_launches(ns["rmsnorm_warp"], torch.randn(13, 1000), torch.ones(1000))
    assert shown.startswith("launches rmsnorm_warp<<<grid (2, 1, 1), block (256, 1, 1)>>>, with arguments of the kinds")
    assert "the numbers are checked where a GPU runs them" in shown
    broken = ns["RMSNORM_WARP_SRC"].replace("return;", "return")
    assert cudac.show_compile(broken, ("rmsnorm_warp",)).startswith("does NOT compile: nvcc (sm_80) failed: line ")
    no_return = ns["LAYERNORM_BLOCK_SRC"].replace("    return t;\n", "\n")   # review student03 F2: warning #940
    assert "missing return statement" in cudac.show_compile(no_return, ("layernorm_block_k4",))
    stub, _ = load(ROOT / "notebooks" / f"{LESSON}.ipynb")
    assert cudac.show_launches(stub["rmsnorm_warp"], torch.randn(13, 1000), None) == "rmsnorm_warp launched no kernel"


@needs_nvcc
def test_show_resources_reports_ptxas_registers_and_spills():
    """Review student03 F9: the one performance fact a machine without a GPU can check, ptxas's report: the
    solution's K = 16 block kernels spill (the lesson's 19 % at C = 65536), its K = 4 ones do not."""
    ns, _ = load(ROOT / "solutions" / f"{LESSON}.ipynb")
    rows = {line.split()[0]: line for line in cudac.show_resources(ns["LAYERNORM_BLOCK_SRC"]).splitlines()}
    assert set(rows) == set(get("layernorm_block").kernels)
    assert rows["layernorm_block_k16_vec"].endswith("<- spills") and "<- spills" not in rows["layernorm_block_k4"]
    assert " registers, " in rows["layernorm_block_k4"]


def test_an_int_row_offset_gets_a_note():
    """Review student03 F4: x[row * C + i] compiles and passes every case a CPU (or a GPU with less than 18 GiB
    free) runs; the compile case says so, without taking points."""
    from helpers.cudac import int_row_offsets
    assert int_row_offsets("const float* xr = x + (size_t)row * C;  // not row * C\nint rows = M * C;") == ""
    note = int_row_offsets("int a;\nfloat v = x[row * C + i];\ny[rowi * C] = v;\n")
    assert note.startswith("; note (no points): row * C on lines 2, 3 without a cast: if row is an int")
    for ex in for_lesson(LESSON):   # the lesson's own kernels cast
        assert int_row_offsets(load(ROOT / "solutions" / f"{LESSON}.ipynb")[0][ex.functions[1]]) == ""


def test_a_shfl_down_reduction_without_a_broadcast_gets_a_note():
    """Review student03: a warp sum by __shfl_down_sync compiles and passes every case a CPU runs, but leaves the
    total in lane 0 only; the compile case says so where no __shfl_sync broadcast follows, without taking points."""
    from helpers.cudac import down_shuffles
    reduce = "for (int o = 16; o > 0; o /= 2)\n    s += __shfl_down_sync(0xffffffff, s, o);\n"
    note = down_shuffles("int a;\n" + reduce)
    assert note.startswith("; note (no points): shfl_down on line 3 and no broadcast after it: ")
    assert "__shfl_sync(0xffffffff, v, 0)" in note
    assert down_shuffles(reduce + "s = __shfl_sync(0xffffffff, s, 0);\n") == ""          # broadcast: fine
    assert down_shuffles("s += warp.shfl_down(s, o);\ns = warp.shfl(s, 0);") == ""      # cooperative groups too
    assert down_shuffles("// s += __shfl_down_sync(0xffffffff, s, o);\n") == ""          # a comment is no code
    assert down_shuffles("s += warp.shfl_down(s, o);").startswith("; note (no points): shfl_down on line 1 ")
    for ex in for_lesson(LESSON):   # the lesson's own kernels reduce with shfl_xor
        assert down_shuffles(load(ROOT / "solutions" / f"{LESSON}.ipynb")[0][ex.functions[1]]) == ""
