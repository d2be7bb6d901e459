"""Hidden cases of lesson 05 (Triton fused LayerNorm forward); the machinery is in autograder/rowcases.py."""
from __future__ import annotations

from dataclasses import replace

import torch

from ..rowcases import LAYERNORM, ROWS_GRID, SWAPPED, Spec, exercise, far_rows

LESSON = "05_triton_layernorm"
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
BIG_MEAN = ("These rows have mean 1e4: E[x^2] - E[x]^2 in fp32 cancels every digit of a variance of 1 "
            "(catastrophic cancellation, lesson 02); subtract the mean first (two-pass or Chan's merge)")
SPIKE = ("One value per row (or per chunk) sits far from the rest, at its start, middle or end: sums of x - k and "
         "of its square around one element k of the row (x[0], x[N-1], ...) cancel where k is that value (s2 - "
         "s1^2/n loses most of its bits; so does E[x^2] - E[x]^2). Subtract the mean itself, or check for the "
         "cancellation and sum again around the mean")
TWO_CHUNKS = ("16-bit rows over 32 KB go in two chunks (block_n = next_power_of_2(N) // 2): one chunk of the whole "
              "row needs more registers than a program has, and spills (exercise 4's table)")
ONE_CHUNK = "up to 128 KB a row is one chunk, block_n = next_power_of_2(N): x is read once from HBM, once from L2"
GIVEN_CHUNK = ("the block_n given is the chunk: launch the kernel with BLOCK_N=block_n (a whole-row block hides "
               "the loop and Chan's merge, and spills registers on a GPU)")
DEFAULT_CHUNK = ("block_n=None takes block_n_for(N, 2) = 8192: 16 KB chunks, never the whole row (one block of "
                 "131072 values spills registers on a GPU)")
DEFAULT_SHORT = ("block_n=None takes block_n_for(N, x.element_size()) = min(next_power_of_2(N), 16 KB of elements): a "
                 "short row is one chunk of next_power_of_2(N) lanes, not 16 KB of them")
DEFAULT_FP32 = ("block_n=None takes block_n_for(N, x.element_size()): 16 KB chunks, 4096 fp32 values (8192 bf16); the "
                "element size is x's, not 2")
CHUNKS = ("Right when the row is one chunk, wrong over several: look at what carries from one chunk to the next (the "
          "running sums; Chan's merge: mean += delta * n_c / n', M2 += M2_c + delta^2 * n * n_c / n') and at the last, "
          "partial chunk (its count n_c and its mask)")
CHUNKS_FIXED = ("Right when the row is one chunk, wrong over several: look at each loop's chunks, the sums carried "
                "from one chunk to the next and the last, partial chunk (its mask, in every loop)")
SPLIT_DEFAULT = ("the split kernel with its default chunk (SPLIT_CHUNK = 8192 elements a program): a whole-row chunk "
                 "is one program per row holding 128 KB or more (it spills), a short one makes thousands of programs "
                 "wait on each other")
DISPATCHED = " (if your dispatcher passes that block_n: does your layernorm_fwd_looped launch the block_n it is given?)"
TILE, FIXED, LOOPED = "_layernorm_fwd_kernel", "_layernorm_fwd_fixed_kernel", "_layernorm_fwd_looped_kernel"
SPLIT = "_layernorm_fwd_split_kernel"

COMMON = [
    Spec("1x1: a single element (y = bias)", (1, 1), eps=1e-5),
    Spec("N=7, one row (N not a power of two)", (1, 7), eps=1e-5, seed=1),
    Spec("301x781 fp32 (M odd, not a multiple of rows per program)", (301, 781), eps=1e-5, seed=2),
    Spec("257x781 fp16", (257, 781), F16, eps=1e-5, seed=3),
    Spec("64x1151 bf16, fp32 weight and bias", (64, 1151), BF16, weight="fp32", eps=1e-5, seed=4),
    Spec("rows with mean 1e4, std 1 (one-pass variance fails)", (64, 1600), offset=1e4, eps=1e-5,
         atol=1e-2, stat_rtol=5e-5, hint=BIG_MEAN, seed=5),
    Spec("one outlier per row (10, the rest ~0.01): in column 0, 1, N/2 or N-1", (8, 3000), scale=0.01,
         spike_cols=(0, 1, 1500, -1, 0, 2, 1499, -2), spike=10.0, eps=1e-5, hint=SPIKE, seed=19),
    Spec("fp16 whose squares overflow fp16 (|x|~300)", (33, 1600), F16, scale=300.0, eps=1e-5, seed=6),
    Spec("eps matters: |x|~1e-3, eps=1e-3", (16, 500), eps=1e-3, scale=1e-3, seed=7),
    Spec("zero rows (y = bias, rstd = 1/sqrt(eps))", (9, 100), zero_rows=(2, 5), eps=1e-5, seed=8),
    Spec("constant rows x = 1e4 (variance exactly 0)", (8, 333), const=1e4, eps=1e-5, seed=9),
    Spec("3-D input (4, 9, 300) bf16, then a second call", (4, 9, 300), BF16, eps=1e-5, seed=10, twice=True),
    Spec("non-contiguous rows (row stride N+37)", (50, 781), row_pad=37, eps=1e-5, seed=11),
    Spec("3-D view with dims 0 and 1 swapped (no one row stride)", (4, 9, 300), swap01=True, eps=1e-5, hint=SWAPPED,
         seed=26),
    Spec("no weight, no bias, N=4097 fp16", (6, 4097), F16, weight="none", eps=1e-5, seed=12),
    Spec("weight but no bias, N=2000 bf16", (10, 2000), BF16, bias=False, eps=1e-5, seed=13),
    Spec("bias but no weight, N=1000", (7, 1000), weight="bias_only", eps=1e-5, seed=25),
    Spec("1-D input: a single row of 640", (640,), eps=1e-5, seed=14),
    Spec("bad input: weight of the wrong shape", (4, 64), bad="weight_shape", seed=15),
    Spec("bad input: bias of the wrong shape", (4, 64), bad="bias_shape", seed=16),
    Spec("bad input: integer x", (4, 64), bad="int_dtype", seed=17),
    Spec("bad input: last dim not contiguous", (64, 8), bad="last_dim_stride", seed=18),
]

LONG = [
    Spec("block_n=256, N=1000 (a partial last chunk)", (12, 1000), eps=1e-5, kwargs={"block_n": 256},
         launch_args={"BLOCK_N": 256}, launch_why=GIVEN_CHUNK, hint=CHUNKS, chunked=True, one_launch=True, seed=40),
    Spec("block_n=1024, N=4097 (one element in the last chunk), then a second call", (5, 4097), F16, eps=1e-5,
         kwargs={"block_n": 1024}, launch_args={"BLOCK_N": 1024}, launch_why=GIVEN_CHUNK, hint=CHUNKS, chunked=True,
         twice=True, seed=41),
    Spec("block_n=128, mean 1e4 over 40 chunks", (4, 5000), offset=1e4, eps=1e-5, atol=1e-2, stat_rtol=5e-5,
         hint=BIG_MEAN, kwargs={"block_n": 128}, launch_args={"BLOCK_N": 128}, launch_why=GIVEN_CHUNK, seed=42),
    Spec("block_n=1024: every chunk starts with an outlier (10, the rest ~0.01)", (4, 8192), scale=0.01,
         spike_every=1024, spike=10.0, eps=1e-5, hint=SPIKE, kwargs={"block_n": 1024},
         launch_args={"BLOCK_N": 1024}, launch_why=GIVEN_CHUNK, seed=45),
    Spec("block_n=256, non-contiguous rows (row stride N+37) over 4 chunks", (6, 781), row_pad=37, eps=1e-5,
         kwargs={"block_n": 256}, launch_args={"BLOCK_N": 256}, launch_why=GIVEN_CHUNK, seed=46),
    Spec("block_n=128, 3-D view with dims 0 and 1 swapped, 3 chunks", (2, 3, 300), swap01=True, eps=1e-5,
         hint=SWAPPED, kwargs={"block_n": 128}, launch_args={"BLOCK_N": 128}, launch_why=GIVEN_CHUNK, seed=47),
    Spec("block_n=512, fp16 |x|~300 (squares overflow fp16) over 4 chunks", (4, 1600), F16, scale=300.0, eps=1e-5,
         kwargs={"block_n": 512}, launch_args={"BLOCK_N": 512}, launch_why=GIVEN_CHUNK, seed=48),
    Spec("block_n=256, bias but no weight, N=1000", (3, 1000), weight="bias_only", eps=1e-5,
         kwargs={"block_n": 256}, launch_args={"BLOCK_N": 256}, launch_why=GIVEN_CHUNK, hint=CHUNKS, chunked=True,
         seed=49),
    Spec("N=131072 bf16 (longer than any single block), the default chunk", (2, 131072), BF16, eps=1e-5,
         launch_args={"BLOCK_N": 8192}, launch_why=DEFAULT_CHUNK, seed=43),
    Spec("N=100 bf16, the default chunk (block_n_for: 128, no longer than the row)", (4, 100), BF16, eps=1e-5,
         launch_args={"BLOCK_N": 128}, launch_why=DEFAULT_SHORT, seed=73),
    Spec("N=5000 fp32, the default chunk (16 KB of fp32: 4096)", (3, 5000), eps=1e-5, launch_args={"BLOCK_N": 4096},
         launch_why=DEFAULT_FP32, seed=74),
    Spec("bad input: block_n=1000 (not a power of two)", (3, 2000), kwargs={"block_n": 1000}, bad="kwarg",
         seed=44),
]

exercise(LESSON, LAYERNORM, "layernorm_fwd", "LayerNorm forward: a tile of rows in registers",
         ("layernorm_fwd", TILE), (TILE,),
         COMMON + [
             Spec("N=65536, the largest single block", (2, 65536), eps=1e-5, seed=20),
             Spec("bad input: N=65537 is too long for one block", (2, 65537), bad="too_long", seed=21),
             Spec("rows_per_program=4, M=5 (the last program has 1 row of 4)", (5, 33), eps=1e-5,
                  kwargs={"rows_per_program": 4}, grid=(2,), grid_why=ROWS_GRID, one_launch=True,
                  launch_args={"BLOCK_N": 64},
                  launch_why="BLOCK_N = triton.next_power_of_2(N): the tile's columns, no more", seed=22),
             Spec("rows_per_program=16, N=1, M=37", (37, 1), eps=1e-5, kwargs={"rows_per_program": 16}, seed=23),
             Spec("rows_per_program=2, bf16 300x512, strided", (300, 512), BF16, row_pad=8, eps=1e-5,
                  kwargs={"rows_per_program": 2}, seed=24),
         ], far_rows=far_rows(1000, eps=1e-5),
         x_reads=("the tile read at most twice (mean and variance from the same loaded values)",
                  Spec("64x512 bf16, 4 rows per program", (64, 512), BF16, eps=1e-5, seed=75), 2,
                  "the mean and the variance are two reductions over the tile already in registers, then y reads it "
                  "again (or keeps it): a load for the mean and another for the variance read it three times"))

exercise(LESSON, LAYERNORM, "layernorm_fwd_fixed", "LayerNorm forward: the repaired three-pass looped kernel",
         ("layernorm_fwd_fixed", FIXED), (FIXED,),
         COMMON + [replace(s, hint=CHUNKS_FIXED) if s.hint == CHUNKS else s for s in LONG],   # three loops, no merge
         given=("layernorm_fwd_fixed",),
         read_chunks={"block_n": 256})

READ_TWICE = Spec("block_n=1024, 4x4096 bf16 (4 chunks)", (4, 4096), BF16, eps=1e-5, kwargs={"block_n": 1024},
                  seed=67)
THIRD_READ = ("the first loop merges each chunk's statistics into the row's (Chan's rule), so x is read once for "
              "the statistics and once to normalise; a loop for the mean and another for the variance read it "
              "three times (exercise 2's kernel)")
exercise(LESSON, LAYERNORM, "layernorm_fwd_looped", "LayerNorm forward: two passes with Chan's merge",
         ("layernorm_fwd_looped", LOOPED), (LOOPED,), COMMON + LONG,
         x_reads=("x read twice, not three times (Chan's merge in the first loop)", READ_TWICE, 2, THIRD_READ),
         far_rows=far_rows(40000, eps=1e-5), read_chunks={"block_n": 256}, stat_hints={"rstd": (
             "rstd = 1/sqrt(M2/N + eps): biased variance, M2 over N, M2 from Chan's merge of the chunks; where rows of "
             "one chunk are wrong too, look at the first merge: merged into the empty state (n = 0) the first chunk "
             "must come out as its own mean and M2, as the between-chunk term delta^2 * n * n_c / n' vanishes there")})

exercise(LESSON, LAYERNORM, "layernorm", "LayerNorm forward: a dispatcher for every N",
         ("layernorm",), (TILE, LOOPED, SPLIT),
         # the 3-D cases are routed too: N is x.shape[-1] (300: the tile), whatever the leading dims; fp32 rows of
         # 500 get the tile kernel's own rows per program (2, from x's element size: a grid of 8 for 16 rows)
         [replace(s, launches=TILE) if len(s.shape) == 3 else
          replace(s, launches=TILE, grid=(8,), grid_why="the tile kernel with rows_per_program_for(N, "
                  "x.element_size()): 2 fp32 rows of 2 KB, " + ROWS_GRID) if s.name.startswith("eps matters") else s
          for s in COMMON if not s.bad] + [
             Spec("N=512 bf16 (1 KB rows) goes to the tile kernel", (64, 512), BF16, eps=1e-5, launches=TILE,
                  grid=(16,), grid_why="the tile kernel with its own rows per program (rows_per_program_for: 4 "
                  "rows of 1 KB), " + ROWS_GRID, seed=50),
             Spec("N=1000 bf16 (2000-byte rows, under 2 KB) goes to the tile kernel", (16, 1000), BF16, eps=1e-5,
                  launches=TILE, seed=68),
             Spec("N=512 fp16, only 3 rows, still the tile kernel (the rules go by the row, not by M)", (3, 512), F16,
                  eps=1e-5, launches=TILE, seed=70),
             Spec("N=1024 bf16 (2 KB rows) goes to the looped kernel, one chunk", (16, 1024), BF16, eps=1e-5,
                  launches=LOOPED, launch_args={"BLOCK_N": 1024}, launch_why=ONE_CHUNK + DISPATCHED, seed=60),
             Spec("N=1024 fp32 (4 KB rows) goes to the tile kernel", (16, 1024), eps=1e-5, launches=TILE,
                  seed=51),
             Spec("N=2048 fp32 (8 KB rows) goes to the tile kernel", (8, 2048), eps=1e-5, launches=TILE,
                  seed=55),
             Spec("N=2049 fp32 (just over 8 KB rows) goes to the looped kernel, one chunk", (4, 2049), eps=1e-5,
                  launches=LOOPED, launch_args={"BLOCK_N": 4096}, launch_why=ONE_CHUNK + DISPATCHED, seed=61),
             Spec("eps=1e-2 reaches the looped kernel (16 KB rows, |x|~0.1)", (4, 4096), eps=1e-2, scale=0.1,
                  launches=LOOPED, launch_args={"BLOCK_N": 4096}, launch_why=ONE_CHUNK + DISPATCHED, seed=56),
             Spec("N=16384 fp32 (64 KB rows) goes to the looped kernel, one chunk", (2, 16384), eps=1e-5,
                  launches=LOOPED, launch_args={"BLOCK_N": 16384}, launch_why=ONE_CHUNK + DISPATCHED, seed=52),
             Spec("N=32768 fp32 (exactly 128 KB rows) goes to the looped kernel, one chunk", (2, 32768), eps=1e-5,
                  launches=LOOPED, launch_args={"BLOCK_N": 32768}, launch_why=ONE_CHUNK + DISPATCHED, seed=63),
             Spec("N=16384 bf16 (exactly 32 KB rows) goes to the looped kernel, one chunk", (2, 16384), BF16,
                  eps=1e-5, launches=LOOPED, launch_args={"BLOCK_N": 16384}, launch_why=ONE_CHUNK + DISPATCHED,
                  seed=64),
             Spec("N=32768 bf16 (64 KB rows) goes to the looped kernel, two chunks", (2, 32768), BF16, eps=1e-5,
                  launches=LOOPED, launch_args={"BLOCK_N": 16384}, launch_why=TWO_CHUNKS + DISPATCHED, seed=57),
             Spec("N=32768 fp16 (64 KB rows) goes to the looped kernel, two chunks", (2, 32768), F16, eps=1e-5,
                  launches=LOOPED, launch_args={"BLOCK_N": 16384}, launch_why=TWO_CHUNKS + DISPATCHED, seed=65),
             Spec("N=20000 bf16 (40 KB rows) goes to the looped kernel, two chunks", (2, 20000), BF16, eps=1e-5,
                  launches=LOOPED, launch_args={"BLOCK_N": 16384}, launch_why=TWO_CHUNKS + DISPATCHED, seed=76),
             Spec("N=65536 bf16 (128 KB rows) goes to the looped kernel, two chunks", (2, 65536), BF16, eps=1e-5,
                  launches=LOOPED, launch_args={"BLOCK_N": 32768}, launch_why=TWO_CHUNKS + DISPATCHED, seed=59),
             Spec("N=2048 fp16 (4 KB rows) goes to the looped kernel (16-bit rows: the tile only under 2 KB)",
                  (8, 2048), F16, eps=1e-5, launches=LOOPED, launch_args={"BLOCK_N": 2048},
                  launch_why=ONE_CHUNK + DISPATCHED, seed=62),
             Spec("N=32769 fp32 (just over 128 KB rows) goes to the split kernel", (2, 32769), eps=1e-5,
                  launches=SPLIT, launch_args={"CHUNK": 8192}, launch_why=SPLIT_DEFAULT, seed=58),
             Spec("N=70000 fp32 goes to the split kernel", (2, 70000), eps=1e-5, launches=SPLIT,
                  launch_args={"CHUNK": 8192}, launch_why=SPLIT_DEFAULT, seed=53),
             Spec("eps=1e-2 reaches the split kernel (N=32769 fp32, |x|~0.1)", (2, 32769), eps=1e-2, scale=0.1,
                  launches=SPLIT, launch_args={"CHUNK": 8192}, launch_why=SPLIT_DEFAULT, seed=66),
             # bf16 holds 8 bits: around 1e4 its spacing is 64, and 1e4 + randn would be one value everywhere
             Spec("N=131072 bf16, mean 100 (std 1), goes to the split kernel", (2, 131072), BF16, offset=100.0,
                  eps=1e-5,
                  launches=SPLIT, launch_args={"CHUNK": 8192}, launch_why=SPLIT_DEFAULT, seed=54),
         ], uses=("layernorm_fwd", "layernorm_fwd_looped"))
