"""make test-gpu: the GPU-marked tests (marker gpu, any file under tests/), split into shards that run side by side.

Each mutant compiles its kernels for every hidden case; one process would take longer than a
device session allows. Shards share Triton's on-disk cache. Exit status: non-zero if any shard fails.
    python tools/run_gpu_tests.py [--shards 4] [pytest -k expression]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests/"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("-k", default=None, help="pytest -k expression")
    a = p.parse_args(argv)
    sel = ["-k", a.k] if a.k else []
    listing = subprocess.run(PYTEST + sel + ["--collect-only"], cwd=ROOT, capture_output=True, text=True)
    ids = [line for line in listing.stdout.splitlines() if "::" in line]
    if not ids:
        print(listing.stdout[-2000:], listing.stderr[-2000:])
        return 1
    shards = [ids[i::a.shards] for i in range(a.shards) if ids[i::a.shards]]
    procs = [subprocess.Popen(PYTEST[:-1] + shard, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for shard in shards]
    status = 0
    for i, proc in enumerate(procs):
        out, _ = proc.communicate()
        tail = [line for line in out.splitlines() if line.strip()][-15:]
        print(f"--- shard {i + 1}/{len(procs)}: {len(shards[i])} tests, exit {proc.returncode}")
        print("\n".join(tail))
        status |= proc.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
