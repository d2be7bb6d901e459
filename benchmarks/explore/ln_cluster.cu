// LayerNorm forward in CUDA C with Hopper thread-block clusters (stage "cudaln" of explore_cluster.py).
//
// Question it answers: is 95 % of the fp32 copy reachable for a LayerNorm at N = 32768 in bf16 with the
// bench's 2048 rows, when nothing of Triton stands in the way? Triton 3.6 cannot launch clusters
// (num_ctas > 1 failed in TritonGPUPlanCTAPass, run "cluster"), so its kernels have one program per row there.
//
// Idea: a cluster of C CTAs normalises one row. Each CTA holds N / C values in registers (16-byte loads,
// ITEMS vectors per thread), reduces them in the block, and the CTAs of the cluster exchange their partial
// sums through distributed shared memory: two exchanges (the sum, then the sum of squared deviations
// from the mean: the two-pass statistics of lesson 05), two cluster barriers, one final arrive/wait so
// that no CTA exits while another may still read its shared memory. C = 1 is a plain block per row.
//
// Also a 16-byte-vector copy kernel: the copy roofline written the same way.
//
// Measured (H100, runs #42-#43, % of the fp32 copy): at 32K bf16 the best cluster configuration 75.8, the best
// block per row launched without the cluster attribute 81.2, the Triton dispatcher 92.2. With the attribute a
// one-CTA "cluster" loses 17 points to the same kernel launched plainly: cluster launches place CTAs slowly.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -shared -Xcompiler -fPIC -o ln_cluster.so ln_cluster.cu
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace cg = cooperative_groups;

// Eight bf16 / fp16 or four fp32 values in one 16-byte vector.
template <typename T> struct Pack { static constexpr int E = 16 / sizeof(T); };

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half(v); }

// Loads and stores of 16 bytes; HINTS: streaming (evict-first) for x and y, the default otherwise.
template <bool HINTS> __device__ __forceinline__ uint4 load16(const void* p) {
    return HINTS ? __ldcs(reinterpret_cast<const uint4*>(p)) : *reinterpret_cast<const uint4*>(p);
}
template <bool HINTS> __device__ __forceinline__ void store16(void* p, uint4 v) {
    if (HINTS) __stcs(reinterpret_cast<uint4*>(p), v); else *reinterpret_cast<uint4*>(p) = v;
}

// Sum over the block: warp shuffles, then one value per warp through shared memory.
template <int THREADS> __device__ __forceinline__ float block_sum(float v, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? scratch[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();   // scratch is reused by the next call
    return v;
}

// The cluster's total of the value every CTA left in part[slot] (thread 0 of each CTA wrote it before
// the barrier). Every CTA sums the ranks in the same order, so all of them get the same float.
__device__ __forceinline__ float cluster_total(cg::cluster_group& cluster, float* part, int slot) {
    cluster.sync();
    float total = 0.f;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) total += cluster.map_shared_rank(part, r)[slot];
    return total;
}

template <typename T, int THREADS, int ITEMS, bool HINTS, bool WB_EARLY>
__global__ void __launch_bounds__(THREADS) ln_cluster_kernel(
        const T* __restrict__ X, T* __restrict__ Y, const T* __restrict__ W, const T* __restrict__ B,
        float* __restrict__ MEAN, float* __restrict__ RSTD, int64_t N, int64_t stride_x, int64_t stride_y,
        float eps) {
    constexpr int E = Pack<T>::E;
    __shared__ float scratch[32];
    __shared__ float part[2];
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned C = cluster.num_blocks(), rank = cluster.block_rank();
    const int64_t row = blockIdx.x / C;
    const int64_t seg = (int64_t)rank * THREADS * ITEMS * E;   // this CTA's first column
    const T* x = X + row * stride_x + seg;
    float v[ITEMS][E];
    uint4 wr[ITEMS], br[ITEMS];   // weight and bias vectors, loaded here when WB_EARLY (their L2 trip overlaps x's)
    if (WB_EARLY) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int64_t off = (i * THREADS + threadIdx.x) * E;
            wr[i] = __ldg(reinterpret_cast<const uint4*>(W + seg + off));
            br[i] = __ldg(reinterpret_cast<const uint4*>(B + seg + off));
        }
    }
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        uint4 raw = load16<HINTS>(x + (i * THREADS + threadIdx.x) * E);
        const T* t = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int e = 0; e < E; ++e) { v[i][e] = to_f<T>(t[e]); s += v[i][e]; }
    }
    s = block_sum<THREADS>(s, scratch);
    if (threadIdx.x == 0) part[0] = s;
    const float mean = cluster_total(cluster, part, 0) / (float)N;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
#pragma unroll
        for (int e = 0; e < E; ++e) { const float d = v[i][e] - mean; q += d * d; }
    q = block_sum<THREADS>(q, scratch);
    if (threadIdx.x == 0) part[1] = q;
    const float rstd = rsqrtf(cluster_total(cluster, part, 1) / (float)N + eps);
    // Remote reads are done: arrive now, wait only before exiting, so the stores below overlap the barrier.
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    T* y = Y + row * stride_y + seg;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int64_t off = (i * THREADS + threadIdx.x) * E;
        if (!WB_EARLY) {
            wr[i] = __ldg(reinterpret_cast<const uint4*>(W + seg + off));
            br[i] = __ldg(reinterpret_cast<const uint4*>(B + seg + off));
        }
        const T* wt = reinterpret_cast<const T*>(&wr[i]);
        const T* bt = reinterpret_cast<const T*>(&br[i]);
        uint4 out;
        T* o = reinterpret_cast<T*>(&out);
#pragma unroll
        for (int e = 0; e < E; ++e) o[e] = from_f<T>((v[i][e] - mean) * rstd * to_f<T>(wt[e]) + to_f<T>(bt[e]));
        store16<HINTS>(y + off, out);
    }
    if (rank == 0 && threadIdx.x == 0) { MEAN[row] = mean; RSTD[row] = rstd; }
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

template <typename T, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS) copy_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n_vec) {
    constexpr int E = Pack<T>::E;
    const int64_t base = (int64_t)blockIdx.x * THREADS * ITEMS + threadIdx.x;
    uint4 r[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int64_t k = base + (int64_t)i * THREADS;
        if (k < n_vec) r[i] = __ldcs(reinterpret_cast<const uint4*>(src) + k);
    }
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int64_t k = base + (int64_t)i * THREADS;
        if (k < n_vec) __stcs(reinterpret_cast<uint4*>(dst) + k, r[i]);
    }
    (void)E;
}

template <typename T, int THREADS, int ITEMS, bool HINTS, bool WB_EARLY>
static cudaError_t launch_ln(int cluster, bool plain, const void* x, void* y, const void* w, const void* b, float* mean,
                             float* rstd, int64_t M, int64_t N, int64_t sx, int64_t sy, float eps, cudaStream_t st) {
    if (N != (int64_t)cluster * THREADS * ITEMS * Pack<T>::E) return cudaErrorInvalidValue;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(M * cluster));
    cfg.blockDim = dim3(THREADS);
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = plain ? 0 : 1;   // plain: an ordinary launch (each CTA its own cluster of one)
    if (plain && cluster != 1) return cudaErrorInvalidValue;
    return cudaLaunchKernelEx(&cfg, ln_cluster_kernel<T, THREADS, ITEMS, HINTS, WB_EARLY>, (const T*)x, (T*)y, (const T*)w,
                              (const T*)b, mean, rstd, N, sx, sy, eps);
}

template <typename T, int THREADS, int ITEMS, bool HINTS, bool WB_EARLY>
static int registers() {
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, ln_cluster_kernel<T, THREADS, ITEMS, HINTS, WB_EARLY>) == cudaSuccess ? a.numRegs : -1;
}

// One switch over the instantiated configurations: dtype 0 = fp32, 1 = bf16 (run #42 had 2 = fp16); flags: 1 = streaming
// hints, 2 = weight and bias loaded before the statistics, 4 = an ordinary launch (cluster must be 1).
#define LN_CASES(T, CODE)                                                                                        \
    LN_CASE(T, CODE, 128, 4) LN_CASE(T, CODE, 128, 8) LN_CASE(T, CODE, 256, 2) LN_CASE(T, CODE, 256, 4)         \
    LN_CASE(T, CODE, 256, 8) LN_CASE(T, CODE, 512, 2) LN_CASE(T, CODE, 512, 4) LN_CASE(T, CODE, 1024, 2)        \
    LN_CASE(T, CODE, 1024, 4)

extern "C" int ln_cluster(int dtype, int cluster, int threads, int items, int flags, const void* x, void* y,
                          const void* w, const void* b, float* mean, float* rstd, int64_t M, int64_t N,
                          int64_t sx, int64_t sy, float eps, void* stream) {
    cudaStream_t st = (cudaStream_t)stream;
#define LN_CASE(T, CODE, TH, IT)                                                                                 \
    if (dtype == CODE && threads == TH && items == IT)                                                           \
        switch (flags & 3) {                                                                                     \
            case 0: return launch_ln<T, TH, IT, false, false>(cluster, flags & 4, x, y, w, b, mean, rstd, M, N, sx, sy, eps, st); \
            case 1: return launch_ln<T, TH, IT, true, false>(cluster, flags & 4, x, y, w, b, mean, rstd, M, N, sx, sy, eps, st);  \
            case 2: return launch_ln<T, TH, IT, false, true>(cluster, flags & 4, x, y, w, b, mean, rstd, M, N, sx, sy, eps, st);  \
            default: return launch_ln<T, TH, IT, true, true>(cluster, flags & 4, x, y, w, b, mean, rstd, M, N, sx, sy, eps, st);  \
        }
    LN_CASES(float, 0) LN_CASES(__nv_bfloat16, 1)
#undef LN_CASE
    return -1;   // not instantiated
}

extern "C" int ln_cluster_registers(int dtype, int threads, int items, int flags) {
#define LN_CASE(T, CODE, TH, IT)                                                                                 \
    if (dtype == CODE && threads == TH && items == IT)                                                           \
        switch (flags & 3) {                                                                                     \
            case 0: return registers<T, TH, IT, false, false>();                                                 \
            case 1: return registers<T, TH, IT, true, false>();                                                  \
            case 2: return registers<T, TH, IT, false, true>();                                                  \
            default: return registers<T, TH, IT, true, true>();                                                  \
        }
    LN_CASES(float, 0) LN_CASES(__nv_bfloat16, 1)
#undef LN_CASE
    return -1;
}

// Copies n bytes (a multiple of 16) with 16-byte vectors, ITEMS per thread (256 threads per block).
extern "C" int copy16(const void* src, void* dst, int64_t n_bytes, int items, void* stream) {
    const int64_t n_vec = n_bytes / 16;
    cudaStream_t st = (cudaStream_t)stream;
    switch (items) {
        case 1: copy_kernel<float, 256, 1><<<(unsigned)((n_vec + 255) / 256), 256, 0, st>>>((const float*)src, (float*)dst, n_vec); break;
        case 2: copy_kernel<float, 256, 2><<<(unsigned)((n_vec + 511) / 512), 256, 0, st>>>((const float*)src, (float*)dst, n_vec); break;
        case 4: copy_kernel<float, 256, 4><<<(unsigned)((n_vec + 1023) / 1024), 256, 0, st>>>((const float*)src, (float*)dst, n_vec); break;
        case 8: copy_kernel<float, 256, 8><<<(unsigned)((n_vec + 2047) / 2048), 256, 0, st>>>((const float*)src, (float*)dst, n_vec); break;
        default: return -1;
    }
    return (int)cudaGetLastError();
}
