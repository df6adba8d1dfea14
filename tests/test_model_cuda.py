"""model/cuda.py against CUDA's own files and PyTorch's published wheel tags."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cudafix.model import cuda
from tests.conftest import require

TOOLKIT = Path("/usr/local/cuda-13.0")


def test_the_integer_of_a_real_cuda_h_is_its_toolkit_version():
    require((TOOLKIT / "include" / "cuda.h").exists(), "CUDA 13.0 toolkit at %s" % TOOLKIT)
    v = int(re.search(r"#define CUDA_VERSION (\d+)", (TOOLKIT / "include" / "cuda.h").read_text()).group(1))
    nvcc = subprocess.run([str(TOOLKIT / "bin" / "nvcc"), "--version"], capture_output=True, text=True, timeout=60).stdout
    release = re.search(r"release (\d+\.\d+)", nvcc).group(1)  # "Cuda compilation tools, release 13.0, ..."
    assert cuda.version_text(v) == ".".join(release.split(".")[:2])
    assert cuda.major_minor(v) == tuple(int(x) for x in release.split(".")[:2])
    assert cuda.major(v) == int(release.split(".")[0])


@pytest.mark.parametrize("cuda_version, wheel_tag", [  # PyTorch's index: download.pytorch.org/whl/<tag>
    ("11.8", "cu118"), ("12.1", "cu121"), ("12.6", "cu126"), ("13.0", "cu130"), (None, "cpu")])
def test_tags(cuda_version, wheel_tag):
    assert cuda.tag(cuda_version) == wheel_tag
    if cuda_version:
        assert cuda.tag_of(tuple(int(x) for x in cuda_version.split("."))) == wheel_tag


def test_not_a_cuda_number():
    with pytest.raises(ValueError):
        cuda.version_text(0)
    assert cuda.version_text_or_none(0) is None and cuda.version_text_or_none(None) is None
