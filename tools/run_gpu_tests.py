"""make test-gpu: the GPU-marked tests (marker gpu, any file under tests/), run side by side by worker processes.

Each mutant compiles its kernels for every hidden case; one process would take longer than a device session
allows. The tests are cut into small batches that `--workers` pytest processes take in turn as they finish (a
fixed split left one shard with the slow lesson-03 cases and the others idle); they share Triton's on-disk cache.
Exit status: non-zero if any batch fails.
    python tools/run_gpu_tests.py [--workers N] [--batch K] [-k pytest-expression] [--part I/N]
`--part 1/2` then `--part 2/2` run every second test each (solutions and mutants of every lesson in both), for
machines that stop a command after 10 minutes.
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests/"]
MAX_WORKERS = 14   # one GPU: more processes than this wait on its memory and on the grader's one-at-a-time locks


ALONE_FIRST = ("test_solutions_full_marks_on_gpu",)   # minutes each (every case of a lesson): started first, alone


def batches(ids: list[str], workers: int, batch: int | None) -> list[list[str]]:
    """The slowest tests alone and first, then the rest in consecutive batches of `batch` (default: about three
    batches a worker, so that the last ones to finish are short); each batch is one pytest process (its imports
    cost seconds)."""
    alone = [[i] for i in ids if any(f"::{name}[" in i for name in ALONE_FIRST)]
    rest = [i for i in ids if [i] not in alone]
    size = batch or max(1, math.ceil(len(rest) / (3 * workers)))
    return alone + [rest[i:i + size] for i in range(0, len(rest), size)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--workers", "--shards", type=int, default=min(MAX_WORKERS, os.cpu_count() or 1),
                   help="pytest processes at a time (default: the CPU cores, at most %(default)s here)")
    p.add_argument("--batch", type=int, default=None, help="tests per pytest process")
    p.add_argument("-k", default=None, help="pytest -k expression")
    p.add_argument("--part", default="1/1", help="I/N: only the I-th of every N tests (default: all)")
    a = p.parse_args(argv)
    if a.workers < 1 or (a.batch is not None and a.batch < 1):
        p.error("--workers and --batch must be at least 1")
    try:
        part, of = map(int, a.part.split("/"))
    except ValueError:
        part = of = 0
    if not 1 <= part <= of:
        p.error(f"--part must be I/N with 1 <= I <= N, got {a.part!r}")
    sel = ["-k", a.k] if a.k else []
    listing = subprocess.run(PYTEST + sel + ["--collect-only"], cwd=ROOT, capture_output=True, text=True)
    ids = [line for line in listing.stdout.splitlines() if "::" in line][part - 1::of]
    if not ids:
        print(listing.stdout[-2000:], listing.stderr[-2000:])
        return 1
    parts = batches(ids, a.workers, a.batch)
    print(f"{len(ids)} GPU tests in {len(parts)} batches, {a.workers} at a time", flush=True)
    start = time.monotonic()

    def run(batch_ids: list[str]) -> tuple[int, str, float]:
        t0 = time.monotonic()
        proc = subprocess.run(PYTEST[:-1] + batch_ids, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        return proc.returncode, proc.stdout, time.monotonic() - t0

    status, failed = 0, 0
    with ThreadPoolExecutor(a.workers) as pool:
        for i, (code, out, took) in enumerate(pool.map(run, parts)):
            lines = [line for line in out.splitlines() if line.strip()]
            print(f"--- batch {i + 1}/{len(parts)}: {len(parts[i])} tests, exit {code}, {took:.0f} s: "
                  f"{lines[-1] if lines else '(no output)'}", flush=True)
            if code != 0:
                failed += 1
                print("\n".join(lines[-40:]), flush=True)
                status = 1
    print(f"{len(ids)} tests, {failed} failing batch{'es' * (failed != 1)}, {time.monotonic() - start:.0f} s wall")
    return status


if __name__ == "__main__":
    sys.exit(main())
