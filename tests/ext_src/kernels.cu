// Tiny CUDA kernels for cudafix's extension tests (tests/extbuild.py builds them with nvcc).
// NKERNELS distinct kernels (template instances), so a PTX-only build has that many to JIT.
#ifndef NKERNELS
#define NKERNELS 2
#endif
#include <cuda_runtime.h>

template <int K>
__global__ void scale_k(float* x, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * (float)(K % 7 + 1) + sinf(x[i] + (float)K);
}

// Kernels B .. B+N-1, split in halves: instantiation depth log2(N), not N (nvcc caps it at ~200).
template <int B, int N>
struct Range {
    static void run(float* x, long n, int which) {
        Range<B, N / 2>::run(x, n, which);
        Range<B + N / 2, N - N / 2>::run(x, n, which);
    }
};
template <int B>
struct Range<B, 1> {
    static void run(float* x, long n, int which) {
        if (which == B || which < 0) scale_k<B><<<(unsigned)((n + 255) / 256), 256>>>(x, n);
    }
};

// which < 0: every kernel; else only kernel `which`.
extern "C" int cudafix_test_launch(float* x, long n, int which) {
    Range<0, NKERNELS>::run(x, n, which);
    return (int)cudaGetLastError();
}
extern "C" int cudafix_test_nkernels(void) { return NKERNELS; }
