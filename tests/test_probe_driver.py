"""Driver probe: pure parsers on recorded texts, I/O on injectable roots, and this machine (no driver)."""

from __future__ import annotations

import ctypes.util
import os
import pathlib

from cudafix.probes.machine import driver
from tests.conftest import FIXTURES

PROBE = FIXTURES / "probe"


def _text(name: str) -> str:
    return (PROBE / name).read_text()


def test_parse_open_kernel_module_recorded_on_h200():
    text = _text("h200_proc_driver_nvidia_version.txt")
    assert driver.parse_proc_driver_version(text) == "580.159.04"
    assert driver.kernel_module_flavor(text) == "open"


def test_parse_proprietary_kernel_module_from_public_report():
    text = _text("truenas_proc_driver_nvidia_version.txt")
    assert driver.parse_proc_driver_version(text) == "580.173.02"
    assert driver.kernel_module_flavor(text) == "proprietary"


def test_parse_proc_garbage():
    assert driver.parse_proc_driver_version("") is None
    assert driver.parse_proc_driver_version("GCC version:  gcc version 12\n") is None
    assert driver.parse_proc_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  \n") is None
    assert driver.kernel_module_flavor("nothing") is None


def test_parse_sys_module_version():
    assert driver.parse_sys_module_version(_text("h200_sys_module_nvidia_version.txt")) == "580.159.04"
    assert driver.parse_sys_module_version("\x00\xff garbage") is None
    assert driver.parse_sys_module_version("") is None


def test_parse_lib_version():
    assert driver.parse_lib_version("/usr/local/nvidia/lib64/libcuda.so.580.159.04", "libcuda") == "580.159.04"
    assert driver.parse_lib_version("libcuda.so.470.57.02", "libcuda") == "470.57.02"
    assert driver.parse_lib_version("libnvidia-ml.so.580.95.05", "libnvidia-ml") == "580.95.05"
    assert driver.parse_lib_version("libcuda.so.1", "libcuda") is None  # a soname, not a version
    assert driver.parse_lib_version("libcuda.so", "libcuda") is None
    assert driver.parse_lib_version("libcuda.so.1.1", "libcuda") is None  # WSL's stub naming
    assert driver.parse_lib_version("libcudart.so.13.0.96", "libcuda") is None


def _root_with(tmp_path: pathlib.Path, sys_text=None, proc_text=None) -> str:
    if sys_text is not None:
        p = tmp_path / "sys/module/nvidia"
        p.mkdir(parents=True)
        (p / "version").write_text(sys_text)
    if proc_text is not None:
        p = tmp_path / "proc/driver/nvidia"
        p.mkdir(parents=True)
        (p / "version").write_text(proc_text)
    return str(tmp_path)


def test_read_kernel_version_prefers_sys(tmp_path):
    root = _root_with(tmp_path, _text("h200_sys_module_nvidia_version.txt"), _text("h200_proc_driver_nvidia_version.txt"))
    ver, via, flavor, why = driver.read_kernel_version(root)
    assert (ver, via, flavor, why) == ("580.159.04", "/sys/module/nvidia/version", "open", None)


def test_read_kernel_version_falls_back_to_proc(tmp_path):
    root = _root_with(tmp_path, "garbage\n", _text("truenas_proc_driver_nvidia_version.txt"))
    ver, via, flavor, why = driver.read_kernel_version(root)
    assert (ver, via, flavor) == ("580.173.02", "/proc/driver/nvidia/version", "proprietary")


def test_read_kernel_version_none(tmp_path):
    ver, via, flavor, why = driver.read_kernel_version(str(tmp_path))
    assert ver is None and via is None
    assert "no NVIDIA kernel module" in why and "does not exist" in why


def test_wsl_detected_by_its_libcuda(tmp_path):
    lib = tmp_path / "usr/lib/wsl/lib"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.1").write_bytes(b"")
    assert driver.detect_wsl(str(tmp_path)) == (True, driver.WSL_LIBCUDA)
    assert driver.detect_wsl(str(tmp_path / "nothing")) == (False, None)


def test_cudriverget_version_guards_missing_symbol_and_bad_file(tmp_path):
    libc = ctypes.util.find_library("c")
    v, why = driver.query_driver_cuda_version(libc)
    assert v is None and "no cuDriverGetVersion symbol" in why
    bogus = tmp_path / "libcuda.so.580.95.05"
    bogus.write_bytes(b"not an ELF file")
    v, why = driver.query_driver_cuda_version(str(bogus))
    assert v is None and why.startswith("cannot load")


def test_probe_driver_fake_root_with_unloadable_libcuda(tmp_path, monkeypatch):
    """A driver whose libcuda file can't be loaded: versions from files, cuda_version unknown.
    The loader simulation (which reads under the root too) skips a truncated ELF as ld.so does;
    this is the plain directory search the driver probe falls back to when the simulation fails."""
    from cudafix.probes.loader import libraries

    def broken(*_a, **_k):
        raise RuntimeError("simulation unavailable")

    monkeypatch.setattr(libraries, "locate_libcuda", broken)
    root = _root_with(tmp_path, _text("h200_sys_module_nvidia_version.txt"), _text("h200_proc_driver_nvidia_version.txt"))
    lib = tmp_path / "usr/local/nvidia/lib64"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.580.95.05").write_bytes(b"\x7fELF truncated")
    os.symlink("libcuda.so.580.95.05", str(lib / "libcuda.so.1"))
    (lib / "libnvidia-ml.so.580.159.04").write_bytes(b"")
    os.symlink("libnvidia-ml.so.580.159.04", str(lib / "libnvidia-ml.so.1"))
    info = driver.probe_driver(env={}, root=root)
    assert info.kernel_version == "580.159.04"
    assert info.libcuda_path == str(lib / "libcuda.so.580.95.05")
    assert info.libcuda_version == "580.95.05"  # differs from the kernel module: a rule's business
    assert info.nvml_version == "580.159.04"
    assert info.cuda_version is None and "cannot load" in info.unknown["cuda_version"]
    assert "fallback search" in info.found_via["libcuda_path"]


def test_probe_driver_on_this_machine_reports_no_driver():
    info = driver.probe_driver()
    if os.path.exists("/sys/module/nvidia/version") or os.path.exists("/proc/driver/nvidia/version"):
        assert info.kernel_version
        return
    assert info.kernel_version is None
    assert "no NVIDIA kernel module" in info.unknown["kernel_version"]
    assert info.cuda_version is None and "cuda_version" in info.unknown
    assert info.wsl is False
