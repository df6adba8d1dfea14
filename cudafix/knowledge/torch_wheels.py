"""Which pip wheel family ships each CUDA library torch's binaries load (Linux), and which library
an unversioned CUDA API symbol comes from.

Source: the RECORD files of NVIDIA's wheels on PyPI as installed by torch 1.13.1, 2.0.1, 2.4.1,
2.5.1, 2.9.1 and 2.14.1 (``nvidia/<folder>/lib/<soname>``, or ``nvidia/cu13/lib`` for the CUDA 13
layout), and cuda-toolkit's extras (its METADATA: ``cuda-toolkit[cublas]`` requires nvidia-cublas).
A family is the wheel name without ``nvidia-`` and without the ``-cuNN`` suffix.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple

# (soname pattern, wheel family, cuda-toolkit extra)
FAMILIES: Tuple[Tuple[str, str, str], ...] = (
    (r"^libcublas(Lt)?\.so", "cublas", "cublas"),
    (r"^libcudart\.so", "cuda-runtime", "cudart"),
    (r"^libnvrtc(-builtins)?\.so", "cuda-nvrtc", "nvrtc"),
    (r"^libcupti\.so", "cuda-cupti", "cupti"),
    (r"^libcufft\.so", "cufft", "cufft"),
    (r"^libcurand\.so", "curand", "curand"),
    (r"^libcusolver\.so", "cusolver", "cusolver"),
    (r"^libcusparseLt\.so", "cusparselt", ""),
    (r"^libcusparse\.so", "cusparse", "cusparse"),
    (r"^libnvJitLink\.so", "nvjitlink", "nvjitlink"),
    (r"^(libnvToolsExt|libnvtx3interop)\.so", "nvtx", "nvtx"),
    (r"^libcudnn", "cudnn", ""),
    (r"^libnccl\.so", "nccl", ""),
    (r"^libnvshmem", "nvshmem", ""),
    (r"^libcufile", "cufile", "cufile"),
)

# Unversioned API symbols -> the soname prefix of the library that defines them (the libraries'
# own API prefixes: ncclCommRegister is NCCL's, cublasLtMatmul cuBLASLt's).
SYMBOL_LIBS: Tuple[Tuple[str, str], ...] = (
    (r"^nccl", "libnccl.so"),
    (r"^cublasLt", "libcublasLt.so"),
    (r"^cublas", "libcublas.so"),
    (r"^cudnn", "libcudnn.so"),
    (r"^cusparseLt", "libcusparseLt.so"),
    (r"^cusparse", "libcusparse.so"),
    (r"^cufft", "libcufft.so"),
    (r"^curand", "libcurand.so"),
    (r"^cusolver", "libcusolver.so"),
    (r"^nvrtc", "libnvrtc.so"),
    (r"^(__)?nvJitLink", "libnvJitLink.so"),
    (r"^cupti", "libcupti.so"),
    (r"^cuFile", "libcufile.so"),
    (r"^nvshmem", "libnvshmem"),
)


def family(soname: str) -> Optional[Tuple[str, str]]:
    """(wheel family, cuda-toolkit extra) of the wheel that ships ``soname``; None: not a wheel's."""
    for pat, fam, extra in FAMILIES:
        if re.match(pat, soname):
            return fam, extra
    return None


def wheel_family(dist: str) -> Optional[str]:
    """"cublas" for nvidia-cublas-cu12 / nvidia-cublas; None for other distributions."""
    m = re.match(r"^nvidia-(.+?)(-cu\d+)?$", re.sub(r"[-_.]+", "-", dist).lower())
    if not m:
        return None
    fams = {f for _p, f, _e in FAMILIES}
    return m.group(1) if m.group(1) in fams else None


def symbol_library(symbol: str) -> Optional[str]:
    """The soname prefix of the library an unversioned CUDA API symbol comes from."""
    for pat, lib in SYMBOL_LIBS:
        if re.match(pat, symbol):
            return lib
    return None
