"""The ELF reader against readelf, on real wheels' libraries and on objects built here."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

from cudafix.probes.binfmt.elf import EM_386, EM_X86_64, expand_dst, read_elf, split_path_list
from tests.conftest import require, venv_site_packages

READELF = shutil.which("readelf")


def readelf_dynamic(path: str):
    out = subprocess.run([READELF, "-dW", path], capture_output=True, text=True, timeout=60).stdout
    def vals(tag):
        return re.findall(r"\(%s\)\s+[^\[]*\[(.*)\]" % tag, out)
    return vals("NEEDED"), vals("SONAME"), vals("RPATH"), vals("RUNPATH")


def readelf_sections(path: str):
    out = subprocess.run([READELF, "-SW", path], capture_output=True, text=True, timeout=60).stdout
    secs = {}
    for m in re.finditer(r"\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", out):
        secs.setdefault(m.group(1), (int(m.group(3), 16), int(m.group(4), 16)))
    return secs


def test_matches_readelf_on_real_wheels(torch_cu_python):
    require(READELF, "readelf (binutils) not installed")
    site = venv_site_packages(torch_cu_python)
    files = [site / "torch/lib/libtorch_cuda.so", site / "torch/lib/libtorch_global_deps.so"]
    files += sorted((site / "nvidia").glob("*/lib/*.so*"))[:40]
    checked = 0
    for f in files:
        elf, why = read_elf(str(f))
        assert elf is not None, (f, why)
        needed, soname, rpath, runpath = readelf_dynamic(str(f))
        assert elf.needed == needed, f
        assert ([elf.soname] if elf.soname else []) == soname, f
        assert ([elf.rpath] if elf.rpath is not None else []) == rpath, f
        assert ([elf.runpath] if elf.runpath is not None else []) == runpath, f
        assert elf.elf_class == 64 and elf.little_endian and elf.machine == EM_X86_64
        checked += 1
    assert checked > 20
    lib = str(site / "torch/lib/libtorch_cuda.so")
    elf, _ = read_elf(lib)
    ref = readelf_sections(lib)
    for name in (".nv_fatbin", ".dynamic", ".dynstr", ".text"):
        assert (elf.sections[name].offset, elf.sections[name].size) == ref[name]


def _build32(tmp_path: pathlib.Path, newdtags: bool) -> str:
    gcc, ld = shutil.which("gcc"), shutil.which("ld")
    require(gcc and ld, "needs gcc and ld (binutils)")
    src = tmp_path / "f.c"
    src.write_text("int f(void){return 1;}\n")
    obj = tmp_path / "f32.o"
    cc = subprocess.run([gcc, "-m32", "-c", "-fPIC", "-o", str(obj), str(src)], capture_output=True, text=True)
    require(cc.returncode == 0, "gcc cannot build 32-bit objects here: %s" % cc.stderr.strip()[-300:])
    out = tmp_path / ("libf32%s.so.1" % ("n" if newdtags else "o"))
    tags = "--enable-new-dtags" if newdtags else "--disable-new-dtags"
    subprocess.run([ld, "-m", "elf_i386", "-shared", tags, "-soname", out.name, "-rpath", "$ORIGIN/../lib:${ORIGIN}/x", "-o", str(out), str(obj), ],
                   check=True, capture_output=True)
    return str(out)


@pytest.mark.parametrize("newdtags", [True, False])
def test_elf32(tmp_path, newdtags):
    so = _build32(tmp_path, newdtags)
    elf, why = read_elf(so)
    assert why is None and elf.elf_class == 32 and elf.machine == EM_386 and elf.little_endian
    assert elf.soname == os.path.basename(so)
    if newdtags:
        assert elf.runpath == "$ORIGIN/../lib:${ORIGIN}/x" and elf.rpath is None
    else:
        assert elf.rpath == "$ORIGIN/../lib:${ORIGIN}/x" and elf.runpath is None
    assert ".dynamic" in elf.sections


def test_dst_expansion():
    assert expand_dst("$ORIGIN/../../nvidia/cu13/lib", "/a/torch/lib") == "/a/torch/lib/../../nvidia/cu13/lib"
    assert expand_dst("${ORIGIN}/x:$ORIGIN", "/o") == "/o/x:/o"
    assert expand_dst("/opt/$LIB/$PLATFORM", "/o", lib="lib64", platform="x86_64") == "/opt/lib64/x86_64"
    assert expand_dst("${LIB}/${PLATFORM}", "/o", lib="lib/x86_64-linux-gnu", platform="haswell") == "lib/x86_64-linux-gnu/haswell"
    assert expand_dst("$ORIGINAL/x", "/o") == "$ORIGINAL/x"  # not the $ORIGIN token
    assert expand_dst("$FOO/x", "/o") == "$FOO/x"
    assert expand_dst("/plain", "/o") == "/plain"
    assert split_path_list("a::b:") == ["a", "", "b", ""]
    assert split_path_list("a;b:c", ":;") == ["a", "b", "c"]
    assert split_path_list(None) == []


def test_bad_inputs(tmp_path, torch_cu_python):
    site = venv_site_packages(torch_cu_python)
    real = (site / "torch/lib/libtorch_global_deps.so").read_bytes()
    cases = {
        "empty.so": b"",
        "script.so": b"/* GNU ld script */\nGROUP ( /lib/libc.so.6 )\n",
        "magic-only.so": b"\x7fELF",
        "badclass.so": b"\x7fELF\x09\x01\x01" + b"\0" * 60,
        "header-only.so": real[:64],
        "half.so": real[: len(real) // 2],
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        elf, why = read_elf(str(p))
        if elf is None:
            assert why, name
        else:  # a cut after the headers still parses; what is missing is said, not guessed
            assert elf.dynamic_note or elf.needed, name
    assert read_elf(str(tmp_path))[1] == "not a regular file"
    assert "No such file" in read_elf(str(tmp_path / "absent.so"))[1]
    loop = tmp_path / "loop.so"
    os.symlink("loop.so", str(loop))
    assert "Too many levels of symbolic links" in read_elf(str(loop))[1]
    fifo = tmp_path / "fifo.so"
    os.mkfifo(str(fifo))
    assert read_elf(str(fifo))[1] == "not a regular file"  # and did not block
    # corrupt section header table pointer
    bad = bytearray(real)
    bad[0x28:0x30] = (len(real) * 8).to_bytes(8, "little")
    p = tmp_path / "badshoff.so"
    p.write_bytes(bytes(bad))
    elf, why = read_elf(str(p))
    assert elf is None and "truncated" in why
