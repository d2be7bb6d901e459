"""One-off exploration on the GPU: which RMSNorm forward kernel shape reaches the copy roofline.

Families: one row per program (whole row in registers), several rows per program (2-D tile),
and a looped two-pass kernel for long rows. Prints the best config per (dtype, N).
Kept in the repo as the record of how the lesson's launcher heuristics were chosen.
"""
import json, os, sys, time
import torch, triton, triton.language as tl
from triton.testing import do_bench


@triton.jit
def _rows(X, Y, W, R, M, N, sx, sy, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    rm = rows < M
    cm = cols < N
    m = rm[:, None] & cm[None, :]
    r64 = rows.to(tl.int64)
    x = tl.load(X + r64[:, None] * sx + cols[None, :], mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(W + cols, mask=cm, other=0.0).to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + r64[:, None] * sy + cols[None, :], y.to(Y.dtype.element_ty), mask=m)
    tl.store(R + rows, rstd, mask=rm)


@triton.jit
def _looped(X, Y, W, R, N, sx, sy, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        x = tl.load(X + row * sx + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(R + row, rstd)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        cm = cols < N
        x = tl.load(X + row * sx + cols, mask=cm, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=cm, other=0.0).to(tl.float32)
        tl.store(Y + row * sy + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=cm)


def ref(x, w, eps):
    xd = x.double()
    return (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()).to(x.dtype)


def main():
    out = os.environ.get("OUT", "/tmp")
    dev = torch.cuda.get_device_name()
    total = 64 * 1024 * 1024
    rows_out = []
    eps = 1e-6
    def bench(fn):
        return do_bench(fn, warmup=10, rep=40, return_mode="median")
    x32 = torch.randn(total, device="cuda")
    copy = {}
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        a = x32.to(dt); b = torch.empty_like(a)
        ms = bench(lambda: b.copy_(a))
        copy[str(dt)] = 2 * a.numel() * a.element_size() / ms * 1e-6
    print("device", dev, "copy GB/s", copy, flush=True)
    t0 = time.time()
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        for N in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536):
            M = total // N
            x = torch.randn(M, N, device="cuda", dtype=dt)
            w = torch.randn(N, device="cuda", dtype=dt)
            y = torch.empty_like(x); r = torch.empty(M, device="cuda")
            nbytes = 2 * x.numel() * x.element_size() + N * w.element_size()
            cbw = copy[str(dt)]
            expect = ref(x[:64], w, eps)
            def record(family, cfg, fn):
                try:
                    y.fill_(float("nan")); fn()
                    torch.cuda.synchronize()
                    err = (y[:64].double() - expect.double()).abs().max().item()
                    ok = bool(err <= 2e-2 * max(1.0, expect.double().abs().max().item()))
                    ms = bench(fn)
                    gbs = nbytes / ms * 1e-6
                except Exception as e:  # report and keep exploring
                    print("FAIL", family, cfg, N, dt, type(e).__name__, str(e)[:200], flush=True)
                    return
                rows_out.append(dict(dtype=str(dt), N=N, family=family, cfg=cfg, ok=ok, gbs=gbs, pct=100 * gbs / cbw))
            BN = triton.next_power_of_2(N)
            for nw in (4, 8, 16, 32):
                record("one_row", dict(num_warps=nw), lambda: _rows[(M,)](x, y, w, r, M, N, N, N, eps, BLOCK_M=1, BLOCK_N=BN, num_warps=nw))
            if N <= 4096:
                for bm in (2, 4, 8, 16):
                    if bm * N > 16384:
                        continue
                    for nw in (4, 8):
                        g = (triton.cdiv(M, bm),)
                        record("multi_row", dict(BLOCK_M=bm, num_warps=nw), lambda: _rows[g](x, y, w, r, M, N, N, N, eps, BLOCK_M=bm, BLOCK_N=BN, num_warps=nw))
            if N >= 8192:
                for bn in (2048, 4096, 8192):
                    for nw in (4, 8, 16):
                        record("looped", dict(BLOCK_N=bn, num_warps=nw), lambda: _looped[(M,)](x, y, w, r, N, N, N, eps, BLOCK_N=bn, num_warps=nw))
            def composite():
                xf = x.float()
                y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(dt))
            record("torch_composite", {}, composite)
            record("F.rms_norm", {}, lambda: y.copy_(torch.nn.functional.rms_norm(x, (N,), w, eps)))
            print(f"{dt} N={N} done t={time.time()-t0:.0f}s", flush=True)
            del x, y, w
    with open(os.path.join(out, "explore.json"), "w") as f:
        json.dump(dict(device=dev, copy=copy, rows=rows_out), f, indent=1)
    print("\nbest per family (GB/s, % copy):")
    for dt in ("torch.bfloat16", "torch.float16", "torch.float32"):
        for N in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536):
            sel = [r for r in rows_out if r["dtype"] == dt and r["N"] == N]
            parts = []
            for fam in ("one_row", "multi_row", "looped", "torch_composite", "F.rms_norm"):
                fs = [r for r in sel if r["family"] == fam]
                if fs:
                    b = max(fs, key=lambda r: r["gbs"])
                    bad = "" if all(r["ok"] for r in fs) else "!"
                    parts.append(f"{fam}:{b['pct']:.0f}%{bad}{json.dumps(b['cfg'],separators=(',',':')) if b['cfg'] else ''}")
            print(dt[6:], N, " ".join(parts))


if __name__ == "__main__":
    main()
