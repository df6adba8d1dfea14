"""NVML started on a second thread while pynvml is imported (cudafix/probes/machine/nvml.py, issue 23).

Where no NVIDIA driver exists (CI, this machine), on a real shared object built here from
tests/fixtures/nvml/fake_nvml.c (synthetic: NVML's signatures and documented reference count,
one GPU, a 40 ms start) found under the name pynvml loads: the GPUs are the ones pynvml itself
reads from that library, identical with and without the thread; the thread's nvmlInit_v2 ran off
the main thread; every initialization is undone (the count is back at 0 and no shutdown found it
at 0) and no thread is left, after ``read_nvml_gpus`` and after ``keep_nvml`` plus
``nvml.shutdown``; without a library the reason is pynvml's own.  On a real GPU (marked ``gpu``):
the same against the real driver, and the GPUs against nvidia-smi.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import require

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(REPO, "tests", "fixtures", "nvml", "fake_nvml.c")

# Runs in a fresh process (the library is found through LD_LIBRARY_PATH, read at start):
# argv[1] a driver marker path that exists, argv[2] how: read / keep / serial / pynvml.
STEP = r"""
import ctypes, json, os, sys, time
from cudafix.probes.machine import gpus, nvml

def threads():
    # the thread has left NVML once nvml.shutdown returns; it may take a moment more to end
    for _ in range(200):
        n = len(os.listdir("/proc/self/task"))
        if n == 1:
            break
        time.sleep(0.005)
    return n

nvml.DRIVER_MARKERS = (sys.argv[1],)
how = sys.argv[2]
out = {}
if how == "pynvml":  # the truth: pynvml's own calls, no cudafix
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    name, uuid = pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetUUID(h)
    out["gpus"] = [{"name": name.decode() if isinstance(name, bytes) else name,
                    "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                    "compute_capability": "%d.%d" % tuple(pynvml.nvmlDeviceGetCudaComputeCapability(h))}]
    pynvml.nvmlShutdown()
else:
    if how == "serial":
        nvml.begin = lambda: None
    got, why = gpus.read_nvml_gpus(keep_nvml=how == "keep")
    if how == "keep":
        out["threads_kept"] = threads()
        nvml.shutdown()
    out["why"] = why
    out["gpus"] = [{k: getattr(g, k) for k in ("name", "uuid", "compute_capability", "memory_mib", "found_via")}
                   for g in got or []]
out["threads"] = threads()
try:
    lib = ctypes.CDLL("libnvidia-ml.so.1")
except OSError:
    lib = None
if lib is not None and hasattr(lib, "fake_state"):
    st = (ctypes.c_int * 5)()
    lib.fake_state(st)
    out["state"] = dict(zip(("refcount", "inits", "off_main_thread", "shutdowns", "unbalanced"), st))
elif lib is not None:  # the real NVML: once every init is undone, a query says NVML_ERROR_UNINITIALIZED (1)
    n = ctypes.c_uint()
    out["count_after"] = lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def fake_lib_dir(tmp_path_factory):
    require(shutil.which("cc") is not None, "a C compiler (cc)")
    d = tmp_path_factory.mktemp("fake-nvml")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(d / "libnvidia-ml.so.1"), SOURCE, "-lpthread"], check=True, timeout=120)
    return d


def _step(tmp_path, how, lib_dir=None, marker=None):
    if marker is None:
        marker = str(tmp_path / "driver")
        os.makedirs(marker, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=REPO, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("LD_LIBRARY_PATH", None)
    if lib_dir is not None:
        env["LD_LIBRARY_PATH"] = str(lib_dir)
    p = subprocess.run([sys.executable, "-c", STEP, marker, how], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_thread_starts_nvml_and_every_start_is_undone(tmp_path, fake_lib_dir):
    truth = _step(tmp_path, "pynvml", fake_lib_dir)["gpus"]
    got = _step(tmp_path, "read", fake_lib_dir)
    assert got["why"] is None
    assert [{k: g[k] for k in ("name", "uuid", "compute_capability")} for g in got["gpus"]] == truth
    assert got["state"] == {"refcount": 0, "inits": 2, "off_main_thread": 1, "shutdowns": 2, "unbalanced": 0}
    assert got["threads"] == 1
    # the same GPUs as without the thread: only pynvml's own start
    serial = _step(tmp_path, "serial", fake_lib_dir)
    assert serial["gpus"] == got["gpus"] and serial["why"] is None
    assert serial["state"] == {"refcount": 0, "inits": 1, "off_main_thread": 0, "shutdowns": 1, "unbalanced": 0}


def test_kept_nvml_is_shut_down_by_the_caller(tmp_path, fake_lib_dir):
    got = _step(tmp_path, "keep", fake_lib_dir)
    assert got["gpus"] and got["why"] is None
    assert got["state"] == {"refcount": 0, "inits": 2, "off_main_thread": 1, "shutdowns": 2, "unbalanced": 0}
    assert got["threads_kept"] == 1 and got["threads"] == 1


def test_without_a_library_the_reason_is_pynvmls(tmp_path):
    import ctypes

    import pynvml

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        pass
    else:
        pytest.skip("this machine has a libnvidia-ml.so.1: the case of none cannot be made here")

    got = _step(tmp_path, "read")
    assert got["gpus"] == [] and got["threads"] == 1
    assert got["why"] == "nvmlInit failed: %s" % pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)


@pytest.mark.gpu
def test_real_driver(tmp_path):
    smi = shutil.which("nvidia-smi")
    if smi is None or not os.path.exists("/proc/driver/nvidia"):
        pytest.skip("no NVIDIA driver here")
    rows = subprocess.run([smi, "--query-gpu=name,uuid,compute_cap", "--format=csv,noheader"], capture_output=True,
                          text=True, timeout=60, check=True).stdout
    truth = [dict(zip(("name", "uuid", "compute_capability"), (c.strip() for c in line.split(",")))) for line in rows.splitlines()]
    got = _step(tmp_path, "read", marker="/proc/driver/nvidia")
    assert [{k: g[k] for k in ("name", "uuid", "compute_capability")} for g in got["gpus"]] == truth
    assert got["count_after"] == 1  # NVML_ERROR_UNINITIALIZED: every start undone
    serial = _step(tmp_path, "serial", marker="/proc/driver/nvidia")
    assert serial["gpus"] == got["gpus"]
    # the real NVML may leave a thread of its own (the H200's did): none of cudafix's is left beside it
    alone = _step(tmp_path, "pynvml", marker="/proc/driver/nvidia")["threads"]
    assert got["threads"] == serial["threads"] == alone
    kept = _step(tmp_path, "keep", marker="/proc/driver/nvidia")
    assert kept["gpus"] == got["gpus"] and kept["count_after"] == 1 and kept["threads"] == alone
