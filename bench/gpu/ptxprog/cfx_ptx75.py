"""A PTX-only CUDA extension for the `verify --first-run` proof (bench/gpu/first_run.sh).

`libcfx_ptx75.so` beside this file: tests/ext_src/kernels.cu with 300 kernels, built by
tests/extbuild.py's build_kernels with `-gencode=arch=compute_75,code=compute_75` (PTX only, no
SASS: every GPU JIT-compiles it) and a shared libcudart.so.13 (torch's, already loaded).
"""

import ctypes
import os

_LIB = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "libcfx_ptx75.so"), mode=ctypes.RTLD_GLOBAL)
_LIB.cudafix_test_launch.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_int]


def run(t) -> int:
    """Launch every kernel once on a float32 CUDA tensor (in place); returns the CUDA error code."""
    return _LIB.cudafix_test_launch(ctypes.c_void_p(t.data_ptr()), t.numel(), -1)


def nkernels() -> int:
    return _LIB.cudafix_test_nkernels()
