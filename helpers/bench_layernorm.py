"""The LayerNorm forward benchmark of lesson 05, shared by the notebook cell and `make bench`.

Peers: torch.nn.functional.layer_norm, torch.compile of the PyTorch composite, and Liger's Triton
LayerNorm where it is installed.
"""
from __future__ import annotations

from typing import Callable

import torch

from . import bench
from .compare import compare, tolerance_for
from .reference import layernorm_ref

LESSON, OP = "05_triton_layernorm", "layernorm_fwd"
EPS = 1e-5
BYTE_MODEL = "2*M*N*sizeof(x) + 2*N*sizeof(w)"   # n_bytes below


def composite(x, w, b, eps=EPS):
    """Unfused: mean, centre, square, mean, rsqrt, scale, shift, each op a pass over HBM."""
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    xc = xf - mean
    return (xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + eps) * w.float() + b.float()).to(x.dtype)


def peers() -> dict[str, Callable]:
    bench.lift_recompile_limit()
    out = {
        "F.layer_norm": lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, EPS),
        "torch.compile": torch.compile(composite, dynamic=False),
    }
    try:
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction

        out["Liger"] = lambda x, w, b: LigerLayerNormFunction.apply(x, w, b, EPS)
    except Exception:  # Liger is optional: benchmarked where installed
        pass
    return out


def make_inputs(M, N, dtype):
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    w = (torch.randn(N, device="cuda") * 0.5 + 1).to(dtype)
    b = (torch.randn(N, device="cuda") * 0.5).to(dtype)
    return x, w, b


def n_bytes(M, N, args):
    x, w, _ = args
    return 2 * M * N * x.element_size() + 2 * N * w.element_size()


def check(out, args, rows: int = 64):
    y = out[0] if isinstance(out, tuple) else out
    x, w, b = args
    ref, _, _ = layernorm_ref(x[:rows], w, b, EPS)
    r = compare(y[:rows], ref, tolerance_for("layernorm", x.dtype), dtype=x.dtype)
    return r.ok, r.message


def run(impls: dict[str, Callable], *, with_peers: bool = True, Ns=bench.DEFAULT_NS,
        dtypes=bench.DEFAULT_DTYPES, plot: bool = True, progress: bool = True) -> dict:
    """Sweep the given implementations (fn(x, w, b, eps) -> y or (y, mean, rstd)) and the peers."""
    fns = {name: (lambda f: (lambda x, w, b: f(x, w, b, EPS)))(f) for name, f in impls.items()}
    if with_peers:
        fns.update(peers())
    return bench.run_and_plot(fns, lesson=LESSON, op=OP, make_inputs=make_inputs, n_bytes=n_bytes, check=check,
                              byte_model=BYTE_MODEL, Ns=Ns, dtypes=dtypes, plot_it=plot,
                              progress=progress)


def show_recorded():
    return bench.show_recorded(LESSON, OP)


# ----------------------------------------------------------------------------- autotuning, and what it costs
# Section 5 of lesson 05: the tile kernel of exercise 1 under triton.autotune, against the dispatcher's table.
AUTOTUNE_OP = "layernorm_autotune"
TUNE_ROWS = (1, 2, 4, 8, 16)         # rows per program (BLOCK_M)
TUNE_WARPS = (1, 2, 4, 8, 16)
TUNE_MAX_TILE = 16384                # elements of a [BLOCK_M, BLOCK_N] tile; larger tiles spill (section 2)
TUNE_NS = (512, 1024, 2048, 4096)    # the short rows, where the table's choice matters most
TUNE_DTYPES = ("bfloat16", "float32")
TUNED, TABLE = "tile, autotuned", "dispatcher (its table)"   # the table of this GPU (lesson 05, section 4)


def _fits(block_m: int, block_n: int) -> bool:
    return block_m * block_n <= TUNE_MAX_TILE


def tune_configs(block_n: int = 1) -> list:
    """The configurations autotuning tries for rows of BLOCK_N columns: every rows x warps pair whose tile fits."""
    import triton

    return [triton.Config({"BLOCK_M": r}, num_warps=w) for r in TUNE_ROWS for w in TUNE_WARPS if _fits(r, block_n)]


def autotuned_tile(kernel):
    """Exercise 1's kernel (its given signature) under triton.autotune, keyed on N (Triton adds the dtypes of the
    tensor arguments to the key). Returns launch(x, w, b, eps) -> (y, mean, rstd) for 2-D contiguous x, and a log
    {(N, dtype name): (seconds the first call took, the chosen triton.Config, the configs it timed)}."""
    import time

    import triton

    def fitting(configs, named_args, **kwargs):          # tune_configs(BLOCK_N), from the tuner's own list
        fit = [c for c in configs if _fits(c.kwargs["BLOCK_M"], kwargs["BLOCK_N"])]
        if not fit:
            raise ValueError(f"rows of {kwargs['BLOCK_N']} columns do not fit a tile of {TUNE_MAX_TILE} elements: "
                             "autotuning here is for the short rows of the tile kernel")
        return fit

    # The key is N (and the dtypes); HAS_WEIGHT / HAS_BIAS are not in it, so a config tuned with both is reused
    # without them: the same loads of x, at most two fewer vectors to read.
    tuned = triton.autotune(configs=tune_configs(), key=["N"], prune_configs_by={"early_config_prune": fitting})(kernel)
    log: dict = {}

    def launch(x, w, b, eps=EPS):
        if x.ndim != 2 or x.stride(-1) != 1:
            raise ValueError(f"launch takes 2-D x with a contiguous last dim, got shape {tuple(x.shape)}")
        M, N = x.shape
        y = torch.empty_like(x)
        mean = torch.empty(M, device=x.device, dtype=torch.float32)
        rstd = torch.empty(M, device=x.device, dtype=torch.float32)
        key = (N, str(x.dtype).removeprefix("torch."))
        first = key not in log
        if first:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        block_n = triton.next_power_of_2(N)
        tuned[lambda meta: (triton.cdiv(M, meta["BLOCK_M"]),)](
            x, y, x if w is None else w, x if b is None else b, mean, rstd, M, N, x.stride(0), y.stride(0), eps,
            BLOCK_N=block_n, HAS_WEIGHT=w is not None, HAS_BIAS=b is not None)
        if first:
            torch.cuda.synchronize()
            log[key] = (time.perf_counter() - t0, tuned.best_config, list(tuned.configs_timings))
        return y, mean, rstd

    return launch, log


def autotune_demo(kernel, dispatcher, *, Ns=TUNE_NS, dtypes=TUNE_DTYPES, progress: bool = True) -> dict:
    """Autotune exercise 1's tile kernel for each N and dtype, then time it against `dispatcher` (fn(x, w, b, eps))
    with the benchmark's protocol; print what tuning cost, what it chose and how fast each is."""
    launch, log = autotuned_tile(kernel)
    impls = {TABLE: lambda x, w, b: dispatcher(x, w, b, EPS), TUNED: lambda x, w, b: launch(x, w, b, EPS)}
    res = bench.run_and_plot(impls, lesson=LESSON, op=AUTOTUNE_OP, make_inputs=make_inputs, n_bytes=n_bytes,
                             check=check, byte_model=BYTE_MODEL, Ns=Ns, dtypes=dtypes, plot_it=False,
                             progress=progress)
    for row in res["rows"]:
        if row["impl"] == TUNED:
            secs, cfg, tried = log[(row["N"], row["dtype"])]
            rows = cfg.kwargs["BLOCK_M"]
            row.update(tune_s=round(secs, 2), configs_tried=len(tried),
                       config=f"{rows} row{'s' if rows > 1 else ''}, {cfg.num_warps} warps")
    print_autotune(res)
    return res


def print_autotune(res: dict) -> None:
    """One line per (dtype, N): the table's and the autotuned kernel's % of copy, the choice, what tuning took."""
    by = {(r["dtype"], r["N"], r["impl"]): r for r in res["rows"]}
    copy = res["rows"][0]["copy_gbs"] if res["rows"] else res["copy_gbs"]
    print(f"{res['device']}, % of the copy roofline ({copy:.0f} GB/s); tuning = the first call for a new N")
    print(f"{'dtype':9} {'N':>6} {'table':>6} {'tuned':>6}  {'chosen':18} {'tuning':>8}")
    for dt, N in sorted({(r["dtype"], r["N"]) for r in res["rows"]}, key=lambda k: (k[0], k[1])):
        table, tuned = by.get((dt, N, TABLE)), by.get((dt, N, TUNED))
        if not (table and tuned):
            continue
        print(f"{dt:9} {N:>6} {table['pct_copy']:>6.1f} {tuned['pct_copy']:>6.1f}  {tuned['config']:18} "
              f"{tuned['tune_s']:>6.1f} s  ({tuned['configs_tried']} configs)")


def show_recorded_autotune():
    """The CPU path of the autotuning cell: the tables recorded on GPUs."""
    found = bench.load_recorded(LESSON, AUTOTUNE_OP)
    if not found:
        print(f"No recorded autotuning results in {bench.RESULTS_DIR}.")
    for res in found:
        print_autotune(res)
        print()
    return found


def extra_runs(ns: dict, progress: bool = True) -> list[dict]:
    """`make bench`'s further measurements for lesson 05, from the loaded solution notebook `ns`."""
    return [autotune_demo(ns["_layernorm_fwd_kernel"], ns["layernorm"], progress=progress)]
