"""Which installed packages carry the CUDA stack, and how their names and versions say which CUDA.

Sources: the package indexes themselves — NVIDIA's CUDA wheels on PyPI (https://pypi.org/user/nvidia/:
``nvidia-<lib>-cu11`` / ``-cu12`` carry the CUDA major in the name; the CUDA 13 layout drops the
suffix and, for the runtime-versioned libraries below, uses the CUDA version as the wheel version,
e.g. nvidia-cuda-runtime 13.0.96, cuda-toolkit 13.0.2 in torch 2.11+cu130's requirements), and
conda's (https://anaconda.org/nvidia, https://anaconda.org/conda-forge: ``cudatoolkit`` before CUDA
12, ``cuda-version`` / ``cuda-cudart`` / ``cuda-runtime`` since; ``pytorch-cuda`` is the pytorch
channel's CUDA selector, https://pytorch.org/get-started/previous-versions/).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple

# pip: "nvidia-cublas-cu12" -> ("nvidia-cublas", 12): the library family and its CUDA major
PIP_CUDA_SUFFIX = re.compile(r"^(.*)-cu(\d+)$")

# Unsuffixed CUDA-13-layout wheels whose version is the CUDA version (nvidia-cufft etc. are not).
PIP_CUDA_VERSIONED = ("nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cublas", "nvidia-nvjitlink",
                      "nvidia-cuda-cupti", "nvidia-nvtx", "cuda-toolkit")

# conda packages whose version is the CUDA runtime's version.
CONDA_CUDA_RUNTIME = ("cudatoolkit", "cuda-version", "cuda-cudart", "cuda-runtime", "pytorch-cuda")

# conda packages that say something about the CUDA stack (exact names + prefixes).
CONDA_CUDA_RELATED_NAMES = frozenset((
    "cudatoolkit", "cudatoolkit-dev", "cudnn", "nccl", "cutensor", "magma", "magma-cuda",
    "pytorch", "pytorch-cuda", "pytorch-mutex", "pytorch-gpu", "pytorch-cpu", "libtorch",
    "torchvision", "torchaudio", "cpuonly", "triton", "cupy", "nvidia-ml-py", "__cuda",
))
CONDA_CUDA_RELATED_PREFIXES = ("cuda-", "libcu", "libnv", "nvidia-")


def normalize(name: str) -> str:
    """PEP 503 normalisation: "Nvidia_CUBLAS" -> "nvidia-cublas"."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_cuda_family(name: str) -> Optional[Tuple[str, int]]:
    """("nvidia-cublas", 12) for nvidia-cublas-cu12; None when the name carries no CUDA major."""
    m = PIP_CUDA_SUFFIX.match(normalize(name))
    return (m.group(1), int(m.group(2))) if m else None


def is_cuda_related_conda(name: str) -> bool:
    return name in CONDA_CUDA_RELATED_NAMES or name.startswith(CONDA_CUDA_RELATED_PREFIXES)
