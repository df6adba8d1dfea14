"""The fatbin scanner against cuobjdump, on torch 2.14.1's libtorch_cuda.so and on nvcc-built files."""

from __future__ import annotations

import collections
import json
import os
import pathlib
import pwd
import re
import shutil
import struct
import subprocess

import pytest

from cudafix.probes.binfmt import fatbin as fatbin_mod
from cudafix.probes.binfmt.elf import read_elf
from cudafix.probes.binfmt.fatbin import scan_fatbin, scan_fatbin_uncached
from tests import users, worldenv
from tests.conftest import require, venv_site_packages

KERNEL = "__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\nextern \"C\" void launch(float *x) { k<<<1, 32>>>(x); }\n"


def find_tool(name: str, torch_cu_python=None):
    """nvcc from /usr/local/cuda*; cuobjdump from there or from triton's bundled copy."""
    for d in sorted(pathlib.Path("/usr/local").glob("cuda*/bin"), reverse=True):
        if (d / name).exists():
            return str(d / name)
    if torch_cu_python is not None:
        p = venv_site_packages(torch_cu_python) / "triton" / "backends" / "nvidia" / "bin" / name
        if p.exists():
            return str(p)
    return shutil.which(name)


@pytest.fixture(scope="module")
def cuobjdump(torch_cu_python):
    tool = find_tool("cuobjdump", torch_cu_python)
    require(tool, "no cuobjdump (CUDA toolkit or triton wheel of the torch-cu venv) to cross-check against")
    return tool


@pytest.fixture(scope="module")
def nvcc():
    tool = find_tool("nvcc")
    require(tool, "no nvcc under /usr/local/cuda*/bin or on PATH")
    return tool


def cuobjdump_list(tool: str, path: str):
    """(ELF arch multiset, PTX arch set) as cuobjdump names them."""
    elf = subprocess.run([tool, "--list-elf", path], capture_output=True, text=True, timeout=300).stdout
    ptx = subprocess.run([tool, "--list-ptx", path], capture_output=True, text=True, timeout=300).stdout
    elf_archs = collections.Counter(re.findall(r"\.(sm_\d+[af]?)\.cubin", elf))
    ptx_archs = set(re.findall(r"\.sm_(\d+[af]?)\.ptx", ptx))
    return elf_archs, {"compute_" + a for a in ptx_archs}


def as_cuobjdump_elf(name: str) -> str:
    # cuobjdump --list-elf prints family-specific cubins without their 'f' (sm_100f -> sm_100).
    return name[:-1] if name.endswith("f") else name


def build(nvcc: str, tmp_path: pathlib.Path, name: str, *args: str) -> str:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    out = tmp_path / name
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-o", str(out), str(src), *args], check=True, capture_output=True, timeout=600)
    return str(out)


def test_libtorch_cuda_matches_cuobjdump(torch_cu_python, cuobjdump):
    lib = str(venv_site_packages(torch_cu_python) / "torch" / "lib" / "libtorch_cuda.so")
    cov = scan_fatbin(lib)
    assert cov.unknown is None
    ref_elf, ref_ptx = cuobjdump_list(cuobjdump, lib)
    assert {as_cuobjdump_elf(a) for a in cov.sass} == set(ref_elf)
    assert set(cov.ptx) == ref_ptx == set()  # torch 2.14.1+cu130 ships no PTX
    m = re.search(r"\((\d+) containers, (\d+) entries\)", cov.found_via)
    assert m and int(m.group(2)) == sum(ref_elf.values())  # every cubin cuobjdump lists, no more
    assert {"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"} <= set(cov.sass)


def test_ptx_only_build(nvcc, cuobjdump, tmp_path):
    so = build(nvcc, tmp_path, "ptx75.so", "-gencode", "arch=compute_75,code=compute_75")
    cov = scan_fatbin(so)
    assert cov.unknown is None and cov.sass == [] and cov.ptx == ["compute_75"]
    ref_elf, ref_ptx = cuobjdump_list(cuobjdump, so)
    assert not ref_elf and ref_ptx == {"compute_75"}
    # nvcc 13 compresses PTX: the entry header records the text size, which we report
    ptx_dir = tmp_path / "x"
    ptx_dir.mkdir()
    subprocess.run([cuobjdump, "--extract-ptx", "all", so], cwd=str(ptx_dir), check=True, capture_output=True, timeout=120)
    (ptx_file,) = list(ptx_dir.glob("*.ptx"))
    text = ptx_file.read_bytes().rstrip(b"\0")
    assert abs(cov.ptx_bytes["compute_75"] - len(text)) <= 8, (cov.ptx_bytes, len(text))
    assert cov.largest_ptx_bytes == cov.ptx_bytes["compute_75"]
    # the PTX ISA version read from the entry header is the `.version` of the PTX text itself
    assert cov.ptx_isa == {"compute_75": _ptx_version(text.decode())}


def _ptx_version(text: str) -> str:
    m = re.search(r"^\s*\.version\s+(\d+\.\d+)", text, re.M)
    assert m, text[:200]
    return m.group(1)


def test_ptx_isa_of_a_newer_toolkit(cuobjdump, tmp_path):
    """nvcc 13.2 (NVIDIA's wheels, as tools/compat_proof.py lays them out) writes PTX ISA 9.2: read
    from the fatbin as cuobjdump extracts it, and judged by the model as the driver of CUDA 13.0
    judged it on a GPU (docs/gpu-raw/compat-proof-*.json: error 222)."""
    from tools import compat_proof

    cache = pathlib.Path.home() / ".cache" / "cudafix-nvcc-wheels"
    try:
        root = compat_proof._toolkit("13.2.86", str(cache))
    except subprocess.CalledProcessError as exc:
        require(False, "NVIDIA's nvcc 13.2.86 wheels (pip download): %s" % exc)
    nvcc = [os.path.join(root, "bin", "nvcc"), "-I" + os.path.join(root, "include"), "-L" + os.path.join(root, "lib")]
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    so = tmp_path / "ptx132.so"
    subprocess.run(nvcc + ["-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=compute_90", "-o", str(so), str(src)],
                   check=True, capture_output=True, timeout=600)
    cov = scan_fatbin(str(so))
    d = tmp_path / "x"
    d.mkdir()
    subprocess.run([cuobjdump, "--extract-ptx", "all", str(so)], cwd=str(d), check=True, capture_output=True, timeout=120)
    (ptx_file,) = list(d.glob("*.ptx"))
    assert cov.ptx_isa == {"compute_90": _ptx_version(ptx_file.read_bytes().rstrip(b"\0").decode())} == {"compute_90": "9.2"}
    from cudafix.knowledge import compat

    a = compat.device_code(compat.Driver(13000, "580.159.04"), "9.0", cov.sass, cov.ptx, cov.ptx_isa)
    assert a.how == compat.UNSUPPORTED_PTX and a.error == "the provided PTX was compiled with an unsupported toolchain."


def test_arch_specific_and_family_variants(nvcc, cuobjdump, tmp_path):
    so = build(
        nvcc, tmp_path, "mix.so",
        "-gencode", "arch=compute_90a,code=sm_90a",
        "-gencode", "arch=compute_80,code=sm_80",
        "-gencode", "arch=compute_100f,code=sm_100f",
        "-gencode", "arch=compute_120,code=[sm_120,compute_120]",
        "-gencode", "arch=compute_103a,code=compute_103a",
    )
    cov = scan_fatbin(so)
    assert cov.unknown is None
    assert cov.sass == ["sm_80", "sm_90a", "sm_100f", "sm_120"]
    assert cov.ptx == ["compute_103a", "compute_120"]
    ref_elf, ref_ptx = cuobjdump_list(cuobjdump, so)
    assert {as_cuobjdump_elf(a) for a in cov.sass} == set(ref_elf)
    assert set(cov.ptx) == ref_ptx


def test_uncompressed_ptx(nvcc, tmp_path):
    so = build(nvcc, tmp_path, "nocomp.so", "--compress-mode=none", "-gencode", "arch=compute_75,code=[sm_75,compute_75]")
    cov = scan_fatbin(so)
    assert cov.sass == ["sm_75"] and cov.ptx == ["compute_75"] and cov.ptx_bytes["compute_75"] > 0


def _fatbin_section(path: str):
    elf, _ = read_elf(path)
    return elf.sections[".nv_fatbin"]


def test_truncated_and_corrupt_fatbin(nvcc, tmp_path):
    so = build(nvcc, tmp_path, "ok.so", "-gencode", "arch=compute_80,code=[sm_80,compute_80]")
    data = pathlib.Path(so).read_bytes()
    sec = _fatbin_section(so)
    # 1. the container claims more bytes than the section holds
    bad = bytearray(data)
    struct.pack_into("<Q", bad, sec.offset + 8, sec.size * 4)
    p = tmp_path / "claims.so"
    p.write_bytes(bytes(bad))
    cov = scan_fatbin(str(p))
    assert cov.unknown and "truncated" in cov.unknown and cov.sass == []
    # 2. the file ends inside .nv_fatbin (section headers copied from the end so the ELF parses)
    cut = sec.offset + 40
    p2 = tmp_path / "cut.so"
    p2.write_bytes(data[:cut])
    cov = scan_fatbin(str(p2))
    assert cov.unknown and "truncated" in cov.unknown
    # 3. an entry header whose payload runs past its container
    bad = bytearray(data)
    struct.pack_into("<Q", bad, sec.offset + 16 + 8, 1 << 40)
    p3 = tmp_path / "entry.so"
    p3.write_bytes(bytes(bad))
    cov = scan_fatbin(str(p3))
    assert cov.unknown and "corrupt fatbin entry" in cov.unknown
    # 4. garbage instead of the container magic
    bad = bytearray(data)
    bad[sec.offset : sec.offset + 16] = b"\xff" * 16
    p4 = tmp_path / "magic.so"
    p4.write_bytes(bytes(bad))
    assert scan_fatbin(str(p4)).unknown


def test_bad_files(tmp_path):
    notelf = tmp_path / "libfoo.so"
    notelf.write_text("INPUT(-lfoo)\n")  # a linker script named .so, as some distros ship
    assert "not an ELF file" in scan_fatbin(str(notelf)).unknown
    assert "no .nv_fatbin" in scan_fatbin(read_self_python()).unknown
    assert scan_fatbin(str(tmp_path)).unknown
    assert scan_fatbin(str(tmp_path / "absent.so")).unknown
    loop = tmp_path / "loop.so"
    os.symlink("loop.so", str(loop))
    assert scan_fatbin(str(loop)).unknown
    os.mkfifo(str(tmp_path / "fifo.so"))
    assert "not a regular file" in scan_fatbin(str(tmp_path / "fifo.so")).unknown


def read_self_python() -> str:
    return os.path.realpath("/proc/self/exe")


def test_unreadable_file(tmp_path, nvcc):
    if os.getuid() == 0:
        # root reads mode-000 files; drop to nobody in a child to see a real EACCES.  The file sits in
        # a directory the user nobody can enter (pytest's tmp_path is under a 0700 one, which would
        # deny on its own), so the file's mode is what denies.
        # The system's python: PATH's python3 may be a pyenv shim, which nobody cannot run (tests/users.py).
        require(shutil.which("setpriv") is not None and os.access(users.SYSTEM_PYTHON, os.X_OK),
                "setpriv and %s, to read the file as the user nobody" % users.SYSTEM_PYTHON)
        d = worldenv.world_dir("cfx-fatbin-")
        try:
            so = build(nvcc, d, "priv.so", "-gencode", "arch=compute_80,code=sm_80")
            os.chmod(so, 0)
            code = "import sys; sys.path.insert(0, %r); from cudafix.probes.binfmt.fatbin import scan_fatbin; print(scan_fatbin(%r).unknown)" % (
                str(pathlib.Path(__file__).resolve().parent.parent), so)
            out = users.as_user(pwd.getpwuid(65534), [users.SYSTEM_PYTHON, "-c", code], timeout=60)
        finally:
            shutil.rmtree(str(d), ignore_errors=True)
        assert "Permission denied" in out.stdout, out.stdout + out.stderr
    else:
        p = tmp_path / "priv.so"
        p.write_bytes(b"\x7fELF")
        os.chmod(str(p), 0)
        assert "Permission denied" in scan_fatbin(str(p)).unknown


def test_cache_hit_invalidation_and_corruption(nvcc, tmp_path):
    so = build(nvcc, tmp_path, "c.so", "-gencode", "arch=compute_86,code=sm_86")
    cache = tmp_path / "cache"
    first = scan_fatbin(so, cache_dir=str(cache))
    assert first.sass == ["sm_86"] and "(cached)" not in first.found_via
    again = scan_fatbin(so, cache_dir=str(cache))
    assert again.sass == ["sm_86"] and again.found_via.endswith("(cached)")
    # a changed file (size/mtime) is rescanned
    build(nvcc, tmp_path, "c.so", "-gencode", "arch=compute_90,code=sm_90")
    changed = scan_fatbin(so, cache_dir=str(cache))
    assert changed.sass == ["sm_90"] and "(cached)" not in changed.found_via
    # corrupt cache files are ignored, then replaced by a good one
    cfile = cache / "fatbin-cache.json"
    for junk in ("{not json", json.dumps({"version": 1, "entries": {os.path.realpath(so): {"key": "x", "result": 3}}}), "[]"):
        cfile.write_text(junk)
        cov = scan_fatbin(so, cache_dir=str(cache))
        assert cov.sass == ["sm_90"] and cov.unknown is None
    assert json.loads(cfile.read_text())["version"] == fatbin_mod.CACHE_VERSION
    # a cache file others can write is not trusted
    os.chmod(str(cfile), 0o666)
    assert "(cached)" not in scan_fatbin(so, cache_dir=str(cache)).found_via
    # no cache dir writable: still answers
    assert scan_fatbin(so, cache_dir="/proc/nonexistent/cache").sass == ["sm_90"]
    assert scan_fatbin_uncached(so).sass == ["sm_90"]
