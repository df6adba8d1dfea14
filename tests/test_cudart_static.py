"""The version of a statically linked CUDA runtime (nvcc's default -cudart static), read from the
module, and ext-cuda-major's verdict on it.

Truth, independent of cudafix: the toolkit that built the module (`nvcc --version`), and the
runtime itself: a program linked with the same libcudart_static.a calls cudaRuntimeGetVersion
(which needs no GPU and no driver) and prints what it returns; for the stripped libnvjpeg of a
real torchvision wheel, its SONAME's CUDA major.  Where the version cannot be read (a synthetic,
patched copy), the rule says unknown, never ok.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from cudafix.model.findings import OK, PROBLEM, UNKNOWN
from cudafix.model.snapshot import GPU, PythonDist, Snapshot, TorchBuild
from cudafix.probes.binfmt.cudart_static import static_cudart_version
from cudafix.probes.pyenv import extensions as pext
from cudafix.rules import extensions as rext
from tests import extbuild
from tests.conftest import require

VENVS = pathlib.Path.home() / ".cache" / "cudafix-venvs"
PROG = """#include <stdio.h>
int cudaRuntimeGetVersion(int *v);
int main(void) { int v = -1; int rc = cudaRuntimeGetVersion(&v); printf("%d %d\\n", rc, v); return rc; }
"""


def _nvcc() -> str:
    n = extbuild.nvcc_path()
    require(n is not None, "nvcc (/usr/local/cuda-13.0)")
    return n


def _nvcc_release() -> int:
    out = subprocess.run([_nvcc(), "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10


@pytest.fixture(scope="module")
def static_module():
    return extbuild.build_kernels("cfx_static90", ["-gencode=arch=compute_90,code=sm_90"], cudart="static")


def _runtime_says(static_lib: pathlib.Path, tmp_path: pathlib.Path) -> tuple:
    """(the program linked with ``static_lib``, what cudaRuntimeGetVersion returned when it ran)."""
    require(shutil.which("gcc") is not None, "gcc")
    src = tmp_path / "v.c"
    src.write_text(PROG)
    exe = tmp_path / "v"
    subprocess.run(["gcc", "-o", str(exe), str(src), str(static_lib), "-ldl", "-lpthread", "-lrt"], check=True)
    rc, v = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert rc == "0"
    return exe, int(v)


def test_nvcc_built_module_reads_the_toolkits_version(static_module):
    facts = pext.examine(static_module)
    assert facts["cudart_linkage"] == "static"
    assert facts["cudart_version"] == _nvcc_release()
    assert "cudart" not in facts["unknown"]


@pytest.mark.parametrize("where", ["toolkit", "wheel"])
def test_version_is_what_the_runtime_itself_returns(tmp_path, where):
    if where == "toolkit":
        lib = pathlib.Path(_nvcc()).resolve().parent.parent / "lib64" / "libcudart_static.a"
    else:  # torch-cu's nvidia-cuda-runtime wheel ships its own static runtime
        found = sorted((VENVS / "torch-cu").glob("lib/python3*/site-packages/nvidia/*/lib/libcudart_static.a"))
        require(found, "torch-cu venv with nvidia/*/lib/libcudart_static.a")
        lib = found[0]
    require(lib.exists(), str(lib))
    exe, truth = _runtime_says(lib, tmp_path)
    assert static_cudart_version(str(exe))[0] == truth


def test_stripped_module_is_read_by_the_functions_bytes(static_module, tmp_path):
    require(shutil.which("strip") is not None, "strip (binutils)")
    stripped = tmp_path / "libcfx_stripped.so"
    shutil.copy(static_module, str(stripped))
    subprocess.run(["strip", str(stripped)], check=True)
    assert "symtab" not in subprocess.run(["readelf", "-S", str(stripped)], capture_output=True, text=True).stdout
    assert static_cudart_version(str(stripped))[0] == _nvcc_release()


def test_torchvisions_stripped_nvjpeg():
    # a real wheel's stripped vendored library: libnvjpeg of CUDA 13 (its SONAME) carries a CUDA 13 runtime
    found = sorted((VENVS / "torchvision-cu").glob("lib/python3*/site-packages/torchvision.libs/libnvjpeg*.so*"))
    require(found, "torchvision-cu venv with torchvision.libs/libnvjpeg*")
    dyn = subprocess.run(["readelf", "-d", str(found[0])], capture_output=True, text=True).stdout
    soname_major = int(re.search(r"Library soname: \[libnvjpeg\.so\.(\d+)\]", dyn).group(1))
    ver, why = static_cudart_version(str(found[0]))
    assert ver is not None and ver // 1000 == soname_major, why


def test_unreadable_version_is_unknown_never_ok(static_module, tmp_path):
    # synthetic: a stripped copy whose version function's bytes were changed (never run), so
    # neither .symtab nor the byte signature can find it
    d = tmp_path / "ext"
    d.mkdir()
    mod = d / "libcfx_patched.so"
    data = bytearray(pathlib.Path(static_module).read_bytes())
    sig = b"\x48\x85\xff\x74\x0b\xc7\x07"
    i = data.find(sig)
    assert i > 0
    while i >= 0:  # every copy of it
        data[i + 11:i + 14] = b"\x90\x90\x90"
        i = data.find(sig, i + 1)
    mod.write_bytes(bytes(data))
    subprocess.run(["strip", str(mod)], check=True)
    ver, why = static_cudart_version(str(mod))
    assert ver is None and "not found" in why
    facts = pext.examine(str(mod))
    assert facts["cudart_linkage"] == "static" and facts["cudart_version"] is None and "cudart" in facts["unknown"]
    runs = _rule(_snap(str(d), driver_cuda=13000))
    assert [o.verdict for o in runs] == [UNKNOWN]


def _snap(ext_dir: str, driver_cuda: int, torch_cuda: str = "13.0") -> Snapshot:
    snap = Snapshot()
    snap.gpus.gpus = [GPU(index=0, name="NVIDIA H200", compute_capability="9.0", uuid="GPU-x")]
    snap.driver.cuda_version = driver_cuda
    snap.driver.found_via["cuda_version"] = "stated by the test"
    snap.extensions = pext.probe_extensions([ext_dir], {})
    snap.python.executable = sys.executable
    tag = "+cu" + torch_cuda.replace(".", "")
    snap.torch = [TorchBuild(dist=PythonDist(name="torch", version="2.14.1" + tag), version="2.14.1" + tag, cuda=torch_cuda)]
    return snap


def _rule(snap):
    return [o for o in rext.check_ext_cuda_major(snap)]


def test_rule_static_runtime_ok_problem_by_driver(static_module, tmp_path):
    d = tmp_path / "ext"
    d.mkdir()
    shutil.copy(static_module, str(d / os.path.basename(static_module)))
    v = _nvcc_release()
    (o,) = _rule(_snap(str(d), driver_cuda=v))
    assert o.verdict == OK and "static CUDA %d.%d" % (v // 1000, v % 1000 // 10) in o.message
    # a driver of CUDA 12.4 (R550) beside torch cu124, which runs there: the module alone fails
    (o,) = _rule(_snap(str(d), driver_cuda=12040, torch_cuda="12.4"))
    assert o.verdict == PROBLEM and o.severity == "error"
    assert "insufficient for CUDA runtime version" in o.message
    # the same driver beside torch cu130: one cause, torch's driver-too-old, with the module as evidence
    s = _snap(str(d), driver_cuda=12040)
    (o,) = _rule(s)
    assert o.verdict == OK and "driver-too-old" in o.message
    from cudafix.rules import driver as rdriver
    (too_old,) = [x for x in rdriver.check_driver_too_old(s) if x.verdict == PROBLEM]
    assert any(os.path.basename(static_module) in e and "fails on this driver as well" in e for e in too_old.evidence)
