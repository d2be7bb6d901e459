"""make bench: time lesson 04's reference solution and its peers on this GPU.

The kernels come from solutions/04_triton_rmsnorm.ipynb (the one source), loaded without Jupyter.
Writes benchmarks/results/<device>.json and <device>_04_rmsnorm_fwd.png; prints a table.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    sys.path.insert(0, str(ROOT))
    import torch

    if not torch.cuda.is_available():
        print("make bench needs a CUDA GPU; recorded results are in benchmarks/results/")
        return 1
    from autograder.notebook import load
    from helpers import bench
    import helpers.bench_rmsnorm as rb

    ns, errors = load(ROOT / "solutions" / "04_triton_rmsnorm.ipynb")
    if errors:
        print("solution notebook failed to load:", errors)
        return 1
    impls = {"solution: rmsnorm (dispatch)": ns["rmsnorm"],
             "solution: one row/program": ns["rmsnorm_fwd"],
             "solution: persistent looped": ns["rmsnorm_fwd_looped"]}
    res = rb.run(impls, plot=False, progress=sys.stderr.isatty())
    path = bench.save(res)
    png = path.with_name(f"{path.stem}_04_rmsnorm_fwd.png")
    bench.plot(res, path=png)
    bench.print_table(res)
    print("\nwrote", path.relative_to(ROOT), "and", png.relative_to(ROOT))
    return 1 if res["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
