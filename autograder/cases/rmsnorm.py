"""Hidden cases of lesson 04 (Triton fused RMSNorm forward); the machinery is in autograder/rowcases.py."""
from __future__ import annotations

from dataclasses import replace

import torch

from ..rowcases import RMSNORM, ROWS_GRID, SWAPPED, Spec, exercise, far_rows

LESSON = "04_triton_rmsnorm"


def _exercise(id, title, functions, kernels, specs, far_n, **more):
    return exercise(LESSON, RMSNORM, id, title, functions, kernels, specs, far_rows=far_rows(far_n), **more)


F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
ONE_LAUNCH = "one launch of grid (M,): one program per row, all rows at once"
CHUNK_GIVEN = "a block_n the caller gives is the chunk (BLOCK_N) the kernel loops in"
WHOLE_ROW = "BLOCK_N = triton.next_power_of_2(N): the row's columns padded to a power of two, no more"
PERSISTENT_GRID = ("a persistent grid of num_programs programs (never more than M), each looping over rows "
                   "pid, pid + num_programs, ...")

COMMON = [
    Spec("1x1: a single element", (1, 1)),
    Spec("N=7, one row (N not a power of two: a block of 8)", (1, 7), seed=1),
    Spec("1823x781 fp32", (1823, 781), seed=2),
    Spec("257x781 fp16", (257, 781), F16, seed=3),
    Spec("64x1151 bf16, fp32 weight", (64, 1151), BF16, weight="fp32", seed=4),
    Spec("fp16 whose squares overflow fp16 (|x|~300)", (33, 1600), F16, scale=300.0, seed=5),
    Spec("eps matters: |x|~1e-3, eps=1e-3", (16, 500), eps=1e-3, scale=1e-3, seed=6),
    Spec("zero rows (y=0, rstd=1/sqrt(eps))", (9, 100), zero_rows=(2, 5), seed=7),
    Spec("3-D input (4, 9, 300) bf16, then a second call", (4, 9, 300), BF16, seed=8, twice=True),
    Spec("non-contiguous rows (row stride N+37)", (50, 781), row_pad=37, seed=9),
    Spec("3-D view with dims 0 and 1 swapped (no one row stride)", (4, 9, 300), swap01=True, hint=SWAPPED,
         seed=16),
    Spec("no weight (weight=None), N=4097 fp16", (6, 4097), F16, weight="none", seed=10),
    Spec("constant rows, large values (x = 1e4)", (8, 333), const=1e4, seed=11),
    Spec("1-D input: a single row of 640", (640,), seed=12),
    Spec("bad input: weight of the wrong shape", (4, 64), bad="weight_shape", seed=13),
    Spec("bad input: integer x", (4, 64), bad="int_dtype", seed=14),
    Spec("bad input: last dim not contiguous", (64, 8), bad="last_dim_stride", seed=15),
]

_exercise(
    "rmsnorm_fwd", "RMSNorm forward: one row per program",
    ("rmsnorm_fwd", "_rmsnorm_fwd_kernel"), ("_rmsnorm_fwd_kernel",),
    [replace(s, grid=(1823,), grid_why=ONE_LAUNCH, one_launch=True) if s.shape == (1823, 781) else
     replace(s, launch_args={"BLOCK_N": 8}, launch_why=WHOLE_ROW) if s.shape == (1, 7) else s for s in COMMON] + [
        Spec("N=65536, the largest single block", (2, 65536), seed=20),
        Spec("bad input: N=65537 is too long for one block", (2, 65537), bad="too_long", seed=21),
    ], far_n=1000)

_exercise(
    "rmsnorm_fwd_rows", "RMSNorm forward: several rows per program",
    ("rmsnorm_fwd_rows", "_rmsnorm_fwd_rows_kernel"), ("_rmsnorm_fwd_rows_kernel",),
    COMMON + [
        Spec("rows_per_program=4, M=5 (the last program has 1 row of 4)", (5, 33), kwargs={"rows_per_program": 4},
             grid=(2,), grid_why=ROWS_GRID, launch_args={"BLOCK_N": 64}, launch_why=WHOLE_ROW, one_launch=True,
             seed=30),
        Spec("rows_per_program=8, M=1023, N=64", (1023, 64), kwargs={"rows_per_program": 8}, grid=(128,),
             grid_why=ROWS_GRID, seed=31),
        Spec("rows_per_program=16, N=1, M=37", (37, 1), kwargs={"rows_per_program": 16}, grid=(3,),
             grid_why=ROWS_GRID, seed=32),
        Spec("rows_per_program=2, bf16 300x512, strided", (300, 512), BF16, row_pad=8,
             kwargs={"rows_per_program": 2}, grid=(150,), grid_why=ROWS_GRID, seed=33),
        Spec("rows_per_program=None, N=2048, M=300 (the default by N)", (300, 2048), launch_args={"BLOCK_M": 4},
             grid=(75,), grid_why=ROWS_GRID,
             launch_why="rows_per_program=None takes rows_per_program_for(N) = 4 at N=2048 (by N, the row length, "
                        "not by M)", seed=35),
        Spec("bad input: rows_per_program=3, 6, 0 (powers of two >= 1 only)", (6, 64),
             kwargs={"rows_per_program": 3}, bad="kwarg", bad_kwargs=({"rows_per_program": 6}, {"rows_per_program": 0}),
             seed=34),
    ], far_n=1000)

_exercise(
    "rmsnorm_fwd_looped", "RMSNorm forward: rows of any length (persistent, looped)",
    ("rmsnorm_fwd_looped", "_rmsnorm_fwd_looped_kernel"), ("_rmsnorm_fwd_looped_kernel",),
    COMMON + [
        Spec("block_n=32, N=40 (a partial last chunk), M=300 on the default grid", (300, 40),
             kwargs={"block_n": 32}, launch_args={"BLOCK_N": 32}, launch_why=CHUNK_GIVEN,
             grid=lambda ns, M: (ns["default_num_programs"](M),) if callable(ns.get("default_num_programs")) else None,
             grid_why="num_programs=None launches default_num_programs(M) programs, " + PERSISTENT_GRID, seed=40),
        Spec("block_n=1024, N=4097 (one element in the last chunk)", (5, 4097), F16,
             kwargs={"block_n": 1024}, launch_args={"BLOCK_N": 1024}, launch_why=CHUNK_GIVEN, seed=41),
        Spec("N=10000 fp32 (the default chunk: 8192, then 1808)", (3, 10000), launch_args={"BLOCK_N": 8192},
             launch_why="block_n=None takes block_n_for(N, 4) = 8192 (32 KB chunks of fp32), never the whole row",
             seed=46),
        Spec("N=131072 (longer than any single block)", (2, 131072), BF16, launch_args={"BLOCK_N": 16384},
             launch_why="block_n=None takes block_n_for(N, 2) = 16384 (32 KB chunks of bf16), never the whole row",
             seed=42),
        Spec("num_programs=3 for M=10 rows (each program loops)", (10, 300),
             kwargs={"num_programs": 3, "block_n": 128}, grid=(3,), grid_why=PERSISTENT_GRID,
             launch_args={"BLOCK_N": 128}, launch_why=CHUNK_GIVEN, one_launch=True, seed=43),
        Spec("bad input: block_n=1000, 0 (powers of two only)", (3, 2000), kwargs={"block_n": 1000},
             bad="kwarg", bad_kwargs=({"block_n": 0},), seed=44),
        Spec("bad input: num_programs=0, 2.5", (3, 200), kwargs={"num_programs": 0}, bad="kwarg",
             bad_kwargs=({"num_programs": 2.5},), seed=45),
    ], far_n=40000, read_chunks={"block_n": 256},
    x_reads=("x read twice, not three times (a loop for the sum of squares, one to normalise)",
             Spec("block_n=1024, 4x4096 bf16 (4 chunks)", (4, 4096), BF16, kwargs={"block_n": 1024}, seed=47), 2,
             "the first loop sums x^2 chunk by chunk and the second normalises, so x is read twice; a third loop "
             "over the row (for max|x|, or a second kernel for y) reads it three times from HBM"))
