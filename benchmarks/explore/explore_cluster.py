"""Seventh exploration (H100): Hopper thread-block clusters from Triton (num_ctas), re-loading split
kernels, eviction hints, LayerNorm chunk lengths for long rows, and LayerNorm statistics from one
reduction (shifted sums).

Long rows (64K bf16 = 128 KB) do not fit one SM's registers comfortably; the split kernels spread a row
over several programs that meet through a global counter, and stayed near 80 % of copy in bf16.
Stages:
- "cluster": Triton can launch one program as a cluster of num_ctas CTAs and reduce across them through
  distributed shared memory. The one-row kernels with num_ctas 2/4 at N = 16K-128K (Triton 3.6.0 on the
  H100: every num_ctas > 1 launch failed to compile, in TritonGPUPlanCTAPass).
- "split": the split kernels with the chunk held in registers across the wait or re-loaded after it
  (evict_last, then evict_first), by chunk and warps, at N = 32K-128K.
- "ln64", "lnchunk": lesson 05's looped kernel with one or several long chunks at N = 16K-128K.
- "small": tiles of 4-32 rows at N = 512 and 1024, by warps, holding x or re-loading it, next to
  torch.compile (its kernels and autotuned configurations written out).
- "hints": lesson 04's rows/one-row kernels with and without eviction hints, and the two-load (reload)
  one-row kernel, at N = 512-32K next to torch.compile.
- "lnstats": LayerNorm row statistics with one cross-thread reduction instead of two dependent ones:
  lane-wise Welford merged by one tuple reduce, or sums of x - x[0] and their squares, by chunk and warps
  at N = 16K-64K (short chunks that leave room for several programs per SM lose: 64-88 %).
- "lnguard": the same at one chunk per row, with and without a guard against cancellation (2K-64K).
- "lnvariants": text edits of lesson 05's looped kernel itself (guard or not, masks folded away), with
  each compiled kernel's registers and spills.
- "pipe": a persistent grid whose row loop Triton software-pipelines (tl.range num_stages: the next row's
  load in flight while this row reduces), LayerNorm and RMSNorm at 4K-32K.
- "prefetch": lesson 05's looped kernel (and an RMSNorm twin) that first asks L2 for the row one or more
  waves ahead (PTX prefetch.global.L2 through tl.inline_asm_elementwise), at 8K-64K.
- "peers": the lessons' dispatchers against torch.compile, pass by pass, where the bench has them close.
- "rmsvariants": lesson 04's dispatcher with N as a tl.constexpr, and its tiles with fewer warps, against
  torch.compile at the same points.
- "tiles": the tile kernels of lessons 04 and 05 at N = 512 with N as a tl.constexpr or int32 offsets.
- "ladder": the same tile kernels edited step by step toward torch.compile's kernel at N = 512, and lesson
  04's one-row kernel with half or twice its warps at 2K-4K fp32 and 8K fp16.
- "params": weight and bias loaded evict_last, in the N = 512 tiles and in every kernel of the dispatchers.
- "rowwarps": lesson 04's one-row kernel with 16 warps for 16 KB rows and/or its weight loaded evict_last.
- "lnwarps": lesson 05's looped kernel with two warps per KB of chunk, at 2K-8K.
- "lnrows": lesson 05's tile kernel at 1-4 rows per program for 8-16 KB fp32 rows, with 8 or 16 warps, and
  with N a tl.constexpr and x re-loaded for y (run #31: 2 rows, 16 warps match torch.compile at 2K fp32).
- "lnpersist": a persistent LayerNorm grid (SMs x 1 or 2 programs) that holds one row in registers and has
  the next row's load in flight while it reduces, at 4K-32K (run #29: it spills at 32K, 53-77 %, and its best
  configuration stays about 4 points below the dispatcher at 4K-16K).
- "lnshort": lesson 05's tile kernel with N a tl.constexpr and x re-loaded (stage "lnrows"'s best at 2K fp32),
  with the warp table's num_warps or twice that, at every short-row point (512-1K, all dtypes; 2K fp32).
- "lntile": the 0.5.5 tile against the 0.5.4 one at the same rows and warps, where 0.5.5's first bench had
  the tile far below the looped kernel.
- "rmsshort": lesson 04's tile kernel with N a tl.constexpr and x re-loaded (lesson 05's 0.5.5 tile) at
  512-2K, where torch.compile stays ahead of lesson 04's dispatcher.
- "lnregs": registers per thread and programs per SM: lesson 05's tile and looped kernel capped at 32
  registers (ptxas .maxnreg), and a three-pass kernel that holds nothing across a reduction, at 8K-64K.
- "lnpipe": lesson 05's looped kernel with pass 1's chunk loop software-pipelined (tl.range num_stages).
- "lntma": a persistent LayerNorm grid whose next row comes into shared memory by TMA (a tensor descriptor
  load in a pipelined row loop) while this row reduces, at 16K-32K in 16-bit types.
- "rowladder": lesson 04's one-row kernel without the rstd store, with the row stride N, with int32 offsets.
- "lnnostats": lesson 05's dispatcher without the mean and rstd stores.
- "lnsize": lessons 05's and 04's dispatchers at 1/2 to 8 times the bench's rows (32K and 16K bf16, 32K fp32).
- "cudaln": a CUDA C LayerNorm (ln_cluster.cu, nvcc, ctypes) with a cluster of 1-8 CTAs per row that exchange
  their partial statistics through distributed shared memory, and a 16-byte copy kernel, at 8K-64K: what the
  hardware gives where Triton 3.6 cannot launch clusters (runs #42-#43: 76 % at best with clusters, 81 % as a
  block per row, against the dispatcher's 92 % at 32K bf16; a cluster launch itself places CTAs slowly).
- "lnwaves": lesson 05's dispatcher at 32K with row counts that fill whole waves of programs, next to the
  bench's 2048 rows (run #45: no difference). ncu_layernorm.py (Nsight Compute, ncu_layernorm_H100.txt) has
  what is lost: the SMs' busy times end about 9 us apart in a 93 us launch.
- "lntail": the last rows of the launch split over two programs each, so that half-length programs fill that
  drain (runs #46-#47: every split tail loses).
- "lnstreams": the last rows as the split kernel's short programs on a second stream, concurrent with the
  whole rows on the caller's stream, so that the split programs fill the drain (run #48: no fork beats one
  launch, and the forks' timings scatter).
- "lnpdl": the same tail as the split kernel's short programs, but on the same stream as a programmatic
  dependent launch (PDL) that may start only once every program of the whole-row kernel has started (run #59:
  within 0.3 of one launch at 32K bf16, never above it by more than the passes' spread).
- "lnstagger": the first wave of the looped kernel starting at staggered moments (run #63: inconclusive).
- "lnbound": ln_bound.py's probes, kernels with LayerNorm's bytes and less and less of its work (runs #60-#62).
- "lnpair": long 16-bit rows with one statistics reduction before y (ln_pair.py: shifted sums, the stored
  statistics summed again exactly during the second read). Run #49: 94.2 % at 32K bf16 without the guard or the
  re-sum, but the stored mean misses its tolerance on |x|~300 rows in every form; with the re-sum, 88 %.
- "lnstatic": a persistent grid where every program has the same number of rows (ln_static.py), at row
  counts that divide evenly: does a static schedule end without the drain? (Run #50: it loses 5-8 points.)
- "lngroups": long rows with one Chan-merge reduction of per-thread group statistics (ln_groups.py), which
  keeps two-pass accuracy, y in pieces so that the program stays at 32 registers (runs #51-#58: correct on
  every kind of row; 92.3-92.8 % at 32K bf16 with the next piece of y loaded ahead, against the dispatcher's
  92.1-92.3; the same kernel without reading the bias reaches 95.3, without weight and bias 96.2; two rows per
  program, to read them once for both, 70-88).
Inputs, byte counts, numerical checks, timer and copy roofline are the course benchmark's (helpers.bench*);
every timed point is the faster of two interleaved passes. Results: explore_cluster_H100.jsonl, in the
order run. Its first run's num_ctas = 1 rows read "wrong" because that version of the script passed eps
and N in swapped places; the last "cluster" run (after the "ln64" rerun) has them measured, and the
num_ctas > 1 compile failures do not depend on it.
    python benchmarks/explore/explore_cluster.py [cluster|split|ln64|lnchunk|small|hints|lnstats|lnguard|lnvariants|pipe|prefetch|peers|rmsvariants|tiles|ladder|params|rowwarps|lnwarps|lnrows|lnpersist|lnshort|lntile|rmsshort|lnregs|lnpipe|lntma|rowladder|lnnostats|lnsize|cudaln|lnwaves|lntail|lnstreams|lnpdl|lnstagger|lnbound|lnpair|lnstatic|lngroups|all]
"""
import inspect
import json
import os
import re
import sys
import textwrap
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import helpers  # noqa: E402
import helpers.bench as hb  # noqa: E402
import helpers.bench_layernorm as bench_ln  # noqa: E402
import helpers.bench_rmsnorm as bench_rms  # noqa: E402
from helpers.reference import layernorm_ref  # noqa: E402
from explore_layernorm import _row_stats  # noqa: E402  (its chunked Chan merge of a row's statistics)
from ln_groups import _chan_combine  # noqa: E402  (Chan's merge of two (count, mean, M2) summaries)

OUT = Path(os.environ.get("OUT", "/tmp"))
LOG = open(OUT / "explore_cluster.jsonl", "a")
TOTAL = hb.TOTAL_ELEMENTS
BENCH = {"rms": bench_rms, "ln": bench_ln}   # inputs, byte counts and checks of the course's benchmarks


def emit(**row):
    LOG.write(json.dumps(row) + "\n")
    LOG.flush()
    print(json.dumps(row), flush=True)


def compiled(jit_fn):
    """(specialisation key, compiled kernel) for every compilation of a @triton.jit function so far."""
    for caches in jit_fn.device_caches.values():
        yield from caches[0].items()


def env_points(var, default, rows=False):
    """The (N, dtype) points of a stage: the environment variable var as "N:dtype,..." (e.g. 32768:bfloat16),
    or default. rows=True: (N, dtype, M) points from "N:dtype:M,...", M defaulting to the bench's 64 Mi / N."""
    if not os.environ.get(var):
        return default
    points = []
    for n, d, *m in (p.split(":") for p in os.environ[var].split(",")):
        point = (int(n), getattr(torch, d))
        points.append((*point, int(m[0]) if m else TOTAL // int(n)) if rows else point)
    return points


def inputs(M, N, dtype):
    """x, w, b as the LayerNorm benchmark makes them; RMSNorm runs use x and w."""
    return bench_ln.make_inputs(M, N, dtype)


@triton.jit
def _row_kernel(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, N, eps,
                BLOCK_N: tl.constexpr, RMS: tl.constexpr, RELOAD: tl.constexpr, HINTS: tl.constexpr):
    # one program (possibly a cluster of CTAs) per row; the whole row is one block
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    xp = X + row * stride_x + cols
    if RELOAD:
        x = tl.load(xp, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    elif HINTS:
        x = tl.load(xp, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    else:
        x = tl.load(xp, mask=mask, other=0.0).to(tl.float32)
    if RMS:
        mean = 0.0
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    else:
        mean = tl.sum(x, axis=0) / N
        if RELOAD:
            x = tl.load(xp, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        xc = tl.where(mask, x - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / N + eps)
    if RELOAD:
        x = tl.load(xp, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    if HINTS:
        w = tl.load(W + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    else:
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * w
    if not RMS:
        if HINTS:
            y += tl.load(B + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        else:
            y += tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


@triton.jit
def _rms_rows_kernel(X, Y, W, RSTD, M, N, stride_x, stride_y, eps,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HINTS: tl.constexpr):
    # lesson 04 exercise 1b, with or without eviction hints
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]
    if HINTS:
        x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=col_mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    else:
        x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + rows, rstd, mask=row_mask)


def solution_cells(lesson):
    """The code cells' texts of solutions/<lesson>.ipynb."""
    nb = json.loads((ROOT / "solutions" / f"{lesson}.ipynb").read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def load_variants(lesson, variants, tag, chosen=None):
    """{name: namespace} of solutions/<lesson>.ipynb with each variant's text edits (autograder's
    write_variant), written to OUT/<tag>_<name>.ipynb; `chosen` (names) keeps a subset."""
    from autograder.notebook import load, write_variant
    spaces = {}
    for name, edits in variants.items():
        if chosen and name not in chosen:
            continue
        path = write_variant(ROOT / "solutions" / f"{lesson}.ipynb", edits,
                             OUT / f"{tag}_{re.sub('[^A-Za-z0-9]', '_', name)}.ipynb")
        ns, errors = load(path)
        assert not errors, (name, errors)
        spaces[name] = ns
    return spaces


def best_of_two(op, runs, x, w, b, copy, reset=None, passes=2):
    """Check each run's output as the course's benchmark does (fn() returns y; reset() first clears a
    shared y), then time all runs in `passes` interleaved passes; emit each run's fastest % of copy, best
    first (-1: wrong answer, -2: it raised), with every pass's value when there are more than two."""
    (M, N), dtype = x.shape, str(x.dtype)[6:]
    args = (x, w) if op == "rms" else (x, w, b)
    best, seen = {}, {}
    for _ in range(passes):
        for name, fn in runs.items():
            if best.get(name, 0) < 0:
                continue
            try:
                if reset is not None:
                    reset()
                ok, msg = BENCH[op].check(fn(), args)
                if not ok:
                    emit(op=op, impl=name, dtype=dtype, N=N, wrong=msg[:400])
                    best[name] = -1
                    continue
                gbs = BENCH[op].n_bytes(M, N, args) / hb.time_ms(fn) * 1e-6
                seen.setdefault(name, []).append(round(100 * gbs / copy, 1))
                best[name] = max(seen[name])
            except Exception as ex:  # keep exploring
                emit(op=op, impl=name, dtype=dtype, N=N, error=repr(ex)[:400])
                best[name] = -2
    for name, p in sorted(best.items(), key=lambda kv: -kv[1]):
        emit(op=op, impl=name, dtype=dtype, N=N, pct=p, **({"passes": seen[name]} if passes > 2 and p > 0 else {}))


def time_peers(copy):
    """The lessons' dispatchers against torch.compile where the recorded bench has them within about 2
    points, in PASSES (default 7) interleaved passes: how far apart are they, pass by pass? PEER_POINTS
    (op:N:dtype,...) replaces the points."""
    passes = int(os.environ.get("PASSES", "7"))
    points = {"ln": [(512, torch.bfloat16), (512, torch.float16), (2048, torch.float32), (4096, torch.float32),
                     (16384, torch.float32)],
              "rms": [(512, torch.bfloat16), (8192, torch.bfloat16), (16384, torch.bfloat16), (32768, torch.bfloat16),
                      (4096, torch.float32), (8192, torch.float32)]}
    if os.environ.get("PEER_POINTS"):   # e.g. "ln:16384:float16,rms:512:bfloat16"
        points = {}
        for item in os.environ["PEER_POINTS"].split(","):
            op, n, dtype = item.split(":")
            points.setdefault(op, []).append((int(n), getattr(torch, dtype)))
    for op, cases in points.items():
        sweep_with_peers(copy, cases, lambda runs, c: None, ops=(op,), passes=passes)


def time_cluster(copy):
    for N in (65536, 32768, 131072, 16384):
        for dtype in (torch.bfloat16, torch.float32):
            x, w, b = inputs(TOTAL // N, N, dtype)
            M = x.shape[0]
            y = torch.empty_like(x)
            mean, rstd = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
            for op in ("rms", "ln"):
                runs = {}
                for reload in (False, True):
                    for ctas in (1, 2, 4):
                        for warps in (8, 16, 32):
                            if not 8 <= N // (ctas * warps * 32) <= 64:
                                continue
                            runs[f"row/{'reload' if reload else 'keep'}/c{ctas}/w{warps}"] = (
                                lambda reload=reload, ctas=ctas, warps=warps: (_row_kernel[(M,)](
                                    x, y, w, b, mean, rstd, N, N, N, BENCH[op].EPS, BLOCK_N=N, RMS=op == "rms",
                                    RELOAD=reload, HINTS=True, num_warps=warps, num_ctas=ctas), y)[1])
                best_of_two(op, runs, x, w, b, copy, reset=y.zero_)
            del x, w, b, y
            torch.cuda.empty_cache()


def time_hints(copy):
    torch._dynamo.config.cache_size_limit = 64
    for N in (512, 1024, 2048, 4096, 8192, 16384, 32768):
        for dtype in (torch.bfloat16, torch.float32):
            x, w, b = inputs(TOTAL // N, N, dtype)
            M = x.shape[0]
            y = torch.empty_like(x)
            mean, rstd = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
            comp = torch.compile(bench_rms.composite, dynamic=False)
            runs = {"torch.compile": lambda: comp(x, w)}
            nbytes = N * x.element_size()
            warps_std = 4 if nbytes <= 4096 else 8 if nbytes <= 16384 else 16
            if N <= 4096:
                bm = max(1, min(8, 8192 // N))
                warps = 4 if bm * nbytes <= 4096 else 8 if bm * nbytes <= 16384 else 16
                for hints in (False, True):
                    for wp in sorted({warps, 8}):
                        runs[f"rows/m{bm}/w{wp}/{'hints' if hints else 'plain'}"] = (
                            lambda hints=hints, wp=wp, bm=bm: _rms_rows_kernel[(triton.cdiv(M, bm),)](
                                x, y, w, rstd, M, N, N, N, 1e-6, BLOCK_M=bm, BLOCK_N=N, HINTS=hints, num_warps=wp))
            if N >= 2048:
                for hints in (False, True):
                    for wp in sorted({warps_std, 32 if N >= 8192 else 8}):
                        for reload in ((False, True) if hints else (False,)):
                            tag = "reload" if reload else "hints" if hints else "plain"
                            runs[f"row/w{wp}/{tag}"] = (
                                lambda hints=hints, wp=wp, reload=reload: _row_kernel[(M,)](
                                    x, y, w, b, mean, rstd, N, N, N, 1e-6, BLOCK_N=N, RMS=True, RELOAD=reload,
                                    HINTS=hints, num_warps=wp))
            best_of_two("rms", {k: (fn if k == "torch.compile" else lambda fn=fn: (fn(), y)[1])
                                 for k, fn in runs.items()}, x, w, b, copy, reset=y.zero_)
            del x, w, b, y
            torch.cuda.empty_cache()


@triton.jit
def _split_kernel(X, Y, W, B, MEAN, RSTD, PART, COUNT, N, stride_x, stride_y, eps, max_spins,
                  SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr, CHUNK: tl.constexpr, RMS: tl.constexpr,
                  RELOAD: tl.constexpr, WPRE: tl.constexpr):
    # the lessons' split kernels (epoch counters, no fallback: max_spins only guards the experiment),
    # optionally re-loading x after the wait instead of holding it in registers across it
    pid = tl.program_id(0)
    row = (pid // SPLIT).to(tl.int64)
    part = pid % SPLIT
    cols = part * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    xp = X + row * stride_x + cols
    if RELOAD:
        x = tl.load(xp, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    else:
        x = tl.load(xp, mask=mask, other=0.0).to(tl.float32)
    n_c = tl.minimum(N - part * CHUNK, CHUNK).to(tl.float32)
    if RMS:
        mean_c = 0.0
        m2_c = tl.sum(x * x, axis=0)
    else:
        mean_c = tl.sum(x, axis=0) / n_c
        xc = tl.where(mask, x - mean_c, 0.0)
        m2_c = tl.sum(xc * xc, axis=0)
    slot = PART + (row * SPLIT + part) * 2
    tl.store(slot, mean_c)
    tl.store(slot + 1, m2_c)
    if WPRE:
        w = tl.load(W + cols, mask=mask, other=0.0, eviction_policy="evict_last")
        if not RMS:
            b = tl.load(B + cols, mask=mask, other=0.0, eviction_policy="evict_last")
    tl.debug_barrier()
    before = tl.atomic_add(COUNT + row, 1, sem="acq_rel")
    target = (before // SPLIT + 1) * SPLIT
    now = before + 1
    spins = 0
    while (now < target) & (spins < max_spins):
        now = tl.atomic_add(COUNT + row, 0, sem="acquire")
        spins += 1
    k = tl.arange(0, SPLIT_P2)
    n_k = tl.minimum(tl.maximum(N - k * CHUNK, 0), CHUNK).to(tl.float32)
    means = tl.load(PART + (row * SPLIT + k) * 2, mask=k < SPLIT, other=0.0, volatile=True)
    m2s = tl.load(PART + (row * SPLIT + k) * 2 + 1, mask=k < SPLIT, other=0.0, volatile=True)
    if RMS:
        mean = 0.0
        m2 = tl.sum(m2s, axis=0)
    else:
        mean = tl.sum(n_k * means, axis=0) / N
        d = means - mean
        m2 = tl.sum(m2s + n_k * d * d, axis=0)
    rstd = tl.rsqrt(m2 / N + eps)
    if RELOAD:
        x = tl.load(xp, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    if not WPRE:
        w = tl.load(W + cols, mask=mask, other=0.0, eviction_policy="evict_last")
        if not RMS:
            b = tl.load(B + cols, mask=mask, other=0.0, eviction_policy="evict_last")
    y = (x - mean) * rstd * w.to(tl.float32)
    if not RMS:
        y += b.to(tl.float32)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
    if part == 0:
        tl.store(MEAN + row, mean)
        tl.store(RSTD + row, rstd)


def time_split(copy):
    from autograder.notebook import load
    ns4, e4 = load(ROOT / "solutions" / "04_triton_rmsnorm.ipynb")
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e4 and not e5, (e4, e5)
    for N, dtypes in ((65536, (torch.bfloat16, torch.float32)), (32768, (torch.bfloat16,)),
                      (131072, (torch.bfloat16,))):
        for dtype in dtypes:
            x, w, b = inputs(TOTAL // N, N, dtype)
            M = x.shape[0]
            y = torch.empty_like(x)
            mean, rstd = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
            for op in ("rms", "ln"):
                runs = {"lesson": (lambda: ns4["rmsnorm_fwd_split"](x, w, 1e-6)[0]) if op == "rms" else
                        (lambda: ns5["layernorm_fwd_split"](x, w, b, 1e-5)[0])}
                for chunk in (4096, 8192, 16384, 32768):
                    for warps in (4, 8, 16):
                        per_thread = chunk // (32 * warps)
                        if not 16 <= per_thread <= 64 or chunk >= N:
                            continue
                        for reload, wpre in ((False, False), (True, False), (True, True)):
                            split = N // chunk
                            name = f"split/c{chunk}/w{warps}/{'reload' if reload else 'keep'}{'/wpre' if wpre else ''}"

                            def fn(chunk=chunk, warps=warps, reload=reload, wpre=wpre, split=split):
                                part, count = helpers.split_workspace(M, split, x.device)
                                _split_kernel[(M * split,)](
                                    x, y, w, b, mean, rstd, part, count, N, N, N, BENCH[op].EPS,
                                    1 << 20, SPLIT=split, SPLIT_P2=triton.next_power_of_2(split), CHUNK=chunk,
                                    RMS=op == "rms", RELOAD=reload, WPRE=wpre, num_warps=warps)
                                return y
                            runs[name] = fn
                best_of_two(op, runs, x, w, b, copy, reset=y.zero_)
            del x, w, b, y
            torch.cuda.empty_cache()


def time_ln_one_chunk(copy):
    """Lesson 05's looped kernel with the whole row as one chunk (the reload shape) past N = 32768."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    for N, dtype in ((65536, torch.bfloat16), (65536, torch.float16), (32768, torch.bfloat16),
                     (65536, torch.float32), (131072, torch.bfloat16)):
        x, w, b = inputs(TOTAL // N, N, dtype)
        runs = {"split": lambda: ns5["layernorm_fwd_split"](x, w, b, 1e-5)[0],
                "one-chunk": lambda: ns5["layernorm_fwd_looped"](x, w, b, 1e-5, block_n=N)[0],
                "tile": lambda: ns5["layernorm_fwd"](x, w, b, 1e-5)[0]}
        warps_orig = ns5["num_warps_for"]
        runs["one-chunk/w16"] = lambda: (ns5.__setitem__("num_warps_for", lambda bn, e: 16),
                                         ns5["layernorm_fwd_looped"](x, w, b, 1e-5, block_n=N)[0],
                                         ns5.__setitem__("num_warps_for", warps_orig))[1]
        runs["half-chunk"] = lambda: ns5["layernorm_fwd_looped"](x, w, b, 1e-5, block_n=N // 2)[0]
        if N > 65536:
            del runs["tile"]
        best_of_two("ln", runs, x, w, b, copy)
        del x, w, b
        torch.cuda.empty_cache()


def time_ln_chunks(copy):
    """Lesson 05's looped kernel by chunk length and warps at N = 16K-128K (the dispatcher's long rows).
    LN_NS and LN_DTYPES (comma-separated) replace the points, PASSES (default 2) the passes."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    warps_orig = ns5["num_warps_for"]
    passes = int(os.environ.get("PASSES", "2"))
    for N in [int(n) for n in os.environ.get("LN_NS", "65536,32768,131072,16384").split(",")]:
        for dtype in [getattr(torch, d) for d in os.environ.get("LN_DTYPES", "bfloat16,float32").split(",")]:
            x, w, b = inputs(TOTAL // N, N, dtype)
            runs = {"split": lambda: ns5["layernorm_fwd_split"](x, w, b, 1e-5)[0],
                    "dispatch": lambda: ns5["layernorm"](x, w, b, 1e-5)[0]}
            for block in (8192, 16384, 32768, 65536):
                if block > N:
                    continue
                for warps in ((8, 16, 32) if block * x.element_size() <= 32768 else (16, 32)):
                    def fn(block=block, warps=warps):
                        ns5["num_warps_for"] = lambda bn, e: warps
                        try:
                            return ns5["layernorm_fwd_looped"](x, w, b, 1e-5, block_n=block)[0]
                        finally:
                            ns5["num_warps_for"] = warps_orig
                    runs[f"looped/b{block}/w{warps}"] = fn
            best_of_two("ln", runs, x, w, b, copy, passes=passes)
            del x, w, b
            torch.cuda.empty_cache()


@triton.jit
def _tile_kernel(X, Y, W, B, MEAN, RSTD, M, N, stride_x, stride_y, eps,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, RMS: tl.constexpr, RELOAD: tl.constexpr):
    # BLOCK_M rows per program; RELOAD: x loaded again (from cache) for every use instead of kept live
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    xp = X + rows[:, None] * stride_x + cols[None, :]
    x = tl.load(xp, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if RMS:
        mean = tl.zeros([BLOCK_M], dtype=tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    else:
        mean = tl.sum(x, axis=1) / N
        if RELOAD:
            x = tl.load(xp, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        xc = tl.where(mask, x - mean[:, None], 0.0)
        rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)
    if RELOAD:
        x = tl.load(xp, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    y = (x - mean[:, None]) * rstd[:, None] * tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    if not RMS:
        y += tl.load(B + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    tl.store(MEAN + rows, mean, mask=rows < M)
    tl.store(RSTD + rows, rstd, mask=rows < M)


def time_small(copy):
    """Short rows (N = 512, 1024): tiles by rows per program, warps and re-loading, next to torch.compile
    (its generated kernel and autotuned configuration are written out)."""
    from torch._inductor.utils import run_and_get_code
    torch._dynamo.config.cache_size_limit = 64
    for N in (512, 1024):
        for dtype in (torch.bfloat16, torch.float32):
            x, w, b = inputs(TOTAL // N, N, dtype)
            M = x.shape[0]
            y = torch.empty_like(x)
            mean, rstd = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
            for op, comp in (("rms", bench_rms.composite), ("ln", bench_ln.composite)):
                c = torch.compile(comp, dynamic=False)
                args = (x, w) if op == "rms" else (x, w, b)
                _, codes = run_and_get_code(c, *args)
                (OUT / f"inductor_{op}_{N}_{str(dtype)[6:]}.py").write_text(codes[0])
                runs = {"torch.compile": lambda c=c, args=args: c(*args)}
                for bm in (4, 8, 16, 32):
                    for warps in (2, 4, 8):
                        if bm * N // (32 * warps) > 64:
                            continue
                        for reload in (False, True):
                            runs[f"tile/m{bm}/w{warps}/{'reload' if reload else 'keep'}"] = (
                                lambda bm=bm, warps=warps, reload=reload: (_tile_kernel[(triton.cdiv(M, bm),)](
                                    x, y, w, b, mean, rstd, M, N, N, N, BENCH[op].EPS,
                                    BLOCK_M=bm, BLOCK_N=N, RMS=op == "rms", RELOAD=reload, num_warps=warps), y)[1])
                best_of_two(op, runs, x, w, b, copy, reset=y.zero_)
            del x, w, b, y
            torch.cuda.empty_cache()
    for f in Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "/nonexistent")).rglob("*.best_config"):
        emit(best_config=f.read_text()[:400], file=f.name)


@triton.jit
def _sum2_combine(a1, a2, b1, b2):
    return a1 + b1, a2 + b2


@triton.jit
def _ln_stats_kernel(X, Y, W, B, MEAN, RSTD, stride_x, stride_y, eps, N: tl.constexpr, BLOCK_N: tl.constexpr,
                     STATS: tl.constexpr, HOLD: tl.constexpr, GUARD: tl.constexpr = False):
    # Row statistics with ONE cross-thread reduction per row instead of two per chunk:
    # STATS 1: every lane runs Welford over the chunks it sees, then one tuple reduce merges the lanes
    #          (Chan); STATS 2: sums of x - x[0] and their squares, one tuple reduce.
    # HOLD (one chunk only): normalise the x held in registers instead of re-loading it.
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    lanes = tl.arange(0, BLOCK_N)
    ONE: tl.constexpr = N <= BLOCK_N
    hint: tl.constexpr = "" if HOLD else "evict_last"
    if ONE:
        mask = lanes < N
        x = tl.load(x_row + lanes, mask=mask, other=0.0, eviction_policy=hint).to(tl.float32)
        if STATS == 0:
            mean = tl.sum(x, axis=0) / N
            xc = tl.where(mask, x - mean, 0.0)
            m2 = tl.sum(xc * xc, axis=0)
        elif STATS == 1:
            _n, mean, m2 = tl.reduce((mask.to(tl.float32), x, tl.zeros_like(x)), 0, _chan_combine)
        else:
            k = tl.load(x_row).to(tl.float32)
            d = tl.where(mask, x - k, 0.0)
            if STATS == 2:
                t1, t2 = tl.reduce((d, d * d), 0, _sum2_combine)
            else:
                t1 = tl.sum(d, axis=0)
                t2 = tl.sum(d * d, axis=0)
            mean = k + t1 / N
            m2 = t2 - t1 * (t1 / N)
            if GUARD:
                if m2 * 16.0 < t2:
                    k = mean
                    d = tl.where(mask, x - k, 0.0)
                    t1, t2 = tl.reduce((d, d * d), 0, _sum2_combine)
                    mean = k + t1 / N
                    m2 = t2 - t1 * (t1 / N)
            m2 = tl.maximum(m2, 0.0)
    elif STATS == 1:
        mean_l = tl.zeros([BLOCK_N], dtype=tl.float32)
        m2_l = tl.zeros([BLOCK_N], dtype=tl.float32)
        for c in range(0, tl.cdiv(N, BLOCK_N)):
            cols = c * BLOCK_N + lanes
            mask = cols < N
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            d = x - mean_l
            new_mean = mean_l + d * (1.0 / (c + 1))
            m2_l = tl.where(mask, m2_l + d * (x - new_mean), m2_l)
            mean_l = tl.where(mask, new_mean, mean_l)
        n_l = (N // BLOCK_N + (lanes < N % BLOCK_N)).to(tl.float32)
        _n, mean, m2 = tl.reduce((n_l, mean_l, m2_l), 0, _chan_combine)
    else:
        k = tl.load(x_row).to(tl.float32)
        s1 = tl.zeros([BLOCK_N], dtype=tl.float32)
        s2 = tl.zeros([BLOCK_N], dtype=tl.float32)
        for c in range(0, tl.cdiv(N, BLOCK_N)):
            cols = c * BLOCK_N + lanes
            mask = cols < N
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            d = tl.where(mask, x - k, 0.0)
            s1 += d
            s2 += d * d
        t1, t2 = tl.reduce((s1, s2), 0, _sum2_combine)
        mean = k + t1 / N
        m2 = tl.maximum(t2 - t1 * (t1 / N), 0.0)
    rstd = tl.rsqrt(m2 / N + eps)
    if ONE and HOLD:
        mask = lanes < N
        y = (x - mean) * rstd * tl.load(W + lanes, mask=mask, other=0.0).to(tl.float32)
        y += tl.load(B + lanes, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + lanes, y.to(Y.dtype.element_ty), mask=mask)
    else:
        for off in range(0, N, BLOCK_N):
            cols = off + lanes
            mask = cols < N
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            y = (x - mean) * rstd * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
            y += tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


def ln_stats(x, w, b, y, mean, rstd, block_n, stats, hold, warps, guard=False):
    M, N = x.shape
    _ln_stats_kernel[(M,)](x, y, w, b, mean, rstd, x.stride(0), y.stride(0), bench_ln.EPS, N=N, BLOCK_N=block_n,
                           STATS=stats, HOLD=hold, GUARD=guard, num_warps=warps)
    return y


LN_STATS_CONFIGS = ((2048, 4), (4096, 4), (4096, 8), (8192, 8), (8192, 16), (16384, 16), (16384, 32),
                    (32768, 32))


def time_ln_stats(copy):
    """Lesson 05's long rows (N = 16K-64K): one cross-thread reduction per row (lane-wise Welford or
    shifted sums) in short chunks that leave room for several programs per SM, next to the lesson's
    looped kernel, its dispatcher and torch.compile (whose kernels are written out)."""
    from torch._inductor.utils import run_and_get_code
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    torch._dynamo.config.cache_size_limit = 64
    for N, dtype in ((32768, torch.bfloat16), (16384, torch.bfloat16), (65536, torch.bfloat16),
                     (32768, torch.float32), (16384, torch.float32), (32768, torch.float16)):
        x, w, b = inputs(TOTAL // N, N, dtype)
        M = x.shape[0]
        y = torch.empty_like(x)
        mean, rstd = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
        comp = torch.compile(bench_ln.composite, dynamic=False)
        _, codes = run_and_get_code(comp, x, w, b)
        (OUT / f"inductor_ln_{N}_{str(dtype)[6:]}.py").write_text(codes[0])
        runs = {"torch.compile": lambda: comp(x, w, b),
                "dispatch": lambda: ns5["layernorm"](x, w, b, bench_ln.EPS)[0]}
        for block, warps in LN_STATS_CONFIGS:
            if block > triton.next_power_of_2(N) or block * x.element_size() > 65536:
                continue
            for stats in (1, 2):
                for hold in ((False, True) if block >= N else (False,)):
                    runs[f"{'welford' if stats == 1 else 'shift'}/b{block}/w{warps}/{'hold' if hold else 'reload'}"] = (
                        lambda block=block, warps=warps, stats=stats, hold=hold:
                        ln_stats(x, w, b, y, mean, rstd, block, stats, hold, warps))
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_)
        del x, w, b, y
        torch.cuda.empty_cache()


def time_ln_guard(copy):
    """Lesson 05's rows of 2-128 KB as one chunk: the two dependent reductions (mean, then squared
    deviations) against one reduction of shifted sums (x - x[0] and its square; a tuple reduce or two
    tl.sum), with and without the cancellation guard, next to the lesson's dispatcher and torch.compile.
    "spike" rows have x[:, 0] = 50, so that the guard re-shifts every row."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    torch._dynamo.config.cache_size_limit = 64
    cases = [(32768, torch.bfloat16, False), (32768, torch.bfloat16, True), (16384, torch.bfloat16, False),
             (8192, torch.bfloat16, False), (4096, torch.bfloat16, False), (2048, torch.bfloat16, False),
             (32768, torch.float16, False), (32768, torch.float32, False), (16384, torch.float32, False),
             (8192, torch.float32, False), (2048, torch.float32, False), (1024, torch.float32, False),
             (512, torch.float32, False), (65536, torch.bfloat16, False), (65536, torch.float32, False)]
    for N, dtype, spike in cases:
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        if spike:
            x[:, 0] = 50.0
        block = triton.next_power_of_2(N)
        warps = ns5["num_warps_for"](block, x.element_size())
        if block * x.element_size() <= 65536:
            for name, stats, guard in (("two-pass", 0, False), ("shift-tuple", 2, False), ("shift-tuple/guard", 2, True),
                                       ("shift-2sum", 3, False), ("shift-2sum/guard", 3, True)):
                runs[f"{name}/w{warps}"] = (lambda stats=stats, guard=guard:
                                            ln_stats(x, w, b, y, mean, rstd, block, stats, False, warps, guard))
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_)
        emit(case="spike" if spike else "randn", N=N, dtype=str(dtype)[6:])
        del x, w, b, y
        torch.cuda.empty_cache()


EVEN_MASK = [(f"        mask = cols < N\n        x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy=\"{p}\")",
              f"        mask = (cols < N) | (N % BLOCK_N == 0)\n"
              f"        x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy=\"{p}\")")
             for p in ("evict_last", "evict_first")]   # masks the compiler can drop where BLOCK_N divides N
TWO_PASS = ("        mean_c = tl.sum(x, axis=0) / n_c\n        d = tl.where(mask, x - mean_c, 0.0)\n"
            "        m2_c = tl.sum(d * d, axis=0)\n")
COMBINE = ("@triton.jit\ndef _layernorm_fwd_looped_kernel(",
           "@triton.jit\ndef _add_pair(a1, a2, b1, b2):\n    return a1 + b1, a2 + b2\n\n\n"
           "@triton.jit\ndef _add_triple(a1, a2, a3, b1, b2, b3):\n    return a1 + b1, a2 + b2, a3 + b3\n\n\n"
           "@triton.jit\ndef _layernorm_fwd_looped_kernel(")
GUARD = """        if m2_c * 16.0 < s2:
            xr = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            e = tl.where(mask, xr - mean_c, 0.0)
            m2_c = tl.sum(e * e, axis=0)
"""
TRIPLE = """        k = tl.load(x_row + off).to(tl.float32)
        d = tl.where(mask, x - k, 0.0)
        sx, s1, s2 = tl.reduce((x, d, d * d), 0, _add_triple)
        mean_c = sx / n_c
        m2_c = s2 - s1 * (s1 / n_c)
"""
THREE_SUMS = TRIPLE.replace("sx, s1, s2 = tl.reduce((x, d, d * d), 0, _add_triple)",
                            "sx = tl.sum(x, axis=0)\n        s1 = tl.sum(d, axis=0)\n        s2 = tl.sum(d * d, axis=0)")
PAIR_F64 = """        k = tl.load(x_row + off).to(tl.float32)
        d = tl.where(mask, x - k, 0.0)
        s1, s2 = tl.reduce((d, d * d), 0, _add_pair)
        mean_c = (k.to(tl.float64) + s1.to(tl.float64) / n_c).to(tl.float32)
        m2_c = s2 - s1 * (s1 / n_c)
"""
PAIR = PAIR_F64.replace("mean_c = (k.to(tl.float64) + s1.to(tl.float64) / n_c).to(tl.float32)",
                        "mean_c = k + s1 / n_c")
PAIR_GUARD = """        if m2_c * 16.0 < s2:
            xr = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            d = tl.where(mask, xr - mean_c, 0.0)
            s1, s2 = tl.reduce((d, d * d), 0, _add_pair)
            mean_c = mean_c + s1 / n_c
            m2_c = s2 - s1 * (s1 / n_c)
"""
X_CG = [(f"        x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy=\"{p}\")",
         "        x = tl.load(x_row + cols, mask=mask, other=0.0, cache_modifier=\".cg\")")
        for p in ("evict_last", "evict_first")]   # x bypasses L1 (L2 only; ptxas refuses .cg with evict_*)
WB_CA = [(f"            y = y {op} tl.load({t} + cols, mask=mask, other=0.0).to(tl.float32)\n",
          f"            y = y {op} tl.load({t} + cols, mask=mask, other=0.0, cache_modifier=\".ca\").to(tl.float32)\n")
         for op, t in (("*", "W"), ("+", "B"))]    # weight and bias cached in L1 and L2
CHAN = ("@triton.jit\ndef _layernorm_fwd_looped_kernel(",   # this file's _chan_combine, put before the kernel
        inspect.getsource(_chan_combine.fn) + "\n\n@triton.jit\ndef _layernorm_fwd_looped_kernel(")
GROUP_ARG = [("BLOCK_N: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):\n    # Idea: pass 1 folds",
              "BLOCK_N: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, G: tl.constexpr):\n"
              "    # Idea: pass 1 folds")]


GROUP_LAUNCH = [("eps, N=N,\n        BLOCK_N=BLOCK_N, HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None,\n"
                 "        num_warps=num_warps_for(",
                 "eps, N=N,\n        BLOCK_N=BLOCK_N, HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None,\n"
                 "        G=min(BLOCK_N, 16 // x.element_size()), num_warps=num_warps_for(")]   # one 16-byte vector


GROUPS = """        xg = tl.reshape(x, [BLOCK_N // G, G])
        n_g = tl.minimum(tl.maximum(N - off - tl.arange(0, BLOCK_N // G) * G, 0), G).to(tl.float32)
        mean_g = tl.sum(xg, axis=1) / tl.maximum(n_g, 1.0)
        d = tl.where(tl.reshape(mask, [BLOCK_N // G, G]), xg - mean_g[:, None], 0.0)
        _n, mean_c, m2_c = tl.reduce((n_g, mean_g, tl.sum(d * d, axis=1)), 0, _chan_combine)
"""
SHIFT_LOOP = """for off in range(0, N, BLOCK_N):
    cols = off + tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    d = tl.where(mask, x - k, 0.0)
    s0 += x
    s1 += d
    s2 += d * d
"""   # sums of x, x - k and (x - k)^2 over the row, lane by lane
JOIN_PASS1 = ("    k = tl.load(x_row).to(tl.float32)\n"
              + "".join(f"    {s} = tl.zeros([BLOCK_N], dtype=tl.float32)\n" for s in ("s0", "s1", "s2"))
              + textwrap.indent(SHIFT_LOOP, "    "))
JOIN3 = """    # one reduction for three sums: join them into a [BLOCK_N, 2, 2] tensor, sum over axis 0, split
    sums = tl.sum(tl.join(tl.join(s0, s1), tl.join(s2, s2)), axis=0)
    a, b = tl.split(sums)      # the last axis: (s0, s1) sums and (s2, s2) sums
    sx, t1 = tl.split(a)
    t2, _t2 = tl.split(b)
    mean = sx / N
    m2 = tl.maximum(t2 - t1 * (t1 / N), 0.0)
"""
JOIN_GUARD = ("    if m2 * 16.0 < t2:   # k was far from the mean (more than 4 of 24 bits cancel): again around it\n"
              "        k = mean\n"
              + "".join(f"        {s} = tl.zeros([BLOCK_N], dtype=tl.float32)\n" for s in ("s1", "s2"))
              + textwrap.indent(SHIFT_LOOP.replace("    s0 += x\n", ""), "        ")
              + "        t1, t2 = tl.split(tl.sum(tl.join(s1, s2), axis=0))\n"
                "        mean = k + t1 / N\n"
                "        m2 = tl.maximum(t2 - t1 * (t1 / N), 0.0)\n")


def looped_pass1():
    """Lesson 05's looped kernel, pass 1 (the Chan loop over chunks), as the solution writes it."""
    cell = next(c for c in solution_cells("05_triton_layernorm") if "def _layernorm_fwd_looped_kernel(" in c)
    start = cell.index("    n = 0.0\n")
    return cell[start:cell.index("    rstd = tl.rsqrt(m2 / N + eps)\n", start)]


LOOPED_VARIANTS = {   # name -> text edits of lesson 05's solution (its looped kernel's chunk statistics)
    "two-pass": [],                                            # the solution: mean, then squared deviations
    "triple": [COMBINE, (TWO_PASS, TRIPLE + GUARD)],           # (x, x - k, (x - k)^2) in one tl.reduce
    "three-sums": [(TWO_PASS, THREE_SUMS + GUARD)],            # the same sums as three tl.sum
    "pair": [COMBINE, (TWO_PASS, PAIR + PAIR_GUARD)],           # (d, d^2); mean k + s1/n ("loop-guard" to #11)
    "pair-f64mean": [COMBINE, (TWO_PASS, PAIR_F64 + GUARD)],   # (d, d^2); mean k + s1/n rounded once (fp64)
    "triple/no-guard": [COMBINE, (TWO_PASS, TRIPLE)],
    "triple/even": [COMBINE, (TWO_PASS, TRIPLE + GUARD)] + EVEN_MASK,
    "x-cg": X_CG,
    "wb-ca": WB_CA,
    "x-cg/wb-ca": X_CG + WB_CA,
    "triple/x-cg/wb-ca": [COMBINE, (TWO_PASS, TRIPLE + GUARD)] + X_CG + WB_CA,
    # chunk statistics in ONE tuple reduce, exactly: each thread's G values (one 16-byte vector at g16)
    # give a group mean and M2 in registers, and tl.reduce merges the groups with Chan's rule
    "groups/g16": [CHAN, (TWO_PASS, GROUPS)] + GROUP_ARG + GROUP_LAUNCH,
    # the same sums in ONE tl.sum over joined tensors (one reduce op; tl.sum stays fast in the interpreter)
    "join3/x0/guard": [(looped_pass1(), JOIN_PASS1 + JOIN3 + JOIN_GUARD)],
    "join3/x0": [(looped_pass1(), JOIN_PASS1 + JOIN3)],
}


def time_ln_variants(copy):
    """Variants of lesson 05's looped kernel itself (text edits of the solution notebook): its two-pass chunk
    statistics, or shifted sums (x - k, k the chunk's first value) with the cancellation guard: (x, d, d^2)
    in one tuple reduce ("triple"), the same as three tl.sum, or (d, d^2) in one tuple reduce with the
    mean k + s1/n ("pair"; it misses the mean tolerance on |x|~300 rows) or that mean rounded once in
    float64 ("pair-f64mean": it misses it too); "no-guard" leaves the guard out, "even" folds the
    masks away where BLOCK_N divides N; "x-cg" loads x with cache_modifier ".cg" (L2 only), "wb-ca" the weight
    and bias with ".ca" (L1 and L2: every program reads them); run #15 tried them with evict_last, which
    ptxas refuses. At the dispatcher's N, on randn rows and on rows whose first value is
    50 (every row takes the guard). Registers and spills of every compiled variant are written out; the
    variants named in LN_GRADE (comma-separated) are also graded (exercises 3 and 4) on the GPU.
    The runs in the jsonl edited the solutions of their time. Up to run "2026-11-22 #11" the names were:
    "loop-guard" the pair (d, d^2) in one tuple reduce with the mean k + s1/n and the guard re-reading the
    chunk from L2 (= "guard-reload"; in run #10 "loop-guard" is the three-sum kernel), "guard-regs" the guard
    re-reducing the x held in registers, "guard-after" one check after the chunk loop, "late-guard" a check
    after pass 2 (then writing y again), "fp64-sums" float64 sums with no guard, "2sum" two tl.sum instead
    of a tuple reduce. In run #12 the solution edited was the triple kernel: "reference" there is "triple"
    here, "two-pass" is the solution, "no-guard" is "triple/no-guard", "reference/even" is "triple/even".
    Two exact one-reduction forms were graded on the CPU only (interpreter; not timed on a GPU): "groups/g16"
    (each thread's 16-byte vector as a group: its mean and M2 in registers, the groups merged by Chan's rule in
    one tuple tl.reduce; 25 of 26 points, grading took 62 s against about 5 s, the mean-1e4 rows missed:
    the interpreter merges element by element in float32) and "join3/x0" (sum x, x - k and (x - k)^2 in one
    tl.sum over tl.join-ed tensors, with k = x[0]; the interpreter sums that axis sequentially and the mean-1e4
    rows missed; "/guard" adds the re-shift when M2 < s2/16). Sums around the mean of the row's first 32
    or 256 values (warp-local at 32, but the load of x waits for it), with the mean from k + s1/N or
    from a separate sum of x, missed the |x|~300 mean tolerance or the mean-1e4 rstd tolerance on the CPU and
    were dropped. Run #32, with 0.5.4's two chunks for 16-bit rows over 32 KB: "triple" 92.2 / 93.3 % against
    "two-pass" 92.3 / 92.9 at N = 32768 in bf16 / fp16, and 85.3 against 87.7 at N = 65536 in bf16."""
    chosen = os.environ.get("LN_VARIANTS", ",".join(LOOPED_VARIANTS)).split(",")   # a comma-separated subset
    namespaces = load_variants("05_triton_layernorm", LOOPED_VARIANTS, "looped", chosen)
    impls = {name: ns["layernorm"] for name, ns in namespaces.items()}
    for name, ns in namespaces.items():
        if name in os.environ.get("LN_GRADE", "").split(","):   # a comma-separated subset of the variants
            from autograder import registry
            from autograder.runner import grade
            for ex in ("layernorm_fwd_looped", "layernorm"):
                r = grade(registry.get(ex), ns)
                emit(variant=name, exercise=ex, earned=r["earned"], possible=r["possible"],
                     failed=[f"{c['name']}: {c['message'][:160]}" for c in r["cases"] if not c["passed"]],
                     mean_errs=[c["message"][c["message"].find("mean"):][:16] for c in r["cases"]
                                if "|x|~300" in c["name"] or "mean 1e4" in c["name"]])
    torch._dynamo.config.cache_size_limit = 64
    cases = [(32768, torch.bfloat16, False), (32768, torch.bfloat16, True), (16384, torch.bfloat16, False),
             (8192, torch.bfloat16, False), (4096, torch.bfloat16, False), (2048, torch.bfloat16, False),
             (32768, torch.float16, False), (32768, torch.float32, False), (16384, torch.float32, False),
             (8192, torch.float32, False), (2048, torch.float32, False), (1024, torch.float32, False),
             (65536, torch.bfloat16, False), (65536, torch.float32, False)]
    only_n = os.environ.get("LN_NS")       # e.g. "32768,16384": a subset of the cases' N
    for N, dtype, spike in cases:
        if only_n and str(N) not in only_n.split(","):
            continue
        x, w, b = inputs(TOTAL // N, N, dtype)
        if spike:
            x[:, 0] = 50.0
        comp = torch.compile(bench_ln.composite, dynamic=False)
        runs = {"torch.compile": lambda: comp(x, w, b)}
        for name, fn in impls.items():
            runs[name] = lambda fn=fn: fn(x, w, b, bench_ln.EPS)[0]
        best_of_two("ln", runs, x, w, b, copy, passes=int(os.environ.get("PASSES", "2")))
        emit(case="spike" if spike else "randn", N=N, dtype=str(dtype)[6:])
        del x, w, b
        torch.cuda.empty_cache()
    for name, ns in namespaces.items():   # registers and spills of every compiled looped kernel
        for _key, k in compiled(ns["_layernorm_fwd_looped_kernel"]):
            emit(variant=name, warps=k.metadata.num_warps, regs=k.n_regs, spills=k.n_spills,
                 shared=k.metadata.shared)


@triton.jit
def _persistent_row_kernel(X, Y, W, B, MEAN, RSTD, M, N, stride_x, stride_y, eps,
                           BLOCK_N: tl.constexpr, STAGES: tl.constexpr, RMS: tl.constexpr, WB_IN_LOOP: tl.constexpr):
    # A fixed grid of programs loops over rows; tl.range(num_stages=STAGES) lets Triton's pipeliner issue the
    # next row's load (asynchronously, into shared memory) while this row's reductions run. Whole row in
    # registers: exact two-pass statistics, no second read.
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    if not WB_IN_LOOP:
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        if not RMS:
            b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    for row in tl.range(tl.program_id(0), M, tl.num_programs(0), num_stages=STAGES):
        r = row                      # int32 offsets: the sweep has 64 Mi elements
        x = tl.load(X + r * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        if WB_IN_LOOP:
            w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
            if not RMS:
                b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        if RMS:
            rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
            y = x * rstd * w
        else:
            mean = tl.sum(x, axis=0) / N
            xc = tl.where(mask, x - mean, 0.0)
            rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / N + eps)
            y = xc * rstd * w + b
            tl.store(MEAN + r, mean)
        tl.store(Y + r * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
        tl.store(RSTD + r, rstd)


def sweep_with_peers(copy, cases, add_runs, ops=None, passes=2):
    """For each (N, dtype) of cases (LN_NS: a subset of the N) and each op of ops (default PIPE_OPS, "ln,rms"):
    time the lesson's dispatcher, torch.compile and the runs that add_runs(runs, ctx) puts in the dict, in
    `passes` interleaved passes; ctx holds x, w, b, y, mean, rstd, M, N, rms, eps, sms and the solutions'
    namespaces ns4, ns5."""
    from autograder.notebook import load
    ns4, e4 = load(ROOT / "solutions" / "04_triton_rmsnorm.ipynb")
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e4 and not e5, (e4, e5)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch._dynamo.config.cache_size_limit = 64
    only_n = os.environ.get("LN_NS")
    for N, dtype in cases:
        if only_n and str(N) not in only_n.split(","):
            continue
        x, w, b = inputs(TOTAL // N, N, dtype)
        M = x.shape[0]
        y = torch.empty_like(x)
        mean, rstd = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
        for op in ops or os.environ.get("PIPE_OPS", "ln,rms").split(","):
            rms = op == "rms"
            eps = bench_rms.EPS if rms else bench_ln.EPS
            if rms:
                comp = torch.compile(bench_rms.composite, dynamic=False)
                runs = {"torch.compile": lambda: comp(x, w), "dispatch": lambda: ns4["rmsnorm"](x, w, eps)[0]}
            else:
                comp = torch.compile(bench_ln.composite, dynamic=False)
                runs = {"torch.compile": lambda: comp(x, w, b), "dispatch": lambda: ns5["layernorm"](x, w, b, eps)[0]}
            add_runs(runs, dict(x=x, w=w, b=b, y=y, mean=mean, rstd=rstd, M=M, N=N, rms=rms, eps=eps, sms=sms,
                                ns4=ns4, ns5=ns5))
            best_of_two(op, runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()


def time_pipelined(copy):
    """Rows of 16-64 KB: a persistent grid whose row loop is software-pipelined by Triton (tl.range with
    num_stages: the next row's load in flight while this row reduces), for LayerNorm and RMSNorm, next to
    the lessons' dispatchers and torch.compile. Names: pipe/s<stages>/w<warps>/g<programs per SM>[/wb]
    (/wb: weight and bias loaded inside the loop)."""
    def add_runs(runs, c):
        x, N = c["x"], c["N"]
        for stages in (1, 2, 3):
            if stages * N * x.element_size() > 160 * 1024:
                continue
            for warps in (8, 16, 32):
                if not 8 <= N // (warps * 32) <= 64:
                    continue
                for g in (1, 2):
                    for wb in (False, True):
                        def run(stages=stages, warps=warps, g=g, wb=wb):
                            _persistent_row_kernel[(min(c["M"], g * c["sms"]),)](
                                x, c["y"], c["w"], c["b"], c["mean"], c["rstd"], c["M"], N, x.stride(0),
                                c["y"].stride(0), c["eps"], BLOCK_N=triton.next_power_of_2(N), STAGES=stages,
                                RMS=c["rms"], WB_IN_LOOP=wb, num_warps=warps)
                            return c["y"]
                        runs[f"pipe/s{stages}/w{warps}/g{g}{'/wb' if wb else ''}"] = run

    sweep_with_peers(copy, [(32768, torch.bfloat16), (16384, torch.bfloat16), (16384, torch.float32),
                            (8192, torch.bfloat16), (32768, torch.float16), (8192, torch.float32),
                            (4096, torch.bfloat16)], add_runs)
    for _key, k in compiled(_persistent_row_kernel):
        emit(kernel="pipe", warps=k.metadata.num_warps, regs=k.n_regs, spills=k.n_spills, shared=k.metadata.shared)


@triton.jit
def _prefetch_l2(addrs, EVICT_LAST: tl.constexpr):
    # one PTX prefetch per address: its 128-byte line is fetched into L2, nothing is held in registers
    if EVICT_LAST:
        tl.inline_asm_elementwise("prefetch.global.L2::evict_last [$1];\n\tmov.u32 $0, 0;", "=r,l", [addrs],
                                  dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [addrs],
                                  dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _prefetch_ahead_kernel(X, Y, W, B, MEAN, RSTD, M, stride_x, stride_y, eps, ahead, N: tl.constexpr,
                           BLOCK_N: tl.constexpr, LINE: tl.constexpr, RMS: tl.constexpr, PREFETCH: tl.constexpr,
                           EVICT_LAST: tl.constexpr):
    # Lesson 05's looped kernel (lesson 04's statistics when RMS), plus: before its own row, each program asks
    # L2 for row `row + ahead` (a row of a later wave), so HBM keeps streaming while programs reduce.
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    if PREFETCH:
        if row + ahead < M:
            for off in range(0, N, BLOCK_N):
                lines = off + tl.arange(0, BLOCK_N // LINE) * LINE
                ptrs = X + (row + ahead) * stride_x + tl.minimum(lines, N - 1)
                _prefetch_l2(ptrs.to(tl.int64, bitcast=True), EVICT_LAST)
    if RMS:
        mean = 0.0
        m2 = 0.0
        for off in range(0, N, BLOCK_N):
            cols = off + tl.arange(0, BLOCK_N)
            x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
            m2 += tl.sum(x * x, axis=0)
    else:
        mean, m2 = _row_stats(x_row, N, BLOCK_N)   # the solution's pass 1 (evict_last loads, Chan merge)
    rstd = tl.rsqrt(m2 / N + eps)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        y = (x - mean) * rstd * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        if not RMS:
            y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)
    if not RMS:
        tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


def time_prefetch(copy):
    """Rows of 16-128 KB, one program per row (lesson 05's looped kernel; RMSNorm statistics for op "rms"),
    with an L2 prefetch of the row `ahead` programs later (PTX prefetch.global.L2 through
    tl.inline_asm_elementwise): pf/a<ahead in waves of SMs>[/last: evict_last]; pf/a0 is the plain kernel."""
    def add_runs(runs, c):
        x, N = c["x"], c["N"]
        block = min(triton.next_power_of_2(N), 32768)
        for waves in (0, 1, 2, 4):
            for last in ((False, True) if waves else (False,)):
                def run(waves=waves, last=last):
                    _prefetch_ahead_kernel[(c["M"],)](
                        x, c["y"], c["w"], c["b"], c["mean"], c["rstd"], c["M"], x.stride(0), c["y"].stride(0),
                        c["eps"], max(1, waves * c["sms"]), N=N, BLOCK_N=block, LINE=128 // x.element_size(),
                        RMS=c["rms"], PREFETCH=waves > 0, EVICT_LAST=last,
                        num_warps=c["ns5"]["num_warps_for"](block, x.element_size()))
                    return c["y"]
                runs[f"pf/a{waves}{'/last' if last else ''}"] = run

    sweep_with_peers(copy, [(32768, torch.bfloat16), (32768, torch.float16), (65536, torch.bfloat16),
                            (16384, torch.bfloat16), (32768, torch.float32), (16384, torch.float32),
                            (8192, torch.bfloat16)], add_runs)


RMS_VARIANTS = {   # name -> text edits of lesson 04's solution
    "solution": [],
    "N-runtime": [("def _rmsnorm_fwd_kernel(X, Y, W, RSTD, stride_x, stride_y, N: tl.constexpr, eps,",
                   "def _rmsnorm_fwd_kernel(X, Y, W, RSTD, stride_x, stride_y, N, eps,")],
    "tile-warps-m/2": [("num_warps=min(8, num_warps_for(BLOCK_M * BLOCK_N, x.element_size())))",
                        "num_warps=max(1, BLOCK_M // 2))")],
}


def time_rms_variants(copy):
    """Lesson 04's dispatcher with text edits of its solution (RMS_VARIANTS: N as a runtime argument of exercise
    1's kernel, as before 0.5.2; in run #18, before 0.5.2, "N-constexpr" was the edit and "solution" had the
    runtime N; tiles of m rows with m/2 warps, as torch.compile's 2 rows and 1 warp at N = 512) against
    torch.compile, where the bench has compile ahead; PASSES (default 5) interleaved passes, each kept
    ("dispatch" and "solution" are the same function: their spread is the noise)."""
    passes = int(os.environ.get("PASSES", "5"))
    spaces = load_variants("04_triton_rmsnorm", RMS_VARIANTS, "rms")

    def add_runs(runs, c):
        x, w = c["x"], c["w"]
        for name, ns in spaces.items():
            if name != "tile-warps-m/2":
                runs[name] = lambda ns=ns: ns["rmsnorm"](x, w, c["eps"])[0]
            elif c["N"] * x.element_size() < 2048:
                for m in (2, 4, 8):
                    runs[f"{name}/m{m}"] = lambda ns=ns, m=m: ns["rmsnorm_fwd_rows"](x, w, c["eps"], rows_per_program=m)[0]

    sweep_with_peers(copy, [(512, torch.bfloat16), (8192, torch.bfloat16), (16384, torch.bfloat16),
                            (32768, torch.bfloat16), (4096, torch.float32), (8192, torch.float32)], add_runs,
                     ops=("rms",), passes=passes)


INT32_ROWS = ("    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)",
              "    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)")   # int32 offsets (< 2**31 here)
RMS_N_CONST = ("def _rmsnorm_fwd_rows_kernel(X, Y, W, RSTD, M, N, stride_x",
               "def _rmsnorm_fwd_rows_kernel(X, Y, W, RSTD, M, N: tl.constexpr, stride_x")
# Lesson 04's rows (tile) kernel as 0.5.6 changed it (as lesson 05's in 0.5.5): x loaded for the sum of squares
# (evict_last) and again for y (evict_first), so that the first copy's registers are free during the reduction.
RMS_TILE_RELOAD = ("    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)\n"
                   "    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)\n"
                   "    y = x * rstd[:, None]\n",
                   "    x_ptrs = X + rows[:, None] * stride_x + cols[None, :]\n"
                   "    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_last\").to(tl.float32)\n"
                   "    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)\n"
                   "    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_first\").to(tl.float32)\n"
                   "    y = x * rstd[:, None]\n")
# Lesson 04's tile kernel as 0.5.5 had it (one read of x, N a runtime value), as text edits of the current
# solution. The stages that edit that kernel ("tiles", "ladder", "rmsshort") start from it.
RMS_055 = [(RMS_N_CONST[1], RMS_N_CONST[0]), (RMS_TILE_RELOAD[1], RMS_TILE_RELOAD[0])]
LN_N_CONST = ("def _layernorm_fwd_kernel(X, Y, W, B, MEAN, RSTD, M, N, stride_x",
              "def _layernorm_fwd_kernel(X, Y, W, B, MEAN, RSTD, M, N: tl.constexpr, stride_x")
LN_TILE_WARPS = "num_warps=num_warps_for(BLOCK_M * BLOCK_N, x.element_size()))"   # lesson 05's tile launcher
# Lesson 05's tile kernel and warp rule as 0.5.4 had them (one read of x, N a runtime value, a warp table), as
# text edits of the current solution (0.5.5 on: x read twice, N a tl.constexpr, one warp per KB). The stages
# that edit the tile ("tiles", "ladder", "lnrows", "lnshort") start from it, as their runs did.
LN_054 = [("def _layernorm_fwd_kernel(X, Y, W, B, MEAN, RSTD, M, N: tl.constexpr, stride_x",
           "def _layernorm_fwd_kernel(X, Y, W, B, MEAN, RSTD, M, N, stride_x"),
          ("    x_ptrs = X + rows[:, None] * stride_x + cols[None, :]\n"
           "    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_last\").to(tl.float32)\n",
           "    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)\n"),
          ("    # the second read hits the cache (evict_last kept the tile there; evict_first now lets it go)\n"
           "    x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy=\"evict_first\").to(tl.float32)\n"
           "    y = (x - mean[:, None]) * rstd[:, None]\n",
           "    y = xc * rstd[:, None]\n"),
          ("    return max(4, min(32, block * elt_bytes // 1024))",
           "    nbytes = block * elt_bytes\n    if nbytes <= 4096:\n        return 4\n    if nbytes <= 16384:\n"
           "        return 8\n    return 16 if nbytes <= 32768 else 32")]
NO_ROW_MASK = ("    row_mask = rows < M\n", "    row_mask = tl.full([BLOCK_M], 1, tl.int1)   # only when BLOCK_M divides M\n")
LN_TILE_NO_STATS = ("    tl.store(MEAN + rows, mean, mask=row_mask)\n    tl.store(RSTD + rows, rstd, mask=row_mask)\n", "")
TILE_VARIANTS = {   # op -> name -> text edits of lesson 04's / 05's solution (their tile kernels)
    "rms": {"solution": RMS_055,
            "N-constexpr": RMS_055 + [RMS_N_CONST],
            "int32": RMS_055 + [INT32_ROWS],
            "no-masks": RMS_055 + [RMS_N_CONST, NO_ROW_MASK],
            "no-masks/no-rstd": RMS_055 + [RMS_N_CONST, NO_ROW_MASK,
                                           ("    tl.store(RSTD + rows, rstd, mask=row_mask)\n", "")]},
    "ln": {"solution": LN_054,
           "N-constexpr": LN_054 + [LN_N_CONST],
           "int32": LN_054 + [INT32_ROWS],
           "no-masks": LN_054 + [LN_N_CONST, NO_ROW_MASK],
           "no-masks/no-stats": LN_054 + [LN_N_CONST, NO_ROW_MASK, LN_TILE_NO_STATS]},
}


TILE_LAUNCHERS = {"rms": ("04_triton_rmsnorm", "rmsnorm_fwd_rows"), "ln": ("05_triton_layernorm", "layernorm_fwd")}
DISPATCHERS = {"rms": "rmsnorm", "ln": "layernorm"}


def op_args(c):
    """The tensors a sweep_with_peers context's op takes before eps: (x, w) or (x, w, b)."""
    return (c["x"], c["w"]) if c["rms"] else (c["x"], c["w"], c["b"])


def sweep_tiles(copy, op, spaces, passes, ms=(2, 4, 8), cases=((512, torch.bfloat16), (512, torch.float16))):
    """Each variant's tile launcher (TILE_LAUNCHERS) at ms rows per program, at the (N, dtype) cases, next to
    torch.compile and the lesson's dispatcher (stages "tiles", "ladder", "params", "lnrows")."""
    launcher = TILE_LAUNCHERS[op][1]

    def add_runs(runs, c):
        for name, ns in spaces.items():
            for m in ms:
                runs[f"{name}/m{m}"] = lambda ns=ns, m=m: ns[launcher](*op_args(c), c["eps"], rows_per_program=m)[0]

    sweep_with_peers(copy, list(cases), add_runs, ops=(op,), passes=passes)


def sweep_dispatchers(copy, op, spaces, cases, passes):
    """Each variant's dispatcher (DISPATCHERS) at the (N, dtype) cases, next to torch.compile and the solution's
    (stages "ladder", "params", "rowwarps", "lnwarps")."""
    def add_runs(runs, c):
        for name, ns in spaces.items():
            runs[name] = lambda ns=ns: ns[DISPATCHERS[op]](*op_args(c), c["eps"])[0]

    sweep_with_peers(copy, list(cases), add_runs, ops=(op,), passes=passes)


def time_tiles(copy):
    """Rows under 2 KB (N = 512 in bf16/fp16): the tile kernels of lessons 04 and 05 with N as a tl.constexpr
    or with int32 row offsets (run #19 had only the constexpr variant), or with N a constexpr and no masks at
    all ("no-masks": only right where BLOCK_M divides M, as here), also without the statistics' stores,
    at 2-8 rows per program (TILES: a comma-separated subset of the variants), against torch.compile (2 rows,
    1 warp, N a constant in its kernel); PASSES (default 5) interleaved passes, each kept."""
    passes = int(os.environ.get("PASSES", "5"))
    chosen = os.environ.get("TILES", "").split(",") if os.environ.get("TILES") else None
    for op, variants in TILE_VARIANTS.items():
        sweep_tiles(copy, op, load_variants(TILE_LAUNCHERS[op][0], variants, f"tile_{op}", chosen), passes)


def _ladder(op):
    """Cumulative text edits of a lesson's tile kernel toward torch.compile's kernel at N = 512 (stage "ladder");
    run #22 had the 0.5.2 kernels, whose weight and bias loads had no eviction hint."""
    warps = (("num_warps=min(8, num_warps_for(BLOCK_M * BLOCK_N, x.element_size())))", "num_warps=max(1, BLOCK_M // 2))")
             if op == "rms" else (LN_TILE_WARPS,
                                  "num_warps=max(1, BLOCK_M // 2))"))
    no_masks = [RMS_N_CONST if op == "rms" else LN_N_CONST, NO_ROW_MASK]
    const_stride = [("X + rows[:, None] * stride_x", "X + rows[:, None] * N"),    # only right when contiguous
                    ("Y + rows[:, None] * stride_y", "Y + rows[:, None] * N")]
    params = [("y = y * tl.load(W + cols, mask=col_mask, other=0.0)",
               "y = y * tl.load(W + cols, mask=col_mask, other=0.0, eviction_policy=\"evict_last\")")]
    if op == "ln":
        params.append(("y = y + tl.load(B + cols, mask=col_mask, other=0.0)",
                       "y = y + tl.load(B + cols, mask=col_mask, other=0.0, eviction_policy=\"evict_last\")"))
    no_stats = (TILE_VARIANTS[op]["no-masks/no-rstd" if op == "rms" else "no-masks/no-stats"][-1],)
    if not any(params[0][0] in text for text in solution_cells(TILE_LAUNCHERS[op][0])):
        params = []   # 0.5.3 on: the solution loads them evict_last already, so "ev" adds nothing
    steps = [("w", [warps]), ("nm", no_masks), ("i32", [INT32_ROWS]), ("sc", const_stride), ("ev", params),
             ("ns", list(no_stats))]
    base = LN_054 if op == "ln" else RMS_055   # the tiles as run #22 had them (lesson 05's of 0.5.4, 04's of 0.5.5)
    ladder, edits, name = {"solution": base}, base, ""
    for step, more in steps:
        edits, name = edits + more, f"{name}+{step}" if name else step
        ladder[name] = edits
    ladder["nm+i32+sc+ev"] = base + no_masks + [INT32_ROWS] + const_stride + params   # the solution's warps
    return ladder


ROW_WARPS = ("x2.stride(0), y.stride(0), N, eps,\n        BLOCK_N=BLOCK_N, HAS_WEIGHT=weight is not None,\n"
             "        num_warps=num_warps_for(BLOCK_N, x.element_size()))")


def time_ladder(copy):
    """Where does the last point at N = 512 go? The tile kernels of lessons 04 and 05 edited step by step toward
    torch.compile's kernel (2 rows and 1 warp per program, no masks, int32 offsets, the row stride a constant,
    weight and bias loaded evict_last, no statistics stored): w = m/2 warps, nm = N a constexpr and no masks,
    i32, sc = stride N, ev, ns = no stores, each cumulative, at 2-8 rows per program; then lesson 04's
    one-row kernel with half or twice its warps at 2K/4K fp32 and 8K fp16. PASSES (default 5) interleaved
    passes, each kept; LADDER=rms,ln,row picks parts."""
    passes = int(os.environ.get("PASSES", "5"))
    parts = os.environ.get("LADDER", "rms,ln,row").split(",")
    for op in ("rms", "ln"):
        if op in parts:
            sweep_tiles(copy, op, load_variants(TILE_LAUNCHERS[op][0], _ladder(op), f"ladder_{op}"), passes)
    if "row" in parts:
        def warps(expr):   # lesson 04's one-row launcher with num_warps = expr of its table's value w
            return [(ROW_WARPS, ROW_WARPS.replace("num_warps=num_warps_for(BLOCK_N, x.element_size()))",
                                                  "num_warps=" + expr.format(w="num_warps_for(BLOCK_N, x.element_size())") + ")"))]

        spaces = load_variants("04_triton_rmsnorm", {"warps/2": warps("max(1, {w} // 2)"),
                                                     "warps*2": warps("min(32, 2 * {w})")}, "ladder_row")
        sweep_dispatchers(copy, "rms", spaces, [(2048, torch.float32), (4096, torch.float32), (8192, torch.float16)],
                          passes)


def params_evict_last(lesson):
    """Edits of solutions/<lesson>.ipynb that load every weight and bias evict_last (kept in L2 while x streams
    through it), one (old cell, new cell) pair per code cell that has such a load without a hint."""
    edits = []
    for text in solution_cells(lesson):
        new = re.sub(r"tl\.load\(([WB]) \+ cols, mask=([^,]+), other=0\.0\)",
                     r'tl.load(\1 + cols, mask=\2, other=0.0, eviction_policy="evict_last")', text)
        if new != text:
            edits.append((text, new))
    return edits


def time_params(copy):
    """Weight and bias loaded evict_last (stage "ladder" found it worth 0.3-1.0 points at N = 512): the tiles
    at N = 512 with it alone and with N a constexpr, no row masks (EVEN_M: only where BLOCK_M divides M) and
    int32 offsets, at the solution's warps; then the lessons' dispatchers with it in every kernel over the
    bench's N in bf16 and fp32 (from 0.5.3 on the tiles already load them so: "ev" there equals "solution").
    PASSES (default 5) interleaved passes, each kept; PARAMS=tiles,sweep picks."""
    passes = int(os.environ.get("PASSES", "5"))
    parts = os.environ.get("PARAMS", "tiles,sweep").split(",")
    for op, n_const in (("rms", RMS_N_CONST), ("ln", LN_N_CONST)):
        lesson = TILE_LAUNCHERS[op][0]
        ev = params_evict_last(lesson)
        if "tiles" in parts:
            sweep_tiles(copy, op, load_variants(lesson, {
                "solution": [], "ev": ev, "ev+nc": ev + [n_const], "ev+nc+nrm": ev + [n_const, NO_ROW_MASK],
                "ev+i32": ev + [INT32_ROWS], "ev+nc+nrm+i32": ev + [n_const, NO_ROW_MASK, INT32_ROWS]}, f"params_{op}"),
                passes, ms=(4, 8))
        if "sweep" in parts:
            sweep_dispatchers(copy, op, load_variants(lesson, {"dispatch+ev": ev}, f"params_{op}"),
                              [(n, dt) for dt in (torch.bfloat16, torch.float32) for n in hb.DEFAULT_NS], passes)


ROW_W16 = ("    if nbytes <= 16384:\n        return 8\n",
           "    if nbytes <= 8192:\n        return 8\n    if nbytes <= 16384:\n        return 16\n")   # 16 KB rows: 16 warps
ROW_W8 = ("    if nbytes <= 8192:\n        return 8\n    return 16",     # from 0.5.3 on: back to the 0.5.2 table
          "    if nbytes <= 16384:\n        return 8\n    return 16")


def time_row_warps(copy):
    """Lesson 04's one-row kernel where torch.compile stays ahead in the bench (fp32 rows of 8-16 KB, and 8K bf16):
    16 KB rows with 16 warps instead of 8 (torch.compile's kernels there have 16), the weight loaded evict_last,
    and both (from 0.5.3 on, the solution has 16 warps there and "w8" is the old table). PASSES (default 7)
    interleaved passes, each kept."""
    passes = int(os.environ.get("PASSES", "7"))
    ev = [e for e in params_evict_last("04_triton_rmsnorm") if "def _rmsnorm_fwd_kernel" in e[0]]
    if any(ROW_W16[0] in text for text in solution_cells("04_triton_rmsnorm")):   # 0.5.2 (run #24)
        variants = {"w16": [ROW_W16], "ev": ev, "w16+ev": [ROW_W16] + ev}
    else:                                                                        # 0.5.3 on: 16 warps already
        variants = {"w8": [ROW_W8], "ev": ev, "w8+ev": [ROW_W8] + ev}
    sweep_dispatchers(copy, "rms", load_variants("04_triton_rmsnorm", variants, "rowwarps"),
                      [(2048, torch.float32), (4096, torch.float32), (8192, torch.float32),
                       (4096, torch.bfloat16), (8192, torch.bfloat16)], passes)


LOOPED_W2X = ("    return max(4, min(32, block_n * elt_bytes // 1024))",
              "    return max(4, min(32, block_n * elt_bytes // 512))")   # two warps per KB of chunk


def time_ln_warps(copy):
    """Lesson 05's dispatcher where torch.compile stays ahead (fp32 rows of 8-16 KB; its kernel at N = 2048 in
    fp32 has 2 rows and 16 warps per program) with the looped kernel given two warps per KB of chunk instead
    of one, at 2K-8K. PASSES (default 7) interleaved passes, each kept."""
    passes = int(os.environ.get("PASSES", "7"))
    sweep_dispatchers(copy, "ln", load_variants("05_triton_layernorm", {"warps-per-KB-2": [LOOPED_W2X]}, "lnwarps"),
                      [(2048, torch.float32), (4096, torch.float32), (2048, torch.bfloat16),
                       (4096, torch.bfloat16), (8192, torch.bfloat16)], passes)


LN_TILE_W16 = ("    if nbytes <= 16384:\n        return 8\n", "    if nbytes <= 4096:\n        return 8\n")   # 8-16 KB: 16


LN_TILE_RELOAD = [("    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)\n",
                   "    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,\n"
                   "                eviction_policy=\"evict_last\").to(tl.float32)\n"),
                  ("    y = xc * rstd[:, None]\n",
                   "    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,\n"
                   "                eviction_policy=\"evict_first\").to(tl.float32)\n"
                   "    y = (x - mean[:, None]) * rstd[:, None]\n")]


def time_ln_rows(copy):
    """LayerNorm at N = 2048-4096 in fp32 (8-16 KB rows), where torch.compile (2 rows, 16 warps per program)
    stays ahead of the dispatcher's looped kernel: exercise 1's tile at 1-4 rows per program, with its warp table
    and with 16 warps for 8-16 KB tiles (run #28), or with N a tl.constexpr and x loaded again for y ("nc/reload",
    run #31; all four start from the 0.5.4 tile, LN_054: at 2K fp32, 2 rows and 16 warps reached 100.1, median 99.9, against torch.compile 100.0 / 99.8 and
    the dispatcher 99.1 / 99.0; at 4K fp32 nothing beat the dispatcher). LN_ROWS_VARIANTS picks the variants.
    PASSES (default 7) interleaved passes, each kept."""
    passes = int(os.environ.get("PASSES", "7"))
    variants = {"tile": LN_054, "tile-w16": LN_054 + [LN_TILE_W16],
                # N a tl.constexpr, and x loaded again (evict_last, then evict_first) for y, as the looped kernel
                "nc/reload": LN_054 + [LN_N_CONST] + LN_TILE_RELOAD,
                "nc/reload/w16": LN_054 + [LN_N_CONST, LN_TILE_W16] + LN_TILE_RELOAD}
    chosen = os.environ.get("LN_ROWS_VARIANTS", "tile,tile-w16").split(",")   # run #28: the first two
    spaces = load_variants("05_triton_layernorm", variants, "lnrows", chosen)
    sweep_tiles(copy, "ln", spaces, passes, ms=(1, 2, 4), cases=((2048, torch.float32), (4096, torch.float32)))



LN_TILE_WARPS_X2 = (LN_TILE_WARPS,
                    "num_warps=min(32, 2 * num_warps_for(BLOCK_M * BLOCK_N, x.element_size())))")


def time_ln_short(copy):
    """Exercise 1's tile kernel, changed as stage "lnrows" found best at 2K fp32 (N a tl.constexpr, x loaded
    again for y), at every point the tile serves or might serve: N = 512 and 1024 in all dtypes at 2-8 rows per
    program, and N = 2048 in fp32 at 1-4, each with the warp table's num_warps and with twice that ("/x2").
    "reload" is the re-load without the constexpr N; every variant but "solution" starts from the 0.5.4 tile
    (LN_054). Run #32 (0.5.4 kernels): nc/reload at 4 rows reached 96.7 / 96.1 at N = 512 in bf16 / fp16 (the
    0.5.4 tile 95.4 / 94.5 at 4 rows, torch.compile 96.4 / 96.1), at N = 1024 in fp32 with 2 rows 99.6 (the
    dispatcher's looped kernel 99.0, torch.compile 99.1), at N = 2048 in fp32 with 2 rows and 16 warps ("x2" of
    the 0.5.4 table) 100.1 (looped 98.9, torch.compile 99.7); twice the table's warps lost 3-27 points on 2-8 KB
    tiles. 0.5.5 adopted it ("solution"). LN_SHORT_VARIANTS picks the variants; PASSES (default 5) interleaved
    passes, each kept."""
    passes = int(os.environ.get("PASSES", "5"))
    variants = {"tile": LN_054, "tile/x2": LN_054 + [LN_TILE_WARPS_X2], "reload": LN_054 + LN_TILE_RELOAD,
                "reload/x2": LN_054 + LN_TILE_RELOAD + [LN_TILE_WARPS_X2],
                "nc/reload": LN_054 + [LN_N_CONST] + LN_TILE_RELOAD,
                "nc/reload/x2": LN_054 + [LN_N_CONST, LN_TILE_WARPS_X2] + LN_TILE_RELOAD,
                "solution": []}   # 0.5.5: nc/reload with one warp per KB
    chosen = os.environ.get("LN_SHORT_VARIANTS", ",".join(variants)).split(",")
    spaces = load_variants("05_triton_layernorm", variants, "lnshort", chosen)
    short = [(n, d) for n in (512, 1024) for d in (torch.bfloat16, torch.float16, torch.float32)]
    sweep_tiles(copy, "ln", spaces, passes, ms=(2, 4, 8), cases=short)
    sweep_tiles(copy, "ln", spaces, passes, ms=(1, 2, 4), cases=((2048, torch.float32),))


LN_TILE_MAX16 = (LN_TILE_WARPS,
                 "num_warps=min(16, num_warps_for(BLOCK_M * BLOCK_N, x.element_size())))")


def time_ln_tile(copy):
    """The 0.5.5 tile (exercise 1 as the solution has it, its own rows and warps) against the 0.5.4 tile (LN_054)
    at the same rows and its own warp table, the 0.5.5 tile with at most 16 warps ("tile/max16"), and against the dispatcher and torch.compile, where 0.5.5's first bench found
    the tile far below the looped kernel (N = 1024 fp16, 16384 bf16) and at their twins; LN_TILE_POINTS
    (N:dtype,...) replaces the points. Registers and spills of every compiled tile. PASSES (default 5)."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    spaces = load_variants("05_triton_layernorm", {"tile-0.5.4": LN_054, "tile/max16": [LN_TILE_MAX16]}, "lntile")
    old, max16 = spaces["tile-0.5.4"], spaces["tile/max16"]
    torch._dynamo.config.cache_size_limit = 64
    points = env_points("LN_TILE_POINTS", [(1024, torch.float16), (1024, torch.bfloat16), (16384, torch.bfloat16),
                                           (16384, torch.float16), (512, torch.float16), (2048, torch.float32)])
    for N, dtype in points:
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        m = ns5["rows_per_program_for"](N, x.element_size())
        runs["tile"] = lambda: ns5["layernorm_fwd"](x, w, b, bench_ln.EPS)[0]
        runs["tile-0.5.4/same-m"] = lambda: old["layernorm_fwd"](x, w, b, bench_ln.EPS, rows_per_program=m)[0]
        runs["tile/max16"] = lambda: max16["layernorm_fwd"](x, w, b, bench_ln.EPS)[0]
        runs["looped/one-chunk"] = lambda: ns5["layernorm_fwd_looped"](x, w, b, bench_ln.EPS,
                                                                      block_n=triton.next_power_of_2(N))[0]
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=int(os.environ.get("PASSES", "5")))
        del x, w, b, y
        torch.cuda.empty_cache()
    for name, ns in (("tile", ns5), ("tile-0.5.4", old), ("tile/max16", max16)):
        for key, k in compiled(ns["_layernorm_fwd_kernel"]):
            emit(kernel=name, key=str(key)[:300], warps=k.metadata.num_warps, regs=k.n_regs, spills=k.n_spills)


@triton.jit
def _ln_prefetch_row_kernel(X, Y, W, B, MEAN, RSTD, M, stride_x, stride_y, eps, N: tl.constexpr,
                            BLOCK_N: tl.constexpr, WB_HINT: tl.constexpr):
    # Persistent: program p normalises rows p, p + P, p + 2P, ... (P programs). The next row's load is
    # issued before this row's two reductions, so HBM keeps streaming while the SM reduces; the row is
    # held in registers (x read once), its successor in x's own dtype.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x_next = tl.load(X + pid.to(tl.int64) * stride_x + cols, mask=mask & (pid < M), other=0.0)
    for row in range(pid, M, nprog):
        x = x_next.to(tl.float32)
        nxt = row + nprog
        x_next = tl.load(X + nxt * stride_x + cols, mask=mask & (nxt < M), other=0.0)
        mean = tl.sum(x, axis=0) / N
        xc = tl.where(mask, x - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / N + eps)
        w = tl.load(W + cols, mask=mask, other=0.0, eviction_policy=WB_HINT).to(tl.float32)
        b = tl.load(B + cols, mask=mask, other=0.0, eviction_policy=WB_HINT).to(tl.float32)
        y = xc * rstd * w + b
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
        tl.store(MEAN + row, mean)
        tl.store(RSTD + row, rstd)


def ln_prefetch_rows(x, w, b, y, mean, rstd, programs, warps, wb_hint=""):
    M, N = x.shape
    _ln_prefetch_row_kernel[(min(M, programs),)](x, y, w, b, mean, rstd, M, x.stride(0), y.stride(0), bench_ln.EPS,
                                                 N=N, BLOCK_N=triton.next_power_of_2(N), WB_HINT=wb_hint,
                                                 num_warps=warps)
    return y


def ln_point(N, dtype, ns5):
    """A LayerNorm benchmark point: x, w, b, y, mean, rstd and the runs of torch.compile and the lesson's
    dispatcher (ns5: lesson 05's namespace)."""
    x, w, b = inputs(TOTAL // N, N, dtype)
    M = x.shape[0]
    y = torch.empty_like(x)
    mean, rstd = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
    comp = torch.compile(bench_ln.composite, dynamic=False)
    runs = {"torch.compile": lambda: comp(x, w, b),
            "dispatch": lambda: ns5["layernorm"](x, w, b, bench_ln.EPS)[0]}
    return x, w, b, y, mean, rstd, runs


def time_ln_persist(copy):
    """Lesson 05's one-chunk rows (8-128 KB): a persistent kernel that holds one row in registers and has the
    next row's load in flight while it reduces (programs = SMs x 1 or 2, 8-32 warps), next to the lesson's
    dispatcher and torch.compile. PASSES (default 5) interleaved passes."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    torch._dynamo.config.cache_size_limit = 64
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    passes = int(os.environ.get("PASSES", "5"))
    cases = [(32768, torch.bfloat16), (32768, torch.float16), (16384, torch.bfloat16), (32768, torch.float32),
             (16384, torch.float32), (8192, torch.bfloat16), (8192, torch.float32), (4096, torch.float32)]
    for N, dtype in cases:
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        for warps in (8, 16, 32):
            if N * 4 // (32 * warps) > 128:       # more than 128 fp32 values per thread: it would spill
                continue
            for per_sm in (1, 2):
                for hint in ("", "evict_last"):
                    runs[f"persist/w{warps}/p{per_sm}{'/wb-last' if hint else ''}"] = (
                        lambda warps=warps, per_sm=per_sm, hint=hint:
                        ln_prefetch_rows(x, w, b, y, mean, rstd, per_sm * sms, warps, hint))
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()
    for _key, k in compiled(_ln_prefetch_row_kernel):
        emit(kernel="persist", warps=k.metadata.num_warps, regs=k.n_regs, spills=k.n_spills)


RMS_TILE_UNCAPPED = ("num_warps=min(8, num_warps_for(BLOCK_M * BLOCK_N, x.element_size())))",
                     "num_warps=num_warps_for(BLOCK_M * BLOCK_N, x.element_size()))")   # 16 warps for 16 KB tiles


def time_rms_short(copy):
    """Lesson 04's tile kernel changed as lesson 05's 0.5.5 tile (N a tl.constexpr, x re-loaded for y: "nc/reload"),
    also with the warp table uncapped ("/w16": 16 warps for 16 KB tiles), at the points where torch.compile stays
    ahead of lesson 04's dispatcher in the recorded bench (N = 512 bf16/fp16, 1-2K fp32) and their twins, at
    1-8 rows per program. Run #35 (0.5.5 kernels) named these "solution", "nc/reload" and "nc/reload/w16": at
    N = 512 with 8 rows, bf16 96.5 -> 96.8 and fp16 96.3 -> 96.5 (torch.compile 96.7, 96.5), and 0.5.6 adopted
    nc/reload. PASSES (default 5) interleaved passes, each kept."""
    passes = int(os.environ.get("PASSES", "5"))
    variants = {"tile-0.5.5": RMS_055, "solution": [], "solution/w16": [RMS_TILE_UNCAPPED]}
    spaces = load_variants("04_triton_rmsnorm", variants, "rmsshort")
    sweep_tiles(copy, "rms", spaces, passes, ms=(2, 4, 8),
                cases=((512, torch.bfloat16), (512, torch.float16), (1024, torch.bfloat16)))
    sweep_tiles(copy, "rms", spaces, passes, ms=(1, 2, 4),
                cases=((512, torch.float32), (1024, torch.float32), (2048, torch.float32)))



# Exercise 2's three-loop kernel (lesson 05) with N a tl.constexpr, x's first read evict_last and its last
# evict_first (the middle one has no hint: the compiler merged two evict_last loads into one), and rsqrt: the
# shape torch.compile generates for LayerNorm at 32K bf16. Each pass accumulates lane-wise over the chunks and
# reduces once, and no chunk is held across a reduction. LN_FIXED_WB_LAST also loads weight and bias evict_last.
LN_FIXED_FAST = [("def _layernorm_fwd_fixed_kernel(X, Y, W, B, MEAN, RSTD, N, stride_x",
                  "def _layernorm_fwd_fixed_kernel(X, Y, W, B, MEAN, RSTD, N: tl.constexpr, stride_x"),
                 ("        acc += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)\n"
                  "    mean = tl.sum(acc, axis=0) / N\n",
                  "        acc += tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy=\"evict_last\")"
                  ".to(tl.float32)\n    mean = tl.sum(acc, axis=0) / N\n"),
                 ("        acc += d * d\n    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)\n"
                  "    for off in range(0, N, BLOCK_N):\n        cols = off + tl.arange(0, BLOCK_N)\n"
                  "        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)\n",
                  "        acc += d * d\n    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)\n"
                  "    for off in range(0, N, BLOCK_N):\n        cols = off + tl.arange(0, BLOCK_N)\n"
                  "        x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy=\"evict_first\")"
                  ".to(tl.float32)\n")]
LN_FIXED_WB_LAST = [("            y = y * tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)\n        if HAS_BIAS:\n"
                     "            y = y + tl.load(B + cols, mask=cols < N, other=0.0).to(tl.float32)\n"
                     "        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=cols < N)",
                     "            y = y * tl.load(W + cols, mask=cols < N, other=0.0, eviction_policy=\"evict_last\")"
                     ".to(tl.float32)\n        if HAS_BIAS:\n"
                     "            y = y + tl.load(B + cols, mask=cols < N, other=0.0, eviction_policy=\"evict_last\")"
                     ".to(tl.float32)\n"
                     "        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=cols < N)")]


def reg_cap(maxnreg):
    """Launch options that cap a kernel's registers per thread (ptxas .maxnreg), or none."""
    return {"maxnreg": maxnreg} if maxnreg else {}


def ln_row_launch(kernel, x, w, b, y, mean, rstd, block_n, warps, maxnreg=None, **constexprs):
    """One program per row of lesson 05's looped or three-loop kernel (or a variant), arguments by name (the two
    order them differently), with weight and bias, at most maxnreg registers per thread."""
    M, N = x.shape
    kernel[(M,)](X=x, Y=y, W=w, B=b, MEAN=mean, RSTD=rstd, stride_x=x.stride(0), stride_y=y.stride(0),
                 eps=bench_ln.EPS, N=N, BLOCK_N=block_n, HAS_WEIGHT=True, HAS_BIAS=True, num_warps=warps,
                 **constexprs, **reg_cap(maxnreg))
    return y


def ln_tile_capped(ns5, x, w, b, y, mean, rstd, maxnreg):
    """Exercise 1's tile kernel at its own rows and warps, with at most maxnreg registers per thread."""
    M, N = x.shape
    m, block_n = ns5["rows_per_program_for"](N, x.element_size()), triton.next_power_of_2(N)
    ns5["_layernorm_fwd_kernel"][(triton.cdiv(M, m),)](
        x, y, w, b, mean, rstd, M, N, x.stride(0), y.stride(0), bench_ln.EPS, BLOCK_M=m, BLOCK_N=block_n,
        HAS_WEIGHT=True, HAS_BIAS=True, num_warps=ns5["num_warps_for"](m * block_n, x.element_size()),
        **reg_cap(maxnreg))
    return y


def time_ln_regs(copy):
    """Registers and occupancy. A 32-warp program (1024 threads) leaves room for a second one on an SM only at
    <= 32 registers per thread (65536 per SM). Compiled for sm_90 on a CPU (regs_sm90.py):
    exercise 1's tile at 16K bf16 takes 44 (fp16: 32), the looped kernel's 16K-value chunks 32, a whole 32K
    bf16 row held 64. Here: the tile capped at 32 registers ("/r32", ptxas .maxnreg) at 16K, the looped
    kernel's one chunk capped, and a three-pass kernel ("three": exercise 2's kernel edited by LN_FIXED_FAST,
    nothing held across a reduction) at 16K-64K, next to the dispatcher and torch.compile; registers and spills
    of every compiled kernel. PASSES (default 5). Run #35 timed a copy of that kernel written out in this file;
    compiled for sm_90 (regs_sm90.py) the two have the same registers and instruction count at every 16-bit
    point of the stage, and at N = 16384 fp32 the edited one has 50 registers instead of 40 (one program per SM
    either way)."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    three = load_variants("05_triton_layernorm", {"": LN_FIXED_FAST, "evict_last": LN_FIXED_FAST + LN_FIXED_WB_LAST},
                          "lnregs")
    three = {hint: ns["_layernorm_fwd_fixed_kernel"] for hint, ns in three.items()}
    looped = ns5["_layernorm_fwd_looped_kernel"]
    torch._dynamo.config.cache_size_limit = 64
    passes = int(os.environ.get("PASSES", "5"))
    points = env_points("LN_REGS_POINTS", [(16384, torch.bfloat16), (16384, torch.float16), (32768, torch.bfloat16),
                                           (32768, torch.float16), (65536, torch.bfloat16), (16384, torch.float32),
                                           (32768, torch.float32), (8192, torch.bfloat16)])
    for N, dtype in points:
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        row_bytes = N * x.element_size()
        if row_bytes <= 32768:
            for cap in (None, 32):
                runs[f"tile{'/r32' if cap else ''}"] = lambda cap=cap: ln_tile_capped(ns5, x, w, b, y, mean, rstd, cap)
        full = triton.next_power_of_2(N)
        full_warps = ns5["num_warps_for"](full, x.element_size())
        for cap in (None, 32, 40):
            runs[f"looped/one-chunk{f'/r{cap}' if cap else ''}"] = (
                lambda cap=cap: ln_row_launch(looped, x, w, b, y, mean, rstd, full, full_warps, cap))
        for block in sorted({full, max(1024, full // 2), min(full, 16384)}):
            warps = ns5["num_warps_for"](block, x.element_size())
            for cap in (None, 32):
                for hint in ("", "evict_last"):
                    name = f"three/b{block}/w{warps}{f'/r{cap}' if cap else ''}{'/wb-last' if hint else ''}"
                    runs[name] = (lambda block=block, warps=warps, cap=cap, hint=hint:
                                  ln_row_launch(three[hint], x, w, b, y, mean, rstd, block, warps, cap))
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()
    for name, fn in (("tile", ns5["_layernorm_fwd_kernel"]), ("looped", looped), ("three", three[""]),
                     ("three/wb-last", three["evict_last"])):
        for key, k in compiled(fn):
            emit(kernel=name, key=str(key)[:300], warps=k.metadata.num_warps,
                 maxnreg=getattr(k.metadata, "maxnreg", None), regs=k.n_regs, spills=k.n_spills)


# Lesson 05's looped kernel with its pass-1 chunk loop software-pipelined by Triton (tl.range num_stages): the next
# chunk's load (cp.async into shared memory) is in flight while this chunk reduces. STAGES = 1 is the solution.
LN_LOOP_PIPE = [("    for off in range(0, N, BLOCK_N):\n        cols = off + tl.arange(0, BLOCK_N)\n        mask = cols < N\n"
                 "        x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy=\"evict_last\")",
                 "    for off in tl.range(0, N, BLOCK_N, num_stages=STAGES):\n        cols = off + tl.arange(0, BLOCK_N)\n"
                 "        mask = cols < N\n"
                 "        x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy=\"evict_last\")"),
                ("BLOCK_N: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):\n"
                 "    # Idea: pass 1 folds",
                 "BLOCK_N: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,\n"
                 "                                 STAGES: tl.constexpr = 1):\n    # Idea: pass 1 folds")]


def time_ln_pipe(copy):
    """Lesson 05's looped kernel with pass 1's chunk loop pipelined (LN_LOOP_PIPE, 2-3 stages), at the dispatcher's
    chunk and 32 warps (compiled for sm_90 on a CPU: 43 registers with 2 stages, one program per SM, so also
    capped at 32: "/r32", a few stack bytes) and at 8192-value chunks with 16 warps (40-49 registers), at
    N = 16K-64K in 16-bit types, next to the dispatcher and torch.compile. PASSES (default 5)."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    pipe = load_variants("05_triton_layernorm", {"pipe": LN_LOOP_PIPE}, "lnpipe")["pipe"]
    kernel = pipe["_layernorm_fwd_looped_kernel"]
    torch._dynamo.config.cache_size_limit = 64
    passes = int(os.environ.get("PASSES", "5"))
    for N, dtype in ((32768, torch.bfloat16), (32768, torch.float16), (65536, torch.bfloat16), (16384, torch.bfloat16)):
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        half = triton.next_power_of_2(N) // (2 if N * x.element_size() > 32768 else 1)
        for block, warps in ((half, 32), (8192, 16)):
            for stages in (1, 2, 3):
                for cap in ((None, 32) if warps == 32 and stages > 1 else (None,)):
                    runs[f"pipe/b{block}/w{warps}/s{stages}{f'/r{cap}' if cap else ''}"] = (
                        lambda block=block, warps=warps, stages=stages, cap=cap:
                        ln_row_launch(kernel, x, w, b, y, mean, rstd, block, warps, cap, STAGES=stages))
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()
    for key, k in compiled(kernel):
        emit(kernel="pipe", key=str(key)[:300], warps=k.metadata.num_warps, maxnreg=getattr(k.metadata, "maxnreg", None),
             regs=k.n_regs, spills=k.n_spills, shared=k.metadata.shared)


@triton.jit
def _ln_tma_rows_kernel(x_desc, Y, W, B, MEAN, RSTD, M, stride_y, eps,
                        R: tl.constexpr, C: tl.constexpr, STAGES: tl.constexpr):
    # Idea: a persistent grid (one program per SM) walks rows pid, pid + P, ...; a row of N = R * C values comes
    # into shared memory by TMA (x_desc: x viewed as (M * R, C), block [R, C]) and the pipeliner (num_stages)
    # has the next row's copy in flight while this row's two reductions run. The row is held in registers, so
    # x is read once (no L2 re-read), and the copy in flight costs no registers.
    N: tl.constexpr = R * C
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    for row in tl.range(tl.program_id(0), M, tl.num_programs(0), num_stages=STAGES):
        x = x_desc.load([row * R, 0]).to(tl.float32)
        mean = tl.sum(tl.sum(x, axis=1), axis=0) / N
        xc = x - mean
        rstd = tl.rsqrt(tl.sum(tl.sum(xc * xc, axis=1), axis=0) / N + eps)
        w = tl.load(W + offs).to(tl.float32)
        b = tl.load(B + offs).to(tl.float32)
        tl.store(Y + row * stride_y + offs, (xc * rstd * w + b).to(Y.dtype.element_ty))   # int32: M * N < 2**31 here
        tl.store(MEAN + row, mean)
        tl.store(RSTD + row, rstd)


def ln_tma_rows(x, w, b, y, mean, rstd, programs, warps, stages, c=256):
    """_ln_tma_rows_kernel on contiguous rows whose N is a multiple of c (the descriptor's inner box)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    M, N = x.shape
    assert x.is_contiguous() and N % c == 0, "the TMA view needs contiguous rows, N a multiple of c"
    desc = TensorDescriptor(x, [M * (N // c), c], [c, 1], [N // c, c])
    _ln_tma_rows_kernel[(min(programs, M),)](desc, y, w, b, mean, rstd, M, y.stride(0), bench_ln.EPS,
                                             R=N // c, C=c, STAGES=stages, num_warps=warps)
    return y


def time_ln_tma(copy):
    """Rows of 32-64 KB in 16-bit types (lesson 05's 32K bf16 point stays at 93 %): a persistent kernel whose next
    row arrives by TMA into shared memory while this row reduces (_ln_tma_rows_kernel), 1 program per SM (a whole
    32K bf16 row held takes 64 registers with 32 warps; compiled for sm_90, 2 stages use 192 KB of shared memory),
    16 or 32 warps, 2-3 stages, next to the dispatcher and torch.compile. PASSES (default 5)."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    torch._dynamo.config.cache_size_limit = 64
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    passes = int(os.environ.get("PASSES", "5"))
    for N, dtype in ((32768, torch.bfloat16), (32768, torch.float16), (16384, torch.bfloat16), (16384, torch.float16)):
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        for warps, stages in ((32, 2), (16, 2)) if N == 32768 else ((32, 2), (32, 3), (16, 3)):
            runs[f"tma/w{warps}/s{stages}"] = (lambda warps=warps, stages=stages:
                                               ln_tma_rows(x, w, b, y, mean, rstd, sms, warps, stages))
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()
    for key, k in compiled(_ln_tma_rows_kernel):
        emit(kernel="tma", key=str(key)[:300], warps=k.metadata.num_warps, regs=k.n_regs, spills=k.n_spills,
             shared=k.metadata.shared)


# Lesson 04's one-row kernel edited toward torch.compile's kernel, which stores no rstd and has the row stride and
# the row offsets' width fixed at compile time (stage "rowladder").
ROW_NO_RSTD = ("    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)\n    tl.store(RSTD + row, rstd)\n",
               "    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)\n")
ROW_STRIDE_N = [("    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0, eviction_policy=\"evict_last\")",
                 "    x = tl.load(X + row * N + cols, mask=mask, other=0.0, eviction_policy=\"evict_last\")"),
                ("    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0, eviction_policy=\"evict_first\")",
                 "    x = tl.load(X + row * N + cols, mask=mask, other=0.0, eviction_policy=\"evict_first\")"),
                ("    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)\n",
                 "    tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)\n")]   # only right when contiguous
ROW_INT32 = ("    row = tl.program_id(0).to(tl.int64)\n", "    row = tl.program_id(0)\n")   # only while M * N < 2**31


def time_row_ladder(copy):
    """Lesson 04's one-row kernel where torch.compile stays 0.2-0.4 points ahead in the medians (run #36: 8K bf16,
    2K and 4K fp32), edited toward torch.compile's kernel one difference at a time and all together: no rstd
    store ("no-rstd"), the row stride N instead of a runtime argument ("stride-N"), int32 row offsets ("i32").
    The dispatcher sends these points to the one-row kernel, so each variant's dispatcher is timed. PASSES
    (default 7) interleaved passes, each kept."""
    passes = int(os.environ.get("PASSES", "7"))
    variants = {"no-rstd": [ROW_NO_RSTD], "stride-N": ROW_STRIDE_N, "i32": [ROW_INT32],
                "all": [ROW_INT32, ROW_NO_RSTD] + ROW_STRIDE_N}
    sweep_dispatchers(copy, "rms", load_variants("04_triton_rmsnorm", variants, "rowladder"),
                      [(2048, torch.float32), (4096, torch.float32), (8192, torch.bfloat16)], passes)


LN_NO_STATS = [LN_TILE_NO_STATS,   # exercise 1's tile, then exercise 3's looped kernel
               ("        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)\n    tl.store(MEAN + row, mean)\n"
                "    tl.store(RSTD + row, rstd)\n", "        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)\n")]


# The statistics stored as soon as they are known, before y (stage "statsfirst"): does the order of the stores,
# not the bytes, cost the tenths that torch.compile leads by (stages "rowladder" and "lnnostats")?
ROW_RSTD_FIRST = [ROW_NO_RSTD,
                  ("    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)\n",
                   "    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)\n    tl.store(RSTD + row, rstd)\n")]
ROWS_RSTD_FIRST = [("    tl.store(RSTD + rows, rstd, mask=row_mask)\n", ""),
                   ("    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)\n",
                    "    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)\n    tl.store(RSTD + rows, rstd, mask=row_mask)\n")]
ROWS_NO_RSTD = ("    tl.store(RSTD + rows, rstd, mask=row_mask)\n", "")
LN_TILE_STATS_FIRST = [LN_TILE_NO_STATS,
                       ("    rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)\n",
                        "    rstd = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)\n"
                        "    tl.store(MEAN + rows, mean, mask=row_mask)\n    tl.store(RSTD + rows, rstd, mask=row_mask)\n")]
LN_LOOPED_STATS_FIRST = [("        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)\n    tl.store(MEAN + row, mean)\n"
                          "    tl.store(RSTD + row, rstd)\n", "        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)\n"),
                         ("    rstd = tl.rsqrt(m2 / N + eps)\n",
                          "    rstd = tl.rsqrt(m2 / N + eps)\n    tl.store(MEAN + row, mean)\n    tl.store(RSTD + row, rstd)\n")]


def time_stats_first(copy):
    """Both dispatchers with the statistics stored before y ("stats-first") and without them ("no-stats"), at the
    points where the 0.5.7 record has torch.compile ahead by 0.1-0.7 (README). PASSES (default 7) interleaved
    passes, each kept.

    H100, 2026-11-23 (0.5.14 kernels; the last run in explore_cluster_H100.jsonl), medians of seven passes, % of copy,
    dispatcher / stats-first / no-stats / torch.compile:
        RMSNorm 512 fp16 96.2 / 96.5 / 96.3 / 96.3     LayerNorm 512 bf16  95.9 / 95.6 / 96.7 / 96.1
                1K bf16  96.2 / 96.2 / 97.3 / 96.2               512 fp16  95.5 / 94.9 / 96.0 / 95.6
                2K fp32  99.5 / 99.4 / 99.8 / 100.0              4K fp32   99.6 / 99.6 / 99.9 / 99.9
                4K fp32  99.6 / 99.9 / 99.8 / 100.0              16K bf16  95.2 / 95.4 / 95.5 / 95.0
                8K bf16  96.4 / 97.0 / 96.6 / 96.7               16K fp16  95.7 / 95.2 / 95.4 / 95.5
                16K bf16 96.7 / 96.0 / 96.8 / 96.8               16K fp32  98.2 / 97.9 / 97.8 / 98.2
                16K fp16 96.8 / 96.5 / 96.8 / 96.5
    The order of the stores moves points by -0.7 to +0.6, no consistent gain: the kernels keep the statistics last.
    In these medians torch.compile leads the dispatchers by 0.3-0.5 at RMSNorm 2K and 4K fp32 and 8K bf16 and by
    0.1-0.3 at LayerNorm 512 and 4K fp32; elsewhere they are within 0.1 of it or ahead."""
    passes = int(os.environ.get("PASSES", "7"))
    rms = {"stats-first": ROW_RSTD_FIRST + ROWS_RSTD_FIRST, "no-stats": [ROW_NO_RSTD, ROWS_NO_RSTD]}
    sweep_dispatchers(copy, "rms", load_variants("04_triton_rmsnorm", rms, "statsfirst"),
                      [(512, torch.float16), (1024, torch.bfloat16), (2048, torch.float32), (4096, torch.float32),
                       (8192, torch.bfloat16), (16384, torch.bfloat16), (16384, torch.float16)], passes)
    ln = {"stats-first": LN_TILE_STATS_FIRST + LN_LOOPED_STATS_FIRST, "no-stats": LN_NO_STATS}
    sweep_dispatchers(copy, "ln", load_variants("05_triton_layernorm", ln, "statsfirst"),
                      [(512, torch.bfloat16), (512, torch.float16), (4096, torch.float32), (16384, torch.bfloat16),
                       (16384, torch.float16), (16384, torch.float32)], passes)


def time_rms_configs(copy):
    """Lesson 04's kernels launched directly with other warps and rows per program, at the points where torch.compile
    leads the dispatcher in seven-pass medians (stage "statsfirst": RMSNorm 2K and 4K fp32, 8K bf16): is there a
    launch of our kernels that leads it? one/wW: the one-row kernel; rowsR/wW: the tile kernel. PASSES (default 7).

    H100, 2026-11-23 (the run after "statsfirst" in explore_cluster_H100.jsonl), medians of seven passes, % of copy:
    2K fp32: torch.compile 99.9, rows2/w16 and rows4/w16 99.9, dispatcher (one/w8) 99.4; 4K fp32: torch.compile 99.9,
    dispatcher (one/w16) 99.6, rows2/w16 99.5, nothing higher; 8K bf16: rows2/w16 96.5, torch.compile 96.4, rows2/w32
    96.4, dispatcher (one/w16) 96.0. A tile of two rows with 16 warps ties torch.compile at 2K fp32 and 8K bf16
    (+0.5 over the dispatcher); at 4K fp32 no launch tried reaches it. The dispatcher is unchanged: half a point at
    two points, against exercise 2's measured rule (tiles for rows under 2 KB, at most 8 warps)."""
    passes = int(os.environ.get("PASSES", "7"))
    shapes = {2048: ((4, 8, 16), ((2, 8), (2, 16), (4, 8), (4, 16))),
              4096: ((8, 16, 32), ((2, 8), (2, 16), (4, 16))),
              8192: ((8, 16, 32), ((2, 16), (2, 32)))}

    def add_runs(runs, c):
        ns4, x, w, y, rstd, M, N, eps = (c[k] for k in ("ns4", "x", "w", "y", "rstd", "M", "N", "eps"))
        one, rows = ns4["_rmsnorm_fwd_kernel"], ns4["_rmsnorm_fwd_rows_kernel"]
        warps, tiles = shapes[N]
        for wp in warps:
            runs[f"one/w{wp}"] = lambda wp=wp: (one[(M,)](x, y, w, rstd, x.stride(0), y.stride(0), N, eps, BLOCK_N=N,
                                                          HAS_WEIGHT=True, num_warps=wp), y)[1]
        for r, wp in tiles:
            runs[f"rows{r}/w{wp}"] = lambda r=r, wp=wp: (rows[(triton.cdiv(M, r),)](
                x, y, w, rstd, M, N, x.stride(0), y.stride(0), eps, BLOCK_M=r, BLOCK_N=N, HAS_WEIGHT=True,
                num_warps=wp), y)[1]

    sweep_with_peers(copy, [(2048, torch.float32), (4096, torch.float32), (8192, torch.bfloat16)], add_runs,
                     ops=("rms",), passes=passes)


def time_ln_no_stats(copy):
    """Lesson 05's dispatcher without the mean and rstd stores (exercise 1's tile and exercise 3's looped kernel,
    LN_NO_STATS), where the recorded bench has torch.compile a few tenths ahead (fp32 512, 4K-16K) and at 32K
    bf16: what do the statistics, which torch.compile's composite does not produce, cost? PASSES (default 7)."""
    passes = int(os.environ.get("PASSES", "7"))
    sweep_dispatchers(copy, "ln", load_variants("05_triton_layernorm", {"no-stats": LN_NO_STATS}, "lnnostats"),
                      [(512, torch.float32), (4096, torch.float32), (8192, torch.float32), (16384, torch.float32),
                       (32768, torch.bfloat16)], passes)


def time_ln_size(copy):
    """Does the bench's size hold 32K bf16 back? The bench fixes M * N = 64 Mi elements, so a 32K bf16 LayerNorm
    runs about 90 us: 2048 rows, under 8 waves of two programs per SM. Lesson 05's and 04's dispatchers at
    M = 1/2 ... 8 times the bench's rows, each against a copy of the same bytes timed just before
    (a "case" row gives M and that copy); PASSES (default 3)."""
    from autograder.notebook import load
    ns4, e4 = load(ROOT / "solutions" / "04_triton_rmsnorm.ipynb")
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e4 and not e5, (e4, e5)
    passes = int(os.environ.get("PASSES", "3"))
    for N, dtype in ((32768, torch.bfloat16), (16384, torch.bfloat16), (32768, torch.float32)):
        for scale in (0.5, 1, 2, 4, 8):
            M = int(TOTAL // N * scale)
            x, w, b = inputs(M, N, dtype)
            same = hb.copy_gbs(M * N, str(dtype)[6:])
            emit(case="lnsize", N=N, dtype=str(dtype)[6:], M=M, copy_gbs=round(same, 1))
            best_of_two("ln", {"dispatch": lambda: ns5["layernorm"](x, w, b, bench_ln.EPS)[0]}, x, w, b, same,
                        passes=passes)
            best_of_two("rms", {"rms-dispatch": lambda: ns4["rmsnorm"](x, w, bench_rms.EPS)[0]}, x, w, b, same,
                        passes=passes)
            del x, w, b
            torch.cuda.empty_cache()


def time_ln_waves(copy):
    """Is the 32K bf16 loss the last wave? Nsight Compute (ncu_layernorm.py, run #44) has the dispatcher's 2048
    programs at two per SM (264 at once on the H100's 132 SMs: 7.76 rows each) with the busiest SM active 11 %
    longer than the least busy one. Here the dispatcher at row counts that fill whole waves (M = 1848 = 7 x 264,
    2112 = 8 x 264) or whole rows per SM (1980 = 15 x 132, 2244 = 17 x 132) and at the bench's 2048, each
    against a copy of the same bytes timed just before; 32K fp32 (one program per SM) alongside. PASSES
    (default 5). Run #45: no. 32K bf16 at M = 1848 / 1980 / 2048 / 2112 / 2244: 95.2 / 94.4 / 95.2 / 95.1 / 95.7
    of the same-bytes copy; fp32 at 1980 / 2048 / 2112: 97.3 / 97.5 / 97.8. Nsight Compute at whole waves
    (#45 in ncu_layernorm_H100.txt) has the same 17K-cycle spread between the least and the most busy SM at
    1848, 2112, 4096 and 4224 rows: the drain is about one program's time whatever the row count, so it weighs
    less as M grows (stage "lnsize")."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    passes = int(os.environ.get("PASSES", "5"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for N, dtype, rows in ((32768, torch.bfloat16, (7 * 2 * sms, 15 * sms, 2048, 8 * 2 * sms, 17 * sms)),
                           (32768, torch.float32, (15 * sms, 2048, 16 * sms))):
        for M in rows:
            x, w, b = inputs(M, N, dtype)
            same = hb.copy_gbs(M * N, str(dtype)[6:])
            emit(case="lnwaves", N=N, dtype=str(dtype)[6:], M=M, copy_gbs=round(same, 1))
            best_of_two("ln", {f"dispatch/M{M}": lambda: ns5["layernorm"](x, w, b, bench_ln.EPS)[0]}, x, w, b, same,
                        passes=passes)
            del x, w, b
            torch.cuda.empty_cache()


@triton.jit
def _ln_tail_split_kernel(X, Y, W, B, MEAN, RSTD, PART, COUNT, stride_x, stride_y, eps, R, max_spins,
                          N: tl.constexpr, BLOCK_N: tl.constexpr):
    # Idea: the launch's last programs are half as long. Rows below R are one program each (lesson 05's looped
    # kernel: Chan over chunks of BLOCK_N, then the row again from L2); each row from R on is split over two
    # consecutive programs (N = 2 * BLOCK_N, one chunk each, held in registers) that exchange their chunk
    # statistics through PART and the row's counter COUNT as lesson 05's split kernel does (no fallback: after
    # max_spins the answer is wrong and the check says so). Programs start in id order, so the split rows fill
    # the drain at the end of the launch.
    pid = tl.program_id(0)
    if pid < R:
        row = pid.to(tl.int64)
        n = 0.0
        mean = 0.0
        m2 = 0.0
        for off in range(0, N, BLOCK_N):
            cols = off + tl.arange(0, BLOCK_N)
            x = tl.load(X + row * stride_x + cols, eviction_policy="evict_last").to(tl.float32)
            mean_c = tl.sum(x, axis=0) / BLOCK_N
            d = x - mean_c
            m2_c = tl.sum(d * d, axis=0)
            n_new = n + BLOCK_N
            delta = mean_c - mean
            mean = mean + delta * (BLOCK_N / n_new)
            m2 = m2 + m2_c + delta * delta * (n * BLOCK_N / n_new)
            n = n_new
        rstd = tl.rsqrt(m2 / N + eps)
        for off in range(0, N, BLOCK_N):
            cols = off + tl.arange(0, BLOCK_N)
            x = tl.load(X + row * stride_x + cols, eviction_policy="evict_first").to(tl.float32)
            y = (x - mean) * rstd * tl.load(W + cols).to(tl.float32) + tl.load(B + cols).to(tl.float32)
            tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty))
        tl.store(MEAN + row, mean)
        tl.store(RSTD + row, rstd)
    else:
        q = pid - R
        row = (R + q // 2).to(tl.int64)
        part = q % 2
        cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
        x = tl.load(X + row * stride_x + cols).to(tl.float32)
        mean_c = tl.sum(x, axis=0) / BLOCK_N
        xc = x - mean_c
        slot = PART + (row * 2 + part) * 2
        tl.store(slot, mean_c)
        tl.store(slot + 1, tl.sum(xc * xc, axis=0))
        tl.debug_barrier()
        before = tl.atomic_add(COUNT + row, 1, sem="acq_rel")
        target = (before // 2 + 1) * 2
        now = before + 1
        spins = 0
        while (now < target) & (spins < max_spins):
            now = tl.atomic_add(COUNT + row, 0, sem="acquire")
            spins += 1
        k = tl.arange(0, 2)
        means = tl.load(PART + (row * 2 + k) * 2, volatile=True)
        m2s = tl.load(PART + (row * 2 + k) * 2 + 1, volatile=True)
        mean = tl.sum(means, axis=0) / 2
        d = means - mean
        m2 = tl.sum(m2s + BLOCK_N * d * d, axis=0)
        rstd = tl.rsqrt(m2 / N + eps)
        y = (x - mean) * rstd * tl.load(W + cols).to(tl.float32) + tl.load(B + cols).to(tl.float32)
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty))
        if part == 0:
            tl.store(MEAN + row, mean)
            tl.store(RSTD + row, rstd)


def time_ln_tail(copy):
    """Half-length programs at the end of the launch (_ln_tail_split_kernel): the last T rows of a 32K 16-bit
    LayerNorm split over two programs each, the rest whole rows as the dispatcher runs them (two chunks of 16K,
    32 warps), T = 0 (the dispatcher's kernel written out here) to every row, next to the dispatcher; "/r32":
    capped at 32 registers per thread (the split branch takes the kernel to 47 on sm_90, one program per SM;
    capped, 32 with 32 bytes of stack). Run #44 (Nsight Compute) has the SMs' busy times 9 us apart at the end
    of a 93 us launch, about one whole-row program. PASSES (default 5); TAIL_POINTS (N:dtype,...).
    Runs #46-#47 (32K bf16, % of the fp32 copy): the split branch alone (T = 0) costs the whole rows 16 points
    (75.7, one program per SM) or 4.6 capped (87.4 /r32, against the dispatcher's 92.0), and every split tail
    loses more: T = 66 / 132 / 264 / 528 86.4 / 85.6 / 83.8 / 81.0 (/r32). The exchange through global memory
    costs a split program more than the drain it fills."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    passes = int(os.environ.get("PASSES", "5"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for N, dtype in env_points("TAIL_POINTS", [(32768, torch.bfloat16), (32768, torch.float16), (16384, torch.bfloat16)]):
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        M = x.shape[0]
        part, count = helpers.split_workspace(M, 2, x.device)   # PART, COUNT for two programs per row
        block = N // 2
        for tail in sorted({0, sms // 2, sms, 2 * sms, 4 * sms, M}):
            for cap in (None, 32):
                def run(tail=tail, cap=cap):
                    _ln_tail_split_kernel[(M + tail,)](x, y, w, b, mean, rstd, part, count, x.stride(0), y.stride(0),
                                                       bench_ln.EPS, M - tail, 1 << 20, N=N, BLOCK_N=block,
                                                       num_warps=ns5["num_warps_for"](block, x.element_size()),
                                                       **reg_cap(cap))
                    return y
                runs[f"tail/T{tail}{f'/r{cap}' if cap else ''}"] = run
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()


def looped_rows(ns5, x, y, w, b, mean, rstd, lo, hi, **launch):
    """Rows [lo, hi) through lesson 05's looped kernel (from namespace ns5) as the dispatcher launches it."""
    N, elt = x.shape[1], x.element_size()
    block = triton.next_power_of_2(N) // (2 if elt == 2 and N * elt > 32768 else 1)   # the dispatcher's chunk
    ns5["_layernorm_fwd_looped_kernel"][(hi - lo,)](
        x[lo:hi], y[lo:hi], w, b, mean[lo:hi], rstd[lo:hi], x.stride(0), y.stride(0), bench_ln.EPS, N=N, BLOCK_N=block,
        HAS_WEIGHT=True, HAS_BIAS=True, num_warps=ns5["num_warps_for"](block, elt), **launch)


def split_rows(ns5, x, y, w, b, mean, rstd, lo, hi, chunk, part, count, **launch):
    """Rows [lo, hi) through lesson 05's split kernel, in programs of `chunk` elements (workspace part, count)."""
    N, split = x.shape[1], triton.cdiv(x.shape[1], chunk)
    ns5["_layernorm_fwd_split_kernel"][((hi - lo) * split,)](
        x[lo:hi], y[lo:hi], w, b, mean[lo:hi], rstd[lo:hi], part, count, N, x.stride(0), y.stride(0), bench_ln.EPS,
        1 << 14, 1 << 30, SPLIT=split, SPLIT_P2=triton.next_power_of_2(split), CHUNK=chunk,
        FB_BLOCK=min(chunk, 1024), HAS_WEIGHT=True, HAS_BIAS=True,
        num_warps=min(8, ns5["num_warps_for"](chunk, x.element_size())), **launch)


def time_ln_streams(copy):
    """Fill the drain from a second stream: the dispatcher's looped kernel runs rows [0, M - T) on the caller's
    stream (or, "/prio", on a high-priority stream forked from it, so that its programs are placed first) while
    the last T rows run on a side stream as the lesson's split kernel (programs of one CHUNK, "/c<CHUNK>"), whose
    programs are short and can take the SMs that the whole rows leave idle in the last ~9 us (run #44). Both
    streams wait for the caller's stream first and the caller's waits for both after, so the timer sees the
    whole call. Controls: T = 0 (the looped kernel alone, as the dispatcher launches it) and "/looped" (the
    tail rows on the side stream as whole rows too: what the second stream costs by itself); "/bfirst" launches
    the side stream's kernel before the whole rows. PASSES (default 5); STREAM_POINTS (N:dtype,...).
    Run #48 (H100, % of the fp32 copy): nothing beats one launch. At 32K bf16 the dispatcher 92.2, T = 0 91.9,
    the best fork 91.6 (the tail as whole rows on the side stream, "/looped") and 91.0 with split programs; at 32K
    fp32 every fork loses 0.6-3.5 points, steadily. In 16-bit the forks' passes scatter from 50 to 92 (T = 0
    and the dispatcher stay within 0.6): a second stream makes the timing erratic, not shorter."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    passes = int(os.environ.get("PASSES", "5"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    high, side = torch.cuda.Stream(priority=-1), torch.cuda.Stream()
    for N, dtype in env_points("STREAM_POINTS", [(32768, torch.bfloat16), (32768, torch.float16), (16384, torch.bfloat16),
                                                 (32768, torch.float32)]):
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        M = x.shape[0]
        whole_rows = lambda lo, hi: looped_rows(ns5, x, y, w, b, mean, rstd, lo, hi)

        def forked(tail_launch, tail, prio, tail_first):
            def run():
                cur = torch.cuda.current_stream()
                main = high if prio else cur
                side.wait_stream(cur)
                if prio:
                    high.wait_stream(cur)
                order = [(side, tail_launch), (main, lambda: whole_rows(0, M - tail))]
                for stream, launch in (order if tail_first else order[::-1]):
                    with torch.cuda.stream(stream):
                        launch()
                cur.wait_stream(side)
                if prio:
                    cur.wait_stream(high)
                return y
            return run

        runs["streams/T0"] = lambda: (whole_rows(0, M), y)[1]
        for tail in (sms // 2, sms, 2 * sms):
            runs[f"streams/T{tail}/looped"] = forked(lambda tail=tail: whole_rows(M - tail, M), tail, False, False)
            for chunk in (8192, 4096):
                if chunk >= N:
                    continue
                part = torch.empty(2 * tail * triton.cdiv(N, chunk), device="cuda")
                count = torch.zeros(tail, dtype=torch.int32, device="cuda")
                launch = (lambda tail=tail, chunk=chunk, part=part, count=count:
                          split_rows(ns5, x, y, w, b, mean, rstd, M - tail, M, chunk, part, count))
                for prio in (False, True):
                    runs[f"streams/T{tail}/c{chunk}{'/prio' if prio else ''}"] = forked(launch, tail, prio, False)
                runs[f"streams/T{tail}/c{chunk}/bfirst"] = forked(launch, tail, False, True)
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()


PDL_TRIGGER = [("    y_row = Y + row * stride_y\n    ### BEGIN SOLUTION\n    n = 0.0\n",
                "    y_row = Y + row * stride_y\n    tl.extra.cuda.gdc_launch_dependents()\n    ### BEGIN SOLUTION\n"
                "    n = 0.0\n")]


def time_ln_pdl(copy):
    """Fill the drain with a programmatic dependent launch (PDL, sm_90): the dispatcher's looped kernel, edited to
    signal griddepcontrol.launch_dependents as each program starts, runs rows [0, M - T); the last T rows follow
    on the same stream as the lesson's split kernel (programs of one CHUNK, "/c<CHUNK>") launched with
    launch_pdl=True, so that its short programs may be placed as soon as every program of the first kernel has
    started: in the ~9 us drain where whole rows leave SMs idle (run #44). The two kernels touch disjoint rows, so
    the second needs no griddepcontrol.wait. Unlike "lnstreams" (run #48) the tail cannot start before the drain.
    Controls: T = 0 (the edited kernel alone), "/serial" (the same two launches without PDL) and "/looped" (the tail
    as whole rows, with PDL). PASSES (default 5); PDL_POINTS (N:dtype,...).
    Run #59 (H100, % of the fp32 copy, 3 passes): PDL works (the same two launches lose 4-6 points more without
    it), but nothing beats one launch by more than the passes' spread. 32K bf16: the dispatcher 91.8, T = 0 91.9,
    the best tail 92.2 (66 rows in pieces of 8192; its passes 91.2-92.2); 32K fp16 93.5 against 93.0-93.2; at
    16K bf16 and 32K fp32 every tail loses (0.1-4 points)."""
    passes = int(os.environ.get("PASSES", "5"))
    from autograder.notebook import load
    plain, errors = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not errors, errors
    ns5 = load_variants("05_triton_layernorm", {"pdl": PDL_TRIGGER}, "pdl")["pdl"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for N, dtype in env_points("PDL_POINTS", [(32768, torch.bfloat16), (32768, torch.float16), (16384, torch.bfloat16),
                                              (32768, torch.float32)]):
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, plain)
        M = x.shape[0]
        whole_rows = lambda lo, hi, pdl=False: looped_rows(ns5, x, y, w, b, mean, rstd, lo, hi, launch_pdl=pdl)

        def two_launches(tail, launch_tail):
            def run():
                whole_rows(0, M - tail)
                launch_tail()
                return y
            return run

        runs["pdl/T0"] = lambda: (whole_rows(0, M), y)[1]
        for tail in (sms // 2, sms, 2 * sms, 3 * sms):
            runs[f"pdl/T{tail}/looped"] = two_launches(tail, lambda tail=tail: whole_rows(M - tail, M, pdl=True))
            for chunk in (8192, 4096):
                if chunk >= N:
                    continue
                part = torch.empty(2 * tail * triton.cdiv(N, chunk), device="cuda")
                count = torch.zeros(tail, dtype=torch.int32, device="cuda")
                for pdl in (True, False):
                    launch = (lambda tail=tail, chunk=chunk, part=part, count=count, pdl=pdl:
                              split_rows(ns5, x, y, w, b, mean, rstd, M - tail, M, chunk, part, count,
                                         launch_pdl=pdl))
                    runs[f"pdl/T{tail}/c{chunk}{'' if pdl else '/serial'}"] = two_launches(tail, launch)
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()


def stagger_edit(rows, ns_step):
    """Lesson 05's looped kernel with the launch's first `rows` programs sleeping (row % 8) * ns_step ns first."""
    return [("    y_row = Y + row * stride_y\n    ### BEGIN SOLUTION\n    n = 0.0\n",
             "    y_row = Y + row * stride_y\n"
             f"    if row < {rows}:\n"
             "        tl.inline_asm_elementwise(\"nanosleep.u32 $1;\\n\\tmov.u32 $0, 0;\", \"=r,r\", "
             f"[tl.full([1], (row % 8).to(tl.int32) * {ns_step}, tl.int32)], dtype=tl.int32, is_pure=False, pack=1)\n"
             "    ### BEGIN SOLUTION\n    n = 0.0\n")]


def time_ln_stagger(copy):
    """Do the programs of a short launch wait in step? The first wave (or two) of lesson 05's looped kernel starts
    at staggered moments (program p of the first `rows` sleeps (p % 8) * step ns, PTX nanosleep), so that their
    reductions do not all fall at the same moments; next to the dispatcher. PASSES (default 3); STAGGER_POINTS.
    Run #63 (H100): inconclusive. At 32K bf16 every stagger fell to 72.3-74.2 against the dispatcher's 91.9, even the
    shortest (at most 3.5 us, once per SM), which the sleep itself cannot cost; the branch likely changed the
    kernel's registers (not recorded). At 16K bf16 94.6-96.2 against 96.0."""
    from autograder.notebook import load
    plain, errors = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not errors, errors
    passes = int(os.environ.get("PASSES", "3"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    variants = {f"stagger/r{rows}/s{step}": stagger_edit(rows, step)
                for rows in (sms, 2 * sms) for step in (500, 1000, 2000)}
    spaces = load_variants("05_triton_layernorm", variants, "stagger")
    for N, dtype in env_points("STAGGER_POINTS", [(32768, torch.bfloat16), (16384, torch.bfloat16)]):
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, plain)
        for name, ns in spaces.items():
            runs[name] = (lambda ns=ns: ns["layernorm"](x, w, b, bench_ln.EPS)[0])
        best_of_two("ln", runs, x, w, b, copy, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()


def time_ln_bound(copy):
    """ln_bound.py's probes: kernels with LayerNorm's bytes and less and less of its work (see there), one program per
    row, by warps (and the packed LayerNorm by maxnreg caps), next to the dispatcher, torch.compile and a torch copy
    of the same dtype and bytes. The probes that claim to be LayerNorms are checked as the benchmark checks;
    times are helpers.bench.timing_passes (the benchmark's rule); each row carries the kernel's registers and
    spills. BOUND_POINTS (N:dtype,...)."""
    from autograder.notebook import load
    from ln_bound import IS_LAYERNORM, KINDS, ln_bound
    ns5, errors = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not errors, errors
    for N, dtype in env_points("BOUND_POINTS", [(32768, torch.bfloat16), (16384, torch.bfloat16)]):
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        src, dst = x.reshape(-1), torch.empty_like(x).reshape(-1)
        runs["torch copy (same dtype)"] = lambda: dst.copy_(src)
        probes = [(kind, warps, None) for kind in KINDS for warps in (8, 16, 32)]
        if dtype != torch.float32:
            probes += [("layernorm/packed", warps, cap) for warps in (16, 32) for cap in (None, 32, 40)]
        regs = {}
        for kind, warps, cap in probes:
            name = f"{kind}/w{warps}" + (f"/r{cap}" if cap else "")
            runs[name] = (lambda kind=kind, warps=warps, cap=cap:
                          ln_bound(kind, x, w, b, y, mean, rstd, bench_ln.EPS, warps, maxnreg=cap))
            kernel = runs[name]()
            regs[name] = {"regs": kernel.n_regs, "spills": kernel.n_spills}
            if kind in IS_LAYERNORM:
                ok, msg = bench_ln.check(y, (x, w, b))
                if not ok:
                    emit(op="ln", impl=name, dtype=str(dtype)[6:], N=N, wrong=msg[:400])
                    del runs[name]
        n_bytes = bench_ln.n_bytes(*x.shape, (x, w, b))
        pct = lambda ms: round(100 * n_bytes / ms * 1e-6 / copy, 1)
        for name, ms in sorted(hb.timing_passes(runs).items(), key=lambda kv: min(kv[1])):
            emit(op="ln", impl=name, dtype=str(dtype)[6:], N=N, pct=pct(min(ms)), passes=[pct(t) for t in ms],
                 **regs.get(name, {}))
        del x, w, b, y, src, dst
        torch.cuda.empty_cache()


def pair_numerics(name, fn, extra=()):
    """Grade fn(x, w, b, y, mean, rstd) on rows that break shifted sums or a float32 mean (the hidden cases'
    kinds at the long rows, and the Specs in extra): emit, per kind, whether y, mean and rstd are within the
    course's tolerances."""
    from autograder.rowcases import LAYERNORM, Spec, make_inputs
    from helpers.compare import compare_outputs
    kinds = [Spec("|x|~300", (8, 32768), torch.float16, scale=300.0, eps=1e-5, seed=70),
             Spec("|x|~300", (8, 32768), torch.bfloat16, scale=300.0, eps=1e-5, seed=71),
             Spec("mean 1e4", (8, 32768), torch.bfloat16, offset=1e4, eps=1e-5, atol=1e-2, stat_rtol=5e-5, seed=72),
             Spec("x[0] = 10, rest ~0.01", (8, 32768), torch.float16, scale=0.01, spike_every=32768, spike=10.0,
                  eps=1e-5, seed=73),
             Spec("x[0] = 1000", (8, 32768), torch.float16, spike_every=32768, spike=1000.0, eps=1e-5, seed=74),
             Spec("randn", (8, 32768), torch.bfloat16, eps=1e-5, seed=75), *extra]
    for s in kinds:
        x, w, b = make_inputs(s, LAYERNORM)
        M = x.shape[0]
        out = (torch.empty_like(x), torch.empty(M, device="cuda"), torch.empty(M, device="cuda"))
        fn(x, w, b, *out)
        torch.cuda.synchronize()
        results = compare_outputs("layernorm", [o.cpu() for o in out],
                                  LAYERNORM.ref(x.cpu(), w.cpu(), b.cpu(), s.eps), s.dtype,
                                  atol=s.atol, stat_rtol=s.stat_rtol)
        bad = [r.message[:160] for r in results if not r]
        emit(numerics=name, rows=s.name, dtype=str(s.dtype)[6:], ok=not bad, **({"failed": bad} if bad else {}))


def time_ln_pair(copy):
    """Long 16-bit rows with one statistics reduction before y (ln_pair.py): the row as one chunk, sums of x - x[0]
    and of its square ("g": with the guard that sums again around the mean when the shift cancelled more than 4
    bits; "r": the stored mean and rstd summed again exactly during the second read), 16 or 32 warps, next to the
    dispatcher (two chunks of 16K, two dependent reductions) and torch.compile; first each configuration's
    numerics on the rows that break shifted sums (pair_numerics). PASSES (default 5); PAIR_POINTS (N:dtype,...).
    Run #49 (H100, % of the fp32 copy): at 32K bf16 / fp16 the plain pair with 32 warps 94.2 / 95.3 and with the
    guard 93.0 / 94.7, against the dispatcher's 92.0 / 92.8; the exact re-sum during the second read costs 5-6
    points (88.2-88.3 bf16). None of them keeps the stored mean within its tolerance on |x|~300 rows (errors
    8e-6 to 5e-5 where the tolerance is about 1e-6; the dispatcher passes): the shifted sum t1 = sum(x - k) carries
    N (mean - k), a large number whose rounding lands in k + t1/N, and the re-sum of x - mean rounds every x the
    same way within a binade (mean is a full-precision float32). Without the guard, rows starting with an outlier
    fail y. At 16K bf16 the pair ties the dispatcher (96.1 against 96.3); at 64K bf16 (one 128 KB chunk) the guarded pair with
    32 warps 87.1 against 86.5, every other configuration 26-70."""
    from autograder.notebook import load
    from ln_pair import ln_pair
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    passes = int(os.environ.get("PASSES", "5"))
    configs = [(g, r, wp) for g in (False, True) for r in (False, True) for wp in (16, 32)]
    name = lambda g, r, wp: f"pair{'/g' if g else ''}{'/r' if r else ''}/w{wp}"
    for g, r, wp in configs:
        pair_numerics(name(g, r, wp), lambda x, w, b, y, mean, rstd, g=g, r=r, wp=wp:
                      ln_pair(x, w, b, y, mean, rstd, 1e-5, guard=g, refine=r, warps=wp))
    pair_numerics("dispatch", lambda x, w, b, y, mean, rstd: [t.copy_(o) for t, o in
                                                                zip((y, mean, rstd), ns5["layernorm"](x, w, b, 1e-5))])
    for N, dtype in env_points("PAIR_POINTS", [(32768, torch.bfloat16), (32768, torch.float16), (16384, torch.bfloat16),
                                               (65536, torch.bfloat16)]):
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        for g, r, wp in configs:
            runs[name(g, r, wp)] = (lambda g=g, r=r, wp=wp:
                                    ln_pair(x, w, b, y, mean, rstd, bench_ln.EPS, guard=g, refine=r, warps=wp))
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()


def time_ln_static(copy):
    """Is the drain a matter of scheduling? ln_static.py: a persistent grid of P programs, each with exactly
    M / P rows (contiguous, or interleaved "/il"), at row counts that divide evenly: P = 2 x SMs capped at 32
    registers ("/r32", two programs per SM) or P = SMs (one per SM), next to the dispatcher at the same M. The %
    is of a copy of the same bytes timed before each point (as stage "lnwaves"). If the SMs stream at one speed
    the static grid ends without a drain. PASSES (default 5); STATIC_POINTS (N:dtype:M,...; M must divide by P).
    Run #50 (H100, % of the same-bytes copy): far from it. 32K bf16 at M = 2112 / 1848: the dispatcher 95.0 / 95.1,
    the best static grid (264 interleaved programs, /r32) 87.4 / 87.7, the others 77-79; 32K fp32 at 2112: 98.7
    against 89.5 (/r32 spills: 24); 16K bf16 at 4224: 99.2 against 93.7. Launching a program per row (the
    hardware places each on the first free slot) is worth 5-8 points over any fixed assignment here, so a
    Stream-K split (equal shares of M x N per program) starts that far behind."""
    from autograder.notebook import load
    from ln_static import ln_static
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    passes = int(os.environ.get("PASSES", "5"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for N, dtype, M in env_points("STATIC_POINTS", [(32768, torch.bfloat16, 16 * sms), (32768, torch.bfloat16, 14 * sms),
                                                    (32768, torch.float32, 16 * sms), (16384, torch.bfloat16, 32 * sms)],
                                  rows=True):
        x, w, b = inputs(M, N, dtype)
        y = torch.empty_like(x)
        mean, rstd = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
        same = hb.copy_gbs(M * N, str(dtype)[6:])
        emit(case="lnstatic", N=N, dtype=str(dtype)[6:], M=M, copy_gbs=round(same, 1))
        elt = x.element_size()
        block = triton.next_power_of_2(N) // (2 if elt == 2 and N * elt > 32768 else 1)   # the dispatcher's chunk
        runs = {"dispatch": lambda: ns5["layernorm"](x, w, b, bench_ln.EPS)[0]}
        for programs, cap in ((2 * sms, 32), (sms, None)):
            for il in (False, True):
                runs[f"static/P{programs}{'/il' if il else ''}{f'/r{cap}' if cap else ''}"] = (
                    lambda programs=programs, cap=cap, il=il:
                    ln_static(x, w, b, y, mean, rstd, bench_ln.EPS, programs, block, 32, interleave=il, maxnreg=cap))
        best_of_two("ln", runs, x, w, b, same, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()


# (rows, warps, y pieces, maxnreg) of ln_groups_rows: at 32K bf16 (sm_90, regs_sm90) w32 p16 takes 43 registers
# (one program per SM), 32 with 8 bytes of spills when capped; w32 p8 52, 40 capped without spills; w16 p16 59
ROWS_FORMS = [(2, 32, 8, None), (2, 32, 16, None), (2, 32, 16, 32), (2, 32, 8, 40), (2, 32, 16, 40), (2, 16, 16, None),
              (2, 16, 8, None), (4, 32, 16, None)]


def time_ln_groups(copy):
    """Long rows with ONE cross-thread reduction that keeps two-pass accuracy (ln_groups.py): each thread's
    16-byte groups get exact two-pass statistics in registers, one tuple tl.reduce merges them with Chan's rule
    (M2, around the first group's mean), the mean is the plain sum of x ("/two": a tl.sum beside the tuple
    reduce; "/one": the sum carried in the tuple, which the CPU interpreter adds sequentially and so misses y's
    tolerance at mean 1e4 there), y in P pieces; next to the dispatcher and torch.compile, after the numerics
    on the rows that broke the shifted sums; "/a": y's pieces loaded one piece ahead. PASSES (default 5);
    GROUPS_POINTS (N:dtype,...); GROUPS_AHEAD ("0,1": both; "1": only /a); GROUPS_PROBE=1: also w = 1 and b = 0,
    loaded or not ("probe/b", "probe/wb"), to see what their reads from L2 cost; GROUPS_CACHE=1: "/x.cg" x's loads
    in L2 only, "/wb.ca" weight and bias cached in L1 (no eviction hints with either), "/r32" maxnreg=32;
    GROUPS_PAIR=1: "rows2", two rows per program (ln_groups_pair), y in 8 or 16 pieces; GROUPS_ROWS=1: "rowsR<R>",
    R rows side by side per program (ln_groups_rows, the forms of ROWS_FORMS); GROUPS_L1=1: the kernel's
    shared-memory carveout ("/c0": most L1, "/c100": most shared memory, "/c-": the driver's) with and without the
    evict_last hints on x's first load and on the weight and bias.
    Runs #51-#58 (H100, % of the fp32 copy; every form passes the numerics). y in pieces one after the other:
    no gain (32K bf16 91.6-92.0 against the dispatcher's 92.0-92.3; ln_pair's plain pair 94.5 in #52). "/a":
    two/a 92.3-92.8 at 32K bf16, 93.1 in fp16, 86.8-87.4 at 64K bf16 (dispatcher 85.6-86.0); one/a 92.7-93.0,
    93.5-93.6, 87.5-87.8; behind at 16K bf16.
    Probe: without loading b 95.3 at 32K bf16, without w and b 96.2 (92.5-92.9 loaded). Cache modifiers, two
    rows per program (one after the other, run #56, or side by side, run #58: 72-88 at 32K bf16) and the carveout
    (run #57) do not recover it (ln_groups.py has the numbers)."""
    from autograder.notebook import load
    from autograder.rowcases import Spec
    from ln_groups import ln_groups, ln_groups_pair, ln_groups_rows
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    passes = int(os.environ.get("PASSES", "5"))
    if os.environ.get("GROUPS_ROWS"):
        for r, warps, pieces, cap in ROWS_FORMS:
            pair_numerics(f"rowsR{r}/p{pieces}/w{warps}{f'/r{cap}' if cap else ''}",
                          lambda x, w, b, y, mean, rstd, r=r, warps=warps, pieces=pieces, cap=cap:
                          ln_groups_rows(x, w, b, y, mean, rstd, 1e-5, rows=r, y_pieces=pieces, warps=warps,
                                         maxnreg=cap))
    if os.environ.get("GROUPS_PAIR"):
        for pieces in (8, 16):
            pair_numerics(f"rows2/p{pieces}", lambda x, w, b, y, mean, rstd, pieces=pieces:
                          ln_groups_pair(x, w, b, y, mean, rstd, 1e-5, y_pieces=pieces))
    extra = [Spec("mean 1e4", (8, 16384), torch.float32, offset=1e4, eps=1e-5, atol=1e-2, stat_rtol=5e-5, seed=77),
             Spec("|x|~300", (8, 65536), torch.bfloat16, scale=300.0, eps=1e-5, seed=78),
             Spec("N=24577 fp16, |x|~300", (8, 24577), torch.float16, scale=300.0, eps=1e-5, seed=79)]
    ahead = os.environ.get("GROUPS_AHEAD", "0,1")   # "/a": y's pieces loaded one ahead (ln_groups._normalise_row_ahead)
    aheads = [a == "1" for a in ahead.split(",")]
    focused = any(os.environ.get(v) for v in ("GROUPS_CACHE", "GROUPS_PAIR", "GROUPS_L1", "GROUPS_ROWS"))   # base runs: 4 pieces
    for one in (False, True):
        for a in aheads:
            pair_numerics(f"groups/{'one' if one else 'two'}{'/a' if a else ''}",
                          lambda x, w, b, y, mean, rstd, one=one, a=a:
                          ln_groups(x, w, b, y, mean, rstd, 1e-5, y_pieces=4, one_reduce=one, ahead=a), extra)
    for N, dtype in env_points("GROUPS_POINTS", [(32768, torch.bfloat16), (32768, torch.float16), (16384, torch.bfloat16),
                                                 (8192, torch.bfloat16), (65536, torch.bfloat16), (32768, torch.float32),
                                                 (16384, torch.float32)]):
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        for one in (False, True):
            for a in aheads:
                for pieces in (4,) if focused else (2, 4, 8) if a else (1, 2, 4):
                    for warps in (16, 32):
                        runs[f"groups/{'one' if one else 'two'}{'/a' if a else ''}/p{pieces}/w{warps}"] = (
                            lambda one=one, a=a, pieces=pieces, warps=warps:
                            ln_groups(x, w, b, y, mean, rstd, bench_ln.EPS, y_pieces=pieces, one_reduce=one, ahead=a,
                                      warps=warps))
        if os.environ.get("GROUPS_L1"):   # can the weight and bias stay in L1? carveout x eviction hints
            for carve in (None, 0, 100):
                for xh in ("evict_last", ""):
                    for wh in ("evict_last", ""):
                        runs[f"groups/two/a/p4/w32/c{'-' if carve is None else carve}/x{xh or '-'}/wb{wh or '-'}"] = (
                            lambda carve=carve, xh=xh, wh=wh:
                            ln_groups(x, w, b, y, mean, rstd, bench_ln.EPS, y_pieces=4, ahead=True, x_hint=xh,
                                      wb_hint=wh, carveout=carve))
        if os.environ.get("GROUPS_PAIR"):   # two rows per program: the weight and bias read once per piece for both
            for pieces in (8, 16):
                for cap in (None, 32):
                    runs[f"rows2/one/p{pieces}/w32{f'/r{cap}' if cap else ''}"] = (
                        lambda pieces=pieces, cap=cap:
                        ln_groups_pair(x, w, b, y, mean, rstd, bench_ln.EPS, y_pieces=pieces, maxnreg=cap))
        if os.environ.get("GROUPS_ROWS"):   # R rows side by side per program: w and b loaded once per piece for all R
            for r, warps, pieces, cap in ROWS_FORMS:
                runs[f"rowsR{r}/p{pieces}/w{warps}{f'/r{cap}' if cap else ''}"] = (
                    lambda r=r, warps=warps, pieces=pieces, cap=cap:
                    ln_groups_rows(x, w, b, y, mean, rstd, bench_ln.EPS, rows=r, y_pieces=pieces, warps=warps,
                                   maxnreg=cap))
        if os.environ.get("GROUPS_CACHE"):   # x through L2 only (.cg), weight and bias kept in L1 (.ca), capped or not
            for xc in ("", ".cg"):
                for wc in ("", ".ca"):
                    for cap in (None, 32):
                        if xc or wc or cap:
                            runs[f"groups/one/a/p4/w32/x{xc or '-'}/wb{wc or '-'}{f'/r{cap}' if cap else ''}"] = (
                                lambda xc=xc, wc=wc, cap=cap:
                                ln_groups(x, w, b, y, mean, rstd, bench_ln.EPS, y_pieces=4, one_reduce=True, ahead=True,
                                          x_cache=xc, wb_cache=wc, maxnreg=cap))
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        if os.environ.get("GROUPS_PROBE"):   # what the weight's and bias's L2 reads cost: w = 1, b = 0, loaded or not
            w1, b0 = torch.ones_like(w), torch.zeros_like(b)
            probe = {f"probe/{skip or 'loaded'}/p{pieces}/w32": (
                lambda skip=skip, pieces=pieces: ln_groups(x, w1, b0, y, mean, rstd, bench_ln.EPS, y_pieces=pieces,
                                                           one_reduce=True, ahead=True, skip=skip))
                for skip in ("", "b", "wb") for pieces in (4, 8)}
            best_of_two("ln", probe, x, w1, b0, copy, reset=y.zero_, passes=passes)
        del x, w, b, y
        torch.cuda.empty_cache()


def cuda_cluster_lib():
    """ln_cluster.cu built with nvcc for sm_90a (into a temporary folder) and loaded with ctypes."""
    import ctypes
    import subprocess
    import tempfile
    so = Path(tempfile.mkdtemp()) / "ln_cluster.so"
    subprocess.run(["nvcc", "-O3", "-std=c++17", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC", "-o", str(so),
                    str(Path(__file__).with_name("ln_cluster.cu"))], check=True)
    lib = ctypes.CDLL(str(so))
    i, p, i64 = ctypes.c_int, ctypes.c_void_p, ctypes.c_int64
    lib.ln_cluster.argtypes = [i] * 5 + [p] * 6 + [i64] * 4 + [ctypes.c_float, p]
    lib.ln_cluster_registers.argtypes = [i] * 4
    lib.copy16.argtypes = [p, p, i64, i, p]
    return lib


CUDA_DTYPES = {torch.float32: 0, torch.bfloat16: 1}
CUDA_CS, CUDA_WB_EARLY, CUDA_PLAIN = 1, 2, 4   # ln_cluster's flags
CUDA_FLAGS = (0, CUDA_CS, CUDA_CS | CUDA_WB_EARLY)
CUDA_SHAPES = [(128, 4), (128, 8), (256, 2), (256, 4), (256, 8), (512, 2), (512, 4), (1024, 2), (1024, 4)]


def time_cuda_cluster(copy):
    """What does the hardware give a LayerNorm at the bench's long rows when nothing of Triton stands in the way?
    ln_cluster.cu: a cluster of C CTAs per row (C = 1: a block per row) holding the row in registers, 16-byte
    loads, the two-pass statistics exchanged through distributed shared memory; every (C, threads, items) that
    tiles the row exactly, with and without streaming hints ("/cs"), with weight and bias loaded before the
    statistics ("/wb-early"), and for C = 1 also launched without the cluster attribute ("/plain"), next to the
    lesson's dispatcher and torch.compile. Each point also times a copy of the same bytes by torch and by the
    file's 16-byte copy kernel (a "case" row, GB/s). PASSES (default 3); CUDA_POINTS (N:dtype,...) replaces the points; CUDA_ONLY keeps
    the configurations whose name contains it.
    Runs #42-#43 (H100, % of the fp32 copy): no configuration comes near the Triton dispatcher. At 32K bf16 the best
    cluster (C = 4, 128 threads, 8 vectors each, /cs) 75.8 and the best block per row (/plain) 81.2, against
    92.2; at 8K bf16 92.7 against 97.2; at 32K fp32 84.0 against 97.6. The cluster attribute alone costs a
    C = 1 launch 17 points at 32K bf16 (63.8 against 81.2 /plain) and 10 at 8K (83.2 against 92.7): on this
    GPU a cluster launch places CTAs more slowly. The 16-byte copy kernel: 2793-2811 GB/s where torch's copy of
    the same bytes has 2853-2867."""
    from autograder.notebook import load
    ns5, e5 = load(ROOT / "solutions" / "05_triton_layernorm.ipynb")
    assert not e5, e5
    lib = cuda_cluster_lib()
    torch._dynamo.config.cache_size_limit = 64
    passes = int(os.environ.get("PASSES", "3"))
    points = env_points("CUDA_POINTS", [(32768, torch.bfloat16), (16384, torch.bfloat16), (65536, torch.bfloat16),
                                        (32768, torch.float32), (8192, torch.bfloat16)])
    for N, dtype in points:
        x, w, b, y, mean, rstd, runs = ln_point(N, dtype, ns5)
        M, code, E = x.shape[0], CUDA_DTYPES[dtype], 16 // x.element_size()
        src = x.view(-1)
        dst = torch.empty_like(src)
        same = hb.copy_gbs(M * N, str(dtype)[6:])
        ms = min(hb.time_ms(lambda it=it: lib.copy16(src.data_ptr(), dst.data_ptr(), src.numel() * src.element_size(),
                                                      it, ctypes_stream())) for it in (1, 2, 4, 8))
        assert torch.equal(dst, src)
        emit(case="cudaln", N=N, dtype=str(dtype)[6:], M=M, copy_gbs=round(same, 1),
             copy16_gbs=round(2 * src.numel() * src.element_size() / ms * 1e-6, 1))
        _, ref_mean, ref_rstd = layernorm_ref(x, eps=bench_ln.EPS)   # best_of_two checks y; the statistics here
        for C in (1, 2, 4, 8):
            for threads, items in CUDA_SHAPES:
                if C * threads * items * E != N:
                    continue
                for flags in CUDA_FLAGS + ((CUDA_PLAIN | CUDA_CS, CUDA_PLAIN | CUDA_CS | CUDA_WB_EARLY) if C == 1 else ()):
                    name = (f"cuda/c{C}/t{threads}/i{items}{'/cs' if flags & CUDA_CS else ''}"
                            f"{'/wb-early' if flags & CUDA_WB_EARLY else ''}{'/plain' if flags & CUDA_PLAIN else ''}")
                    if os.environ.get("CUDA_ONLY") and os.environ["CUDA_ONLY"] not in name:
                        continue

                    def run(C=C, threads=threads, items=items, flags=flags):
                        err = lib.ln_cluster(code, C, threads, items, flags, x.data_ptr(), y.data_ptr(), w.data_ptr(),
                                             b.data_ptr(), mean.data_ptr(), rstd.data_ptr(), M, N, N, N,
                                             bench_ln.EPS, ctypes_stream())
                        if err:
                            raise RuntimeError(f"ln_cluster returned {err}")
                        return y
                    run()
                    if not (torch.allclose(mean.double(), ref_mean, atol=1e-4, rtol=1e-4)
                            and torch.allclose(rstd.double(), ref_rstd, atol=1e-3, rtol=1e-3)):
                        emit(impl=name, N=N, wrong="mean or rstd")
                        continue
                    runs[name] = run
                    emit(kernel=name, N=N, dtype=str(dtype)[6:], regs=lib.ln_cluster_registers(code, threads, items, flags))
        best_of_two("ln", runs, x, w, b, copy, reset=y.zero_, passes=passes)
        del x, w, b, y, src, dst
        torch.cuda.empty_cache()


def ctypes_stream():
    """The current CUDA stream as the integer handle a ctypes call takes."""
    return torch.cuda.current_stream().cuda_stream


def main():
    stages = {"cluster": time_cluster, "split": time_split, "ln64": time_ln_one_chunk,
              "lnchunk": time_ln_chunks, "small": time_small, "hints": time_hints,
              "lnstats": time_ln_stats, "lnguard": time_ln_guard,
              "lnvariants": time_ln_variants, "pipe": time_pipelined,
              "prefetch": time_prefetch, "peers": time_peers,
              "rmsvariants": time_rms_variants,
              "tiles": time_tiles, "ladder": time_ladder, "params": time_params,
              "rowwarps": time_row_warps, "lnwarps": time_ln_warps, "lnrows": time_ln_rows,
              "lnpersist": time_ln_persist, "lnshort": time_ln_short,
              "lntile": time_ln_tile, "rmsshort": time_rms_short, "lnregs": time_ln_regs,
              "lnpipe": time_ln_pipe, "lntma": time_ln_tma,
              "rowladder": time_row_ladder, "lnnostats": time_ln_no_stats,
              "lnsize": time_ln_size, "cudaln": time_cuda_cluster,
              "lnwaves": time_ln_waves, "lntail": time_ln_tail,
              "lnstreams": time_ln_streams, "lnpdl": time_ln_pdl, "lnstagger": time_ln_stagger, "lnbound": time_ln_bound, "lnpair": time_ln_pair,
              "lnstatic": time_ln_static, "lngroups": time_ln_groups,
              "statsfirst": time_stats_first, "rmsconfigs": time_rms_configs}
    stage = sys.argv[1] if len(sys.argv) > 1 else "all"
    if stage != "all" and stage not in stages:
        raise SystemExit(f"unknown stage {stage!r}: one of {', '.join(stages)} or all")
    copy = hb.copy_gbs()
    emit(device=torch.cuda.get_device_name(), copy_gbs=round(copy, 1), triton=triton.__version__)
    for name, run in stages.items():
        if stage in ("all", name):
            run(copy)


if __name__ == "__main__":
    main()
