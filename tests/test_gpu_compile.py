"""The grader's "compiles for a GPU" case (autograder/gpu_compile.py): kernels that only the interpreter accepts
are caught on a CPU, with Triton's reason and a hint; the solutions' kernels pass (test_grader's full marks).
The mutants of lessons 04 and 05 that only a GPU's compiler rejects are in tests/mutants_04.py / mutants_05.py."""
from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

from autograder import gpu_compile
from autograder.notebook import load
from autograder.registry import Case
from autograder.runner import skip_reason

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Triton installs on Linux only")

KERNELS = '''import triton
import triton.language as tl

SCALE = tl.constexpr(2.0)
OFFSET = 0.5
BLOCK = 128


@triton.jit
def _scale(x):
    return x * SCALE


@triton.jit
def good_kernel(X, Y, N, BLOCK_N: tl.constexpr):
    cols = tl.arange(0, BLOCK_N)
    acc = 0.0
    for off in range(0, N, BLOCK_N):
        acc += tl.sum(tl.load(X + off + cols, mask=off + cols < N, other=0.0), axis=0)
    tl.store(Y, _scale(acc))


@triton.jit
def int_start_kernel(X, Y, N, BLOCK_N: tl.constexpr):
    cols = tl.arange(0, BLOCK_N)
    acc = 0
    for off in range(0, N, BLOCK_N):
        acc += tl.sum(tl.load(X + off + cols, mask=off + cols < N, other=0.0), axis=0)
    tl.store(Y, acc)


@triton.jit
def global_kernel(X, Y):
    tl.store(Y, tl.load(X) + OFFSET)
'''


@pytest.fixture(scope="module")
def ns(tmp_path_factory):
    path = tmp_path_factory.mktemp("nb") / "kernels.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": KERNELS, "metadata": {}}]}))
    namespace, errors = load(path)
    assert not errors, errors
    return namespace


def _launch(kernel, **types):
    return {"kernel": kernel, "types": types, "constexprs": {"BLOCK_N": 128} if kernel != "global_kernel" else {},
            "aligned": [], "options": {"num_warps": 4}}


def test_module_text_holds_every_kernel_and_the_globals_they_read(ns):
    text = gpu_compile.module_text(ns)
    assert gpu_compile.jit_names(ns) == {"_scale", "good_kernel", "int_start_kernel", "global_kernel"}
    for name in gpu_compile.jit_names(ns):
        assert f"@triton.jit\ndef {name}(" in text
    assert "SCALE = tl.constexpr(2.0)" in text
    assert "OFFSET = 0.5" in text             # a plain global stays plain: Triton refuses it, as on a GPU
    assert "BLOCK = " not in text             # read by no kernel
    only = gpu_compile.module_text(ns, ["global_kernel"])
    assert "def global_kernel(" in only and "def good_kernel(" not in only and "SCALE" not in only


def test_launches_are_recorded_not_run(ns):
    import torch

    x, y = torch.ones(300), torch.full((1,), -1.0)
    with gpu_compile.recording_launches() as launches:
        ns["good_kernel"][(1,)](x, y, 300, BLOCK_N=128)
        ns["good_kernel"][(1,)](x, y, 300, BLOCK_N=128)
    assert float(y) == -1.0                   # nothing ran
    assert launches == [{"kernel": "good_kernel", "types": {"X": "*fp32", "Y": "*fp32", "N": "i32"},
                         "constexprs": {"BLOCK_N": 128}, "aligned": [], "options": {}}]


def test_distinct_keeps_one_launch_per_types_and_switches():
    def launch(x, block, has_w):
        return {"kernel": "k", "types": {"X": x, "N": "i32"}, "constexprs": {"BLOCK_N": block, "HAS_W": has_w},
                "aligned": [], "options": {"num_warps": block // 256 or 1}}

    launches = [launch("*fp32", 256, True), launch("*fp32", 4096, True), launch("*fp32", 1024, False),
                launch("*bf16", 256, True)]
    kept = gpu_compile.distinct(launches)
    assert [(k["types"]["X"], k["constexprs"]["BLOCK_N"], k["constexprs"]["HAS_W"]) for k in kept] == [
        ("*fp32", 4096, True), ("*fp32", 1024, False), ("*bf16", 256, True)]


def test_kernels_only_the_interpreter_accepts_fail_with_the_reason_and_a_hint(ns):
    text = gpu_compile.module_text(ns, ["good_kernel", "int_start_kernel", "global_kernel"])
    assert "def _scale(" in text and "SCALE = tl.constexpr(2.0)" in text    # called by good_kernel
    rows = gpu_compile.compile_elsewhere(text, [_launch("good_kernel", X="*fp32", Y="*fp32", N="i32"),
                                                _launch("int_start_kernel", X="*fp32", Y="*fp32", N="i32"),
                                                _launch("global_kernel", X="*fp32", Y="*fp32")])
    good, int_start, glob = rows
    assert good == {"kernel": "good_kernel", "ok": True, "problem": None}
    assert not int_start["ok"] and "Loop-carried variable acc" in int_start["problem"]
    assert "line 4 of int_start_kernel `for off in range(0, N, BLOCK_N):`" in int_start["problem"]
    assert "start a float as 0.0 (not 0)" in int_start["problem"]
    assert not glob["ok"] and "globals that are tl.constexpr" in glob["problem"]
    gpu_compile.remember(ns, rows)
    assert gpu_compile.known_failure(ns, ["good_kernel"]) is None
    assert gpu_compile.known_failure(ns, ["good_kernel", "global_kernel"])[0] == "global_kernel"


def test_explain_points_at_the_line_and_adds_the_hint():
    text = "import triton\n\n@triton.jit\ndef k(X):\n    y = X ** 2\n"
    e = Exception("compile failed")
    e.error_message, e.node = "AttributeError(\"'tensor' object has no attribute '__pow__'\")", SimpleNamespace(lineno=2)
    msg = gpu_compile.explain(e, text, "k")
    assert msg.startswith("line 2 of k `y = X ** 2`: AttributeError")
    assert msg.endswith("Triton tensors have no ** operator: write x * x")
    plain = gpu_compile.explain(ValueError("something else"), text, "k")
    assert plain == "ValueError: something else"


def test_the_case_is_skipped_with_a_triton_too_old_to_compile_offline(monkeypatch):
    import helpers.env

    case = Case("compiles", lambda ns: (True, ""), needs="triton-compile")
    monkeypatch.setattr(helpers.env, "installed_version", lambda package: "3.2.0")
    assert "Triton 3.3 or newer (found 3.2.0)" in skip_reason(case, gpu=False)
    monkeypatch.setattr(helpers.env, "installed_version", lambda package: "3.6.0")
    assert skip_reason(case, gpu=False) is None


def test_compiled_launches_are_recorded_as_the_interpreted_ones(ns, tmp_path):
    """On a GPU the kernels are JITFunctions: the recorder catches JITFunction.run the same way, before Triton
    touches a driver (so a CPU process without TRITON_INTERPRET can show it)."""
    import os
    import subprocess

    import torch

    module = tmp_path / "kernels.py"
    module.write_text(KERNELS)
    code = (
        "import importlib.util, json, sys, torch\n"
        f"spec = importlib.util.spec_from_file_location('gc', {str(gpu_compile.__file__)!r})\n"
        "gc = importlib.util.module_from_spec(spec); spec.loader.exec_module(gc)\n"
        f"spec = importlib.util.spec_from_file_location('kernels', {str(module)!r})\n"
        "k = importlib.util.module_from_spec(spec); spec.loader.exec_module(k)\n"
        "assert type(k.good_kernel).__name__ == 'JITFunction', type(k.good_kernel)\n"
        "with gc.recording_launches() as launches:\n"
        "    k.good_kernel[(1,)](torch.ones(300), torch.ones(1), 300, BLOCK_N=128, num_warps=2)\n"
        "print(json.dumps(launches))\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    compiled = json.loads(proc.stdout.strip().splitlines()[-1])
    with gpu_compile.recording_launches() as interpreted:
        ns["good_kernel"][(1,)](torch.ones(300), torch.ones(1), 300, BLOCK_N=128, num_warps=2)
    assert compiled == interpreted and compiled[0]["options"] == {"num_warps": 2}
