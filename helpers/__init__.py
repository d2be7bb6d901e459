"""Course helpers: environment set-up, float64 references, comparisons, benchmarks.

`import helpers` first in every notebook: without a CUDA GPU it switches Triton to its CPU
interpreter before any kernel is defined.
"""
from .env import setup, device, on_gpu, device_name

setup()

from .compare import (Tolerance, CompareResult, compare, compare_each, compare_outputs, print_verdict,  # noqa: E402
                      print_unchanged, tolerance_for, poison_, is_poison)
from .reference import rmsnorm_ref, layernorm_ref, softmax_ref  # noqa: E402
from .validate import check_rows_input  # noqa: E402
from .workspace import split_workspace  # noqa: E402

__all__ = ["setup", "device", "on_gpu", "device_name", "Tolerance", "CompareResult", "compare", "compare_each",
           "compare_outputs", "print_verdict", "print_unchanged", "tolerance_for", "poison_", "is_poison",
           "rmsnorm_ref", "layernorm_ref", "softmax_ref", "check_rows_input", "split_workspace"]
