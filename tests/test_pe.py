"""cudafix.probes.binfmt.pe against binutils' objdump, llvm-readobj, pefile and cuobjdump, on every DLL and
.pyd of real Windows wheels (torch 2.13.0 CPU, nvidia-cuda-runtime-cu12, nvidia-cuda-nvrtc-cu12,
cupy-cuda12x; tests/fetch_win_wheels.sh)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from cudafix.probes.binfmt.fatbin import scan_fatbin_uncached
from cudafix.probes.binfmt.pe import nvidia_driver_version, read_pe
from tests.conftest import require
from tests.test_fatbin import as_cuobjdump_elf, cuobjdump, cuobjdump_list  # noqa: F401 (fixture)
from tests.wintree import pe_files, pefile_wheel

WHEELS = ("torch-2.13.0", "nvidia_cuda_runtime_cu12", "nvidia_cuda_nvrtc_cu12", "cupy_cuda12x", "pywin32-312")


@pytest.fixture(scope="module")
def files():
    found = pe_files()
    for w in WHEELS:
        require(any(w in str(p) for p in found), "no DLL/.pyd of the %s wheel" % w)
    return found


def tool(name):
    path = shutil.which(name)
    require(path, "%s not installed" % name)
    return path


def test_imports_and_sections_match_objdump(files):
    objdump = tool("objdump")
    assert len(files) >= 130  # measured 133: 78 in torch 2.13.0 + cudart 12.9.79 + nvrtc 12.9.86 + cupy 14.2.0, 55 in pywin32 312
    mismatches = []
    for f in files:
        pe, why = read_pe(str(f))
        assert pe is not None, (f, why)
        out = subprocess.run([objdump, "-p", str(f)], capture_output=True, text=True, timeout=300).stdout
        head = subprocess.run([objdump, "-h", str(f)], capture_output=True, text=True, timeout=60).stdout
        want_imports = re.findall(r"^\tDLL Name: (.*)$", out, re.M)
        want_sections = re.findall(r"^\s+\d+ (\S+)\s+[0-9a-f]{8}\s", head, re.M)
        if pe.imports != want_imports or [s.name for s in pe.sections] != want_sections:
            mismatches.append((str(f), pe.imports, want_imports))
        assert not pe.notes, (f, pe.notes)
    assert mismatches == []


def test_delay_imports_match_llvm_readobj(files):
    readobj = tool("llvm-readobj")
    delayed = [f for f in files if read_pe(str(f))[0].delay_imports]
    assert len(delayed) >= 3  # pywin32 312: win32api, win32evtlog, propsys (the CUDA wheels have none)
    for f in files:
        out = subprocess.run([readobj, "--coff-imports", str(f)], capture_output=True, text=True, timeout=120).stdout
        pe, _ = read_pe(str(f))
        assert pe.delay_imports == re.findall(r"DelayImport \{\s*\n\s*Name: (\S+)", out), f
        assert pe.imports == re.findall(r"^Import \{\s*\n\s*Name: (\S+)", out, re.M), f


_PEFILE = r"""
import json, sys, pefile
out = {}
for path in sys.argv[1:]:
    pe = pefile.PE(path, fast_load=True)
    pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_RESOURCE"]])
    v = None
    for ffi in getattr(pe, "VS_FIXEDFILEINFO", None) or []:
        v = [ffi.FileVersionMS >> 16, ffi.FileVersionMS & 0xFFFF, ffi.FileVersionLS >> 16, ffi.FileVersionLS & 0xFFFF]
        break
    out[path] = v
print(json.dumps(out))
"""


def test_version_resource_matches_pefile(files):
    env = {"PYTHONPATH": str(pefile_wheel()), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", _PEFILE] + [str(f) for f in files], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    want = json.loads(proc.stdout)
    got = {str(f): (list(read_pe(str(f))[0].file_version) if read_pe(str(f))[0].file_version else None) for f in files}
    assert got == want
    assert sum(1 for v in want.values() if v) >= 5  # of the CUDA/torch wheels: cudart, nvrtc x2, libiomp5md, uv
    cudart = [f for f in files if f.name == "cudart64_12.dll"][0]
    assert got[str(cudart)][:2] == [6, 14]  # NVIDIA's CUDA DLLs: 6.14.11.<CUDA 12.9's 12090>


def test_fatbin_of_pyd_matches_cuobjdump(files, cuobjdump, tmp_path):
    objcopy = tool("objcopy")
    with_code = [f for f in files if read_pe(str(f))[0].fatbin is not None]
    assert len(with_code) >= 3  # cupy's cub, thrust, random._generator_api
    for f in with_code:
        cov = scan_fatbin_uncached(str(f))
        assert cov.unknown is None, cov.unknown
        blob = tmp_path / (f.name + ".fatbin")
        subprocess.run([objcopy, "-O", "binary", "--only-section=.nv_fatb", str(f), str(blob)], check=True, timeout=120)
        ref_elf, ref_ptx = cuobjdump_list(cuobjdump, str(blob))
        assert {as_cuobjdump_elf(a) for a in cov.sass} == set(ref_elf), f
        assert set(cov.ptx) == ref_ptx, f
        m = re.search(r"(\d+) entries", cov.found_via)
        assert m and int(m.group(1)) == sum(ref_elf.values()) + len(ref_ptx), f


def test_files_without_device_code_and_bad_input(files, tmp_path):
    cudart = [f for f in files if f.name == "cudart64_12.dll"][0]
    assert "no .nv_fatb section" in scan_fatbin_uncached(str(cudart)).unknown
    bad = tmp_path / "x.dll"
    bad.write_bytes(b"MZ" + b"\0" * 100)
    pe, why = read_pe(str(bad))
    assert pe is None and "not a readable PE file" in why
    assert read_pe(str(tmp_path / "missing.dll"))[0] is None


def test_nvidia_driver_version_scheme():
    # microsoft/WSL#6423: the 455.41 WSL preview driver's DLLs carry file version 27.21.0014.5541.
    assert nvidia_driver_version((27, 21, 14, 5541)) == "455.41"
    assert nvidia_driver_version((32, 0, 15, 6094)) == "560.94"


def test_is_pe_never_blocks_on_a_fifo(tmp_path):
    import os

    from cudafix.probes.binfmt.pe import is_pe

    fifo = tmp_path / "x.dll"
    os.mkfifo(str(fifo))
    assert is_pe(str(fifo)) is False and read_pe(str(fifo))[0] is None
