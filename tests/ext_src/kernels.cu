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

template <int K>
struct Launch {
    static int run(float* x, long n, int which) {
        if (which == K || which < 0) scale_k<K><<<(unsigned)((n + 255) / 256), 256>>>(x, n);
        return Launch<K - 1>::run(x, n, which);
    }
};
template <>
struct Launch<-1> {
    static int run(float*, long, int) { return (int)cudaGetLastError(); }
};

// which < 0: every kernel; else only kernel `which`.
extern "C" int cudafix_test_launch(float* x, long n, int which) { return Launch<NKERNELS - 1>::run(x, n, which); }
extern "C" int cudafix_test_nkernels(void) { return NKERNELS; }
