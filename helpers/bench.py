"""Benchmark harness and roofline plots (DESIGN section 5).

Bytes are the compulsory traffic (each input read once, each output written once). Time is `time_ms`: the
median of up to MAX_RUNS runs, L2 flushed before each (`triton.testing.do_bench`'s protocol), with the GPU held
HOLD_US after each flush so that a slow host is not timed (with do_bench itself, 100 us of extra host time per call
took our LayerNorm dispatcher at N = 4096 in bf16 on an H200 from 93 to 41-47 %; held, 93.8-93.9 with any hold of
50-1000 us; with no extra host time, holding moved the peers' points by -1.2 to +0.6). It is taken in REPEATS passes over all the
implementations of one (dtype, N), interleaved; each point keeps its fastest pass, so that a few
seconds of interference (seen on a lent H100: every kernel timed in one stretch at a third of its
speed) cannot stand in for a kernel's speed. A point whose two fastest passes differ by more than AGREE
is timed again, up to MAX_REPEATS passes (`timing_passes`): in a lesson 05 record of two passes, 19 of 208
points disagreed by 3-49 %, and some kept a disturbed time from both (a launch timed at 62.7 % where the same
launch under another name had 96.6). The roofline is a device-to-device copy measured in the
same process with the same timer and the same rule; every point is labelled with its % of it. One copy is
timed per dtype at the sweep's M*N elements, at its start and again at its end (the faster kept); the roofline is the fastest of them (fp32's, the most bytes),
and each row also records the copy of its own dtype, which moves the same bytes as the kernel
(`copy_gbs_dtype`, `pct_copy_dtype`): a 16-bit copy moves half the bytes and runs a few % slower (on an
H100, 2853-2865 against 2941-2951 GB/s at 64 Mi elements), so 16-bit kernels read a few % lower against the roofline.
Every implementation's output is checked against the float64 reference once before it is timed.
On a machine without a GPU, `benchmark_or_recorded` shows the recorded results instead.
"""
from __future__ import annotations

import functools
import json
import re
import statistics
from pathlib import Path
from typing import Callable

import torch

RESULTS_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
DEFAULT_NS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
DEFAULT_DTYPES = ("bfloat16", "float16", "float32")
TOTAL_ELEMENTS = 64 * 1024 * 1024
REPEATS = 2       # interleaved timing passes per (dtype, N); each point keeps its fastest
AGREE = 0.02      # ... once its two fastest passes agree within 2 %:
MAX_REPEATS = 6   # until then it is timed again, up to this many passes
# Datasheet HBM bandwidth in GB/s, matched against the device name (a second, dotted line).
DATASHEET_GBS = {"H200": 4800.0, "H100 80GB HBM3": 3350.0, "H100 NVL": 3900.0, "H100 PCIe": 2000.0,
                 "A100-SXM4-80GB": 2039.0, "A100-SXM4-40GB": 1555.0, "L4": 300.0, "T4": 320.0}


class NotApplicable(Exception):
    """Raised by an implementation that does not handle this size (left out of the sweep there)."""


def _dtype(name) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    dt = getattr(torch, str(name), None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}; use one of {DEFAULT_DTYPES}")
    return dt


def device_slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


def datasheet_gbs(name: str) -> float | None:
    for key, gbs in DATASHEET_GBS.items():
        if key in name:
            return gbs
    return None


HOLD_US = 300      # the GPU waits this long after each L2 flush, while the host enqueues the timed call
MAX_RUNS = 500     # timed runs per time_ms at most (do_bench's 100 ms of them, fewer for short kernels)


@functools.cache
def _sleep_cycles_per_us() -> float:
    """GPU clock cycles of `torch.cuda._sleep` per microsecond (measured once per process)."""
    probe = 1_000_000
    torch.cuda._sleep(probe)                         # first call: warm-up
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    return probe / (start.elapsed_time(end) * 1e3)


def time_ms(fn: Callable[[], object], warmup_ms: float = 25, rep_ms: float = 100) -> float:
    """Median milliseconds of fn() on the GPU: `triton.testing.do_bench`'s protocol (warm-up, L2 flushed before
    every run, the median) with one change. do_bench starts the clock after each flush; when the host needs longer
    for one timed run (the flush's launch, the events, the Python launcher: 50-80 us for ours on the lent hosts,
    several times that at moments) than the GPU needs for the flush and the kernel, the GPU idles after the start
    event until the kernel arrives, and the idle time is timed. Here the GPU is held HOLD_US after each flush
    (`torch.cuda._sleep`, a private function: without it, no hold), which gives the host that much to spare."""
    fn()
    torch.cuda.synchronize()
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
    hold = int(HOLD_US * _sleep_cycles_per_us()) if hasattr(torch.cuda, "_sleep") else 0

    def timed_runs(n):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in events:
            flush.zero_()
            if hold:
                torch.cuda._sleep(hold)
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in events]

    estimate = statistics.median(timed_runs(5))
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    runs = timed_runs(max(1, min(MAX_RUNS, int(rep_ms / estimate))))
    return float(statistics.median(runs))


def settled(runs: list[float]) -> bool:
    """Whether a point's passes can stand: at least REPEATS of them, the two fastest within AGREE."""
    if len(runs) < max(2, REPEATS):
        return False
    fastest, second = sorted(runs)[:2]
    return second <= fastest * (1 + AGREE)


def timing_passes(fns: dict[str, Callable[[], object]], timer: Callable = None,
                  on_pass: Callable[[int, int], None] = lambda i, k: None) -> dict[str, list[float]]:
    """{name: [ms of each pass]}: REPEATS interleaved passes over fns (name -> fn), then further passes over
    the ones not `settled`, up to MAX_REPEATS. timer(fn) -> ms (default `time_ms`); on_pass(i, k) after pass i
    (from 0), which timed k of them (a progress bar's update)."""
    timer = timer or time_ms
    runs = {name: [] for name in fns}
    for i in range(MAX_REPEATS):
        todo = [name for name in fns if not settled(runs[name])]
        if not todo:
            break
        for name in todo:
            runs[name].append(timer(fns[name]))
        on_pass(i, len(todo))
    return runs


def copy_gbs(numel: int = TOTAL_ELEMENTS, dtype="float32") -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    if not torch.cuda.is_available():
        raise RuntimeError("copy_gbs needs a CUDA GPU")
    if numel <= 0:
        raise ValueError(f"numel must be positive, got {numel}")
    src = torch.randn(numel, device="cuda", dtype=_dtype(dtype))
    dst = torch.empty_like(src)
    ms = min(timing_passes({"copy": lambda: dst.copy_(src)})["copy"])
    return 2 * src.numel() * src.element_size() / ms * 1e-6


def rmsnorm_fwd_bytes(M: int, N: int, elt: int, w_elt: int) -> int:
    """Compulsory traffic of RMSNorm forward: read x, write y, read the weight once."""
    return 2 * M * N * elt + N * w_elt


def sweep(impls: dict[str, Callable], *, lesson: str, op: str, make_inputs: Callable, n_bytes: Callable,
          check: Callable, Ns=DEFAULT_NS, dtypes=DEFAULT_DTYPES, total: int = TOTAL_ELEMENTS,
          progress: bool = True) -> dict:
    """Time every implementation over N x dtype at M*N = total elements.

    make_inputs(M, N, dtype) -> tuple of arguments; impl(*args) -> output(s);
    n_bytes(M, N, args) -> compulsory bytes; check(impl_output, args) -> (ok, message).
    An implementation that fails its check is reported and not timed.
    """
    if not impls:
        raise ValueError("impls is empty: pass {'name': callable}")
    if not torch.cuda.is_available():
        raise RuntimeError("sweep needs a CUDA GPU; on CPU use show_recorded()")
    from tqdm.auto import tqdm

    name = torch.cuda.get_device_name()
    copies = {str(dt): copy_gbs(total, dt) for dt in dtypes}
    rows, failures = [], []
    groups = [(dt, N) for dt in dtypes for N in Ns]
    bar = tqdm(total=len(groups) * len(impls) * REPEATS, desc=f"{op} on {name}", disable=not progress)

    def on_pass(i, k):
        if i >= REPEATS:                   # a pass beyond the planned ones (see timing_passes)
            bar.total += k
        bar.update(k)

    args = None
    for dt, N in groups:
        M = max(1, total // N)
        args = None                        # free the previous inputs before making the next
        torch.cuda.empty_cache()
        args = make_inputs(M, N, _dtype(dt))
        to_time = []
        for impl, fn in impls.items():
            try:
                ok, msg = check(fn(*args), args)
            except NotApplicable:
                bar.update(REPEATS)
                continue
            except Exception as e:  # an impl that cannot run this case is reported, not fatal
                ok, msg = False, f"{type(e).__name__}: {e}"
            if ok:
                to_time.append(impl)
            else:
                failures.append(f"{impl} {dt} N={N}: {msg}")
                bar.update(REPEATS)
        timed = timing_passes({impl: (lambda fn=impls[impl]: fn(*args)) for impl in to_time}, on_pass=on_pass)
        for impl, runs in timed.items():
            ms = min(runs)
            gbs = n_bytes(M, N, args) / ms * 1e-6
            rows.append(dict(lesson=lesson, op=op, impl=impl, dtype=dt, M=M, N=N, ms=round(ms, 5),
                             ms_runs=[round(r, 5) for r in runs], gbs=round(gbs, 1)))
    bar.close()
    del args
    torch.cuda.empty_cache()
    # The copies again at the end, each keeping its faster measurement (the same rule as every point): one copy
    # measured in separate processes on one H200 ranged 4116-4169 GB/s.
    copies = {dt: max(gbs, copy_gbs(total, dt)) for dt, gbs in copies.items()}
    roof = max(copies.values())
    for row in rows:
        row.update(pct_copy=round(100 * row["gbs"] / roof, 1), copy_gbs=round(roof, 1),
                   pct_copy_dtype=round(100 * row["gbs"] / copies[row["dtype"]], 1),
                   copy_gbs_dtype=round(copies[row["dtype"]], 1))
    return dict(device=name, copy_gbs=round(roof, 1), copy_gbs_by_dtype={k: round(v, 1) for k, v in copies.items()},
                datasheet_gbs=datasheet_gbs(name), rows=rows, failures=failures)


def run_and_plot(fns: dict[str, Callable], *, lesson: str, op: str, make_inputs: Callable, n_bytes: Callable,
                 check: Callable, byte_model: str, Ns=DEFAULT_NS, dtypes=DEFAULT_DTYPES, plot_it: bool = True,
                 progress: bool = True) -> dict:
    """sweep(), then say what was not timed and how bytes were counted, then plot."""
    res = sweep(fns, lesson=lesson, op=op, make_inputs=make_inputs, n_bytes=n_bytes, check=check, Ns=Ns,
                dtypes=dtypes, progress=progress)
    for f in res["failures"]:
        print("not timed (wrong output):", f)
    print(f"bytes counted: {byte_model}; copy roofline {res['copy_gbs']:.0f} GB/s on {res['device']}")
    if plot_it and res["rows"]:
        plot(res)
    return res


def lift_recompile_limit() -> None:
    """One compiled graph per (dtype, N) of a sweep: without this torch.compile silently falls back
    to eager after its recompile limit (8 shapes by default)."""
    import torch._dynamo

    for knob in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 256)


def save(results: dict, directory: Path | str = RESULTS_DIR) -> Path:
    """Merge results into <directory>/<device>.json (rows of the same lesson/op are replaced)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{device_slug(results['device'])}.json"
    old = json.loads(path.read_text()) if path.exists() else {"rows": []}
    done = {(r["lesson"], r["op"]) for r in results["rows"]}
    kept = [r for r in old.get("rows", []) if (r["lesson"], r["op"]) not in done]
    merged = {k: v for k, v in results.items() if k not in ("rows", "failures")}
    # the file's copy figures are the latest run's; each row keeps its own run's (copy_gbs, copy_gbs_dtype)
    merged["copy_gbs_by_dtype"] = {**old.get("copy_gbs_by_dtype", {}), **results.get("copy_gbs_by_dtype", {})}
    merged["rows"] = kept + results["rows"]
    path.write_text(json.dumps(merged, indent=1) + "\n")
    return path


def load_recorded(lesson: str, op: str, directory: Path | str = RESULTS_DIR) -> list[dict]:
    """Every recorded result file that has rows for (lesson, op), rows filtered."""
    out = []
    for path in sorted(Path(directory).glob("*.json")):
        data = json.loads(path.read_text())
        rows = [r for r in data.get("rows", []) if r["lesson"] == lesson and r["op"] == op]
        if rows:
            out.append({**data, "rows": rows})
    return out


def plot(results: dict, *, title: str | None = None, path: Path | str | None = None):
    """GB/s against N, one panel per dtype, with the copy roofline and % labels."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    rows = results["rows"]
    if not rows:
        raise ValueError("no rows to plot")
    dtypes = [d for d in DEFAULT_DTYPES if any(r["dtype"] == d for r in rows)]
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.2 * len(dtypes) + 2.4, 4.6), squeeze=False, sharey=True)
    roof = rows[0].get("copy_gbs", results["copy_gbs"])  # the roofline of the run these rows come from
    sheet = results.get("datasheet_gbs")
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    panels = []
    for ax, dt in zip(axes[0], dtypes):
        series = []
        for k, impl in enumerate(impls):
            pts = sorted((r["N"], r["gbs"], r["pct_copy"]) for r in rows if r["dtype"] == dt and r["impl"] == impl)
            if not pts:
                continue
            xs, ys, pcts = zip(*pts)
            # the first implementation (the course's own) on top of the others, thicker
            (line,) = ax.plot(xs, ys, marker="o", label=impl, **({"lw": 2.4, "zorder": 5} if k == 0 else {}))
            series.append((line, xs, ys, pcts))
        ax.axhline(roof, color="black", ls="--", lw=1, label=f"copy {roof:.0f} GB/s (measured)")
        same = same_bytes_copy(rows, dt)
        if same and abs(same - roof) > 0.005 * roof:   # a 16-bit panel: the copy of its own (fewer) bytes
            ax.axhline(same, color="black", ls="-.", lw=0.8)
            ax.annotate(f"{dt} copy (same bytes) {same:.0f} GB/s", (0.01, same), xycoords=("axes fraction", "data"),
                        xytext=(0, -9), textcoords="offset points", fontsize=7, zorder=6,
                        bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 1})
        panels.append((ax, series))
        if sheet:
            ax.axhline(sheet, color="gray", ls=":", lw=1, label=f"datasheet {sheet:.0f} GB/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N (row length), M*N fixed")
        ax.set_title(dt)
        ax.grid(alpha=0.3)
    for ax, series in panels:   # once every panel is drawn: the y axis they share has its final limits
        _label_percentages(ax, series)
    axes[0][0].set_ylabel("GB/s (compulsory bytes / time)")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # outside: no line hidden
    op = rows[0]["op"]
    fig.suptitle(title or f"{op} on {results['device']}")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _label_percentages(ax, series: list, room: float = 0.035) -> None:
    """Each point's % of copy above it, in the series' order (the course's own first), leaving out a label that
    would sit on one already placed at the same N (near 100 % four peers pile up): `room`, the height of a label
    as a fraction of the panel's."""
    low, high = ax.get_ylim()
    placed: dict = {}   # N -> the heights (fractions of the panel) of its labels
    for line, xs, ys, pcts in series:
        for x, y, p in zip(xs, ys, pcts):
            height = (y - low) / (high - low)
            if any(abs(height - h) < room for h in placed.get(x, [])):
                continue
            placed.setdefault(x, []).append(height)
            ax.annotate(f"{p:.0f}%", (x, y), textcoords="offset points", xytext=(0, 5), ha="center",
                        fontsize=7, color=line.get_color(), zorder=6)


def same_bytes_copy(rows: list[dict], dtype: str) -> float | None:
    """The copy of dtype at the sweep's M*N elements (the same bytes as its kernels), when the rows have it."""
    return next((r["copy_gbs_dtype"] for r in rows if r["dtype"] == dtype and "copy_gbs_dtype" in r), None)


def print_table(results: dict) -> None:
    """Rows as text: impl by N, % of copy, one block per dtype."""
    rows = results["rows"]
    for dt in [d for d in DEFAULT_DTYPES if any(r["dtype"] == d for r in rows)]:
        Ns = sorted({r["N"] for r in rows if r["dtype"] == dt})
        copy = rows[0].get("copy_gbs", results["copy_gbs"])
        same = same_bytes_copy(rows, dt)
        note = f"; a {dt} copy of the same bytes: {same:.0f} GB/s" if same else ""
        print(f"\n{results['device']}  {dt}  (% of copy {copy:.0f} GB/s; GB/s{note})")
        print(f"{'impl':<22}" + "".join(f"{n:>13}" for n in Ns))
        for impl in dict.fromkeys(r["impl"] for r in rows):
            cells = []
            for n in Ns:
                r = next((r for r in rows if r["dtype"] == dt and r["impl"] == impl and r["N"] == n), None)
                cells.append(f"{r['pct_copy']:5.1f}% {r['gbs']:5.0f}" if r else " " * 13)
            print(f"{impl:<22}" + "".join(f"{c:>13}" for c in cells))


def show_recorded(lesson: str, op: str, directory: Path | str = RESULTS_DIR):
    """The CPU path of a benchmark cell: plot what was measured on GPUs, say where and when."""
    found = load_recorded(lesson, op, directory)
    if not found:
        print(f"No recorded GPU results for {lesson}/{op} in {directory}.")
        return []
    figs = []
    for res in found:
        copy = res["rows"][0].get("copy_gbs", res["copy_gbs"])
        print(f"Recorded on {res['device']} (copy {copy:.0f} GB/s); run this cell on a GPU to measure yours.")
        figs.append(plot(res, title=f"{op} on {res['device']} (recorded)"))
    return figs
