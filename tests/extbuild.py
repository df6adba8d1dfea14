"""Build real CUDA extension modules for the tests (and the GPU run in bench/gpu_warm.py).

Plain nvcc + g++, as a setup.py or torch.utils.cpp_extension build does it: kernels.cu compiled
by nvcc with the requested -gencode list (and -cudart shared|static), torch_ext.cpp compiled by
g++ against a venv's torch headers and linked against that torch's libraries.  Artifacts are
cached under $CUDAFIX_TEST_EXT (default ~/.cache/cudafix-test-ext) keyed by a hash of the
sources, flags, compilers and torch headers used, so a rebuild happens only when one changes.
Stdlib only: runs with any Python 3.8+.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from typing import List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "ext_src")
DEFAULT_NVCC = "/usr/local/cuda-13.0/bin/nvcc"


def cache_root() -> str:
    return os.environ.get("CUDAFIX_TEST_EXT") or os.path.join(os.path.expanduser("~"), ".cache", "cudafix-test-ext")


def nvcc_path() -> Optional[str]:
    for c in (os.environ.get("CUDAFIX_NVCC"), DEFAULT_NVCC, shutil.which("nvcc")):
        if c and os.access(c, os.X_OK):
            return c
    return None


def gencode_for_arch_list(arch_list: str) -> List[str]:
    """TORCH_CUDA_ARCH_LIST ("7.5+PTX;8.0") -> nvcc -gencode flags, as torch's cpp_extension maps it."""
    flags: List[str] = []
    for item in arch_list.replace(",", ";").replace(" ", ";").split(";"):
        if not item:
            continue
        ptx = item.endswith("+PTX")
        num = item[:-4] if ptx else item
        n = num.replace(".", "")
        flags.append("-gencode=arch=compute_%s,code=sm_%s" % (n, n))
        if ptx:
            flags.append("-gencode=arch=compute_%s,code=compute_%s" % (n, n))
    return flags


def _key(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _src_hash() -> str:
    h = hashlib.sha256()
    for n in sorted(os.listdir(SRC)):
        with open(os.path.join(SRC, n), "rb") as fh:
            h.update(n.encode() + b"\0" + fh.read())
    return h.hexdigest()


@contextlib.contextmanager
def _locked(out_dir: str):
    """One builder per artifact: pytest-xdist workers (and concurrent sessions) sharing the cache
    wait for the first one's build instead of racing it (the loser's os.replace would fail on the
    winner's non-empty directory)."""
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    with open(out_dir + ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: Sequence[str], cwd: str) -> None:
    proc = subprocess.run(list(cmd), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise RuntimeError("build failed (%d): %s\n%s" % (proc.returncode, " ".join(cmd), proc.stdout.decode(errors="replace")[-4000:]))


def build_kernels(name: str, gencode: Sequence[str], cudart: str = "shared", nkernels: int = 2,
                  extra: Sequence[str] = (), nvcc: Optional[str] = None) -> str:
    """A plain CUDA shared library (no torch): ``lib<name>.so`` with ``nkernels`` kernels."""
    nvcc = nvcc or nvcc_path()
    if nvcc is None:
        raise RuntimeError("nvcc not found (set CUDAFIX_NVCC)")
    key = _key(_src_hash(), name, list(gencode), cudart, nkernels, list(extra), nvcc, os.path.getmtime(nvcc))
    out_dir = os.path.join(cache_root(), "k-" + key)
    out = os.path.join(out_dir, "lib%s.so" % name)
    if os.path.exists(out):
        return out
    with _locked(out_dir):
        if os.path.exists(out):
            return out
        tmp = out_dir + ".tmp%d" % os.getpid()
        os.makedirs(tmp, exist_ok=True)
        _run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-O2", "-cudart", cudart, "-DNKERNELS=%d" % nkernels]
             + list(gencode) + list(extra) + ["-o", "lib%s.so" % name, os.path.join(SRC, "kernels.cu")], tmp)
        os.replace(tmp, out_dir) if not os.path.exists(out_dir) else shutil.rmtree(tmp)
    return out


def torch_info(python: str) -> dict:
    """Include/lib dirs and C++ ABI of the torch a venv's python would import (headers only: the
    query imports torch.utils.cpp_extension's helpers, not CUDA)."""
    import json

    code = ("import json, torch, sysconfig, os; from torch.utils import cpp_extension as c;"
            "print(json.dumps({'include': c.include_paths(), 'lib': os.path.join(os.path.dirname(torch.__file__), 'lib'),"
            "'abi': int(torch._C._GLIBCXX_USE_CXX11_ABI), 'version': torch.__version__,"
            "'pyinc': sysconfig.get_paths()['include'], 'suffix': sysconfig.get_config_var('EXT_SUFFIX')}))")
    env = dict(os.environ, CUDAFIX_DISABLE="1")
    out = subprocess.run([python, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=True)
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


def build_torch_ext(name: str, python: str, gencode: Sequence[str], nkernels: int = 2,
                    nvcc: Optional[str] = None, cxx: str = "g++") -> str:
    """A torch extension module ``<name><EXT_SUFFIX>`` built against ``python``'s torch, like
    cpp_extension.CUDAExtension: nvcc for the kernels, g++ for the binding, shared libcudart."""
    nvcc = nvcc or nvcc_path()
    if nvcc is None:
        raise RuntimeError("nvcc not found (set CUDAFIX_NVCC)")
    ti = torch_info(python)
    key = _key(_src_hash(), name, list(gencode), nkernels, nvcc, ti["version"], ti["include"], ti["abi"], ti["suffix"])
    out_dir = os.path.join(cache_root(), "t-" + key)
    out = os.path.join(out_dir, name + ti["suffix"])
    if os.path.exists(out):
        return out
    with _locked(out_dir):
        if not os.path.exists(out):
            _build_torch_ext(name, ti, gencode, nkernels, nvcc, cxx, out_dir)
    return out


def _build_torch_ext(name: str, ti: dict, gencode: Sequence[str], nkernels: int, nvcc: str, cxx: str,
                     out_dir: str) -> None:
    tmp = out_dir + ".tmp%d" % os.getpid()
    os.makedirs(tmp, exist_ok=True)
    cuda_home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    _run([nvcc, "-c", "-Xcompiler", "-fPIC", "-O2", "-DNKERNELS=%d" % nkernels] + list(gencode)
         + ["-o", "kernels.o", os.path.join(SRC, "kernels.cu")], tmp)
    inc: List[str] = []
    for d in ti["include"] + [ti["pyinc"]]:
        inc += ["-isystem", d]
    _run([cxx, "-c", "-fPIC", "-O1", "-std=c++20", "-D_GLIBCXX_USE_CXX11_ABI=%d" % ti["abi"],
          "-DTORCH_EXTENSION_NAME=%s" % name, "-DTORCH_API_INCLUDE_EXTENSION_H"] + inc
         + ["-o", "torch_ext.o", os.path.join(SRC, "torch_ext.cpp")], tmp)
    _run([cxx, "-shared", "-o", name + ti["suffix"], "torch_ext.o", "kernels.o", "-L" + ti["lib"],
          "-lc10", "-lc10_cuda", "-ltorch", "-ltorch_cpu", "-ltorch_cuda", "-ltorch_python",
          "-L" + os.path.join(cuda_home, "lib64"), "-lcudart"], tmp)
    os.replace(tmp, out_dir) if not os.path.exists(out_dir) else shutil.rmtree(tmp)


if __name__ == "__main__":  # python tests/extbuild.py PYTHON NAME ARCH_LIST [NKERNELS]
    print(build_torch_ext(sys.argv[2], sys.argv[1], gencode_for_arch_list(sys.argv[3]),
                          int(sys.argv[4]) if len(sys.argv) > 4 else 2))
