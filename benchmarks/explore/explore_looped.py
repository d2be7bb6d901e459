"""Fourth exploration: why torch.compile's two-pass loop reaches ~97% at N = 32K and ours 67-83%.
Hypothesis: compile-time loop bounds (static N) let the compiler unroll the first pass and keep
several loads in flight per warp. Variants: runtime N, constexpr N, unrolled tl.range, staged tl.range."""
import os, json, torch, triton, triton.language as tl
from triton.testing import do_bench
from explore_rmsnorm import ref


@triton.jit
def _loop_rt(X, Y, W, R, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        x = tl.load(X + row * N + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        cm = cols < N
        x = tl.load(X + row * N + cols, mask=cm, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(Y + row * N + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=cm)


@triton.jit
def _loop_ce(X, Y, W, R, eps, N: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        x = tl.load(X + row * N + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        cm = cols < N
        x = tl.load(X + row * N + cols, mask=cm, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(Y + row * N + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=cm)


@triton.jit
def _loop_unroll(X, Y, W, R, N, eps, BLOCK_N: tl.constexpr, UNROLL: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in tl.range(0, N, BLOCK_N, loop_unroll_factor=UNROLL):
        cols = off + tl.arange(0, BLOCK_N)
        x = tl.load(X + row * N + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for off in tl.range(0, N, BLOCK_N, loop_unroll_factor=UNROLL):
        cols = off + tl.arange(0, BLOCK_N)
        cm = cols < N
        x = tl.load(X + row * N + cols, mask=cm, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(Y + row * N + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=cm)


def main():
    total = 64 * 1024 * 1024; eps = 1e-6
    bench = lambda fn: do_bench(fn, warmup=10, rep=40, return_mode="median")
    cb = {}
    for dt in (torch.bfloat16, torch.float32):
        a = torch.randn(total, device="cuda", dtype=dt); b = torch.empty_like(a)
        cb[dt] = 2 * a.numel() * a.element_size() / bench(lambda: b.copy_(a)) * 1e-6
    print(torch.cuda.get_device_name(), cb)
    res = []
    for dt in (torch.bfloat16, torch.float32):
        for N in (16384, 32768, 65536):
            M = total // N
            x = torch.randn(M, N, device="cuda", dtype=dt); w = torch.randn(N, device="cuda", dtype=dt)
            y = torch.empty_like(x); r = torch.empty(M, device="cuda")
            nbytes = 2 * x.numel() * x.element_size() + N * w.element_size()
            expect = ref(x[:16], w, eps)
            out = []
            def rec(name, fn):
                y.fill_(float("nan")); fn(); torch.cuda.synchronize()
                ok = bool((y[:16].double() - expect.double()).abs().max().item() <= 2e-2 * max(1.0, expect.double().abs().max().item()))
                p = 100 * nbytes / bench(fn) * 1e-6 / cb[dt]
                out.append((p, name, ok)); res.append(dict(dtype=str(dt), N=N, name=name, ok=ok, pct=p))
            for bn in (1024, 2048, 4096):
                for nw in (4, 8, 16):
                    rec(f"rt/bn{bn}/w{nw}", lambda: _loop_rt[(M,)](x, y, w, r, N, eps, BLOCK_N=bn, num_warps=nw))
                    rec(f"ce/bn{bn}/w{nw}", lambda: _loop_ce[(M,)](x, y, w, r, eps, N=N, BLOCK_N=bn, num_warps=nw))
                    for u in (2, 4):
                        rec(f"unroll{u}/bn{bn}/w{nw}", lambda: _loop_unroll[(M,)](x, y, w, r, N, eps, BLOCK_N=bn, UNROLL=u, num_warps=nw))
                    rec(f"rt-stages3/bn{bn}/w{nw}", lambda: _loop_rt[(M,)](x, y, w, r, N, eps, BLOCK_N=bn, num_warps=nw, num_stages=3))
            out.sort(reverse=True)
            fams = {}
            for p, n, ok in out:
                f = n.split("/")[0]
                if f not in fams: fams[f] = (p, n, ok)
            print(str(dt)[6:], N, " | ".join(f"{n}:{p:.1f}%{'' if ok else '!'}" for p, n, ok in fams.values()), flush=True)
            del x, y
    json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp"), "explore_looped.json"), "w"))

main()
