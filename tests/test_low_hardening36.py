"""Issue 36's Low items, each on the real thing: a real tcsh activating a real env with a planted
`rm` first on PATH, a real PE file (a cupy .pyd from the recorded Windows wheels) with a crafted
section name, a real shared library with a constructor on LD_LIBRARY_PATH in another user's
directory (the driver probe's libcuda).  Each fails on 89c72a4.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import struct
import subprocess

import pytest

from tests import conda_replay as cr
from tests import users

OTHER = "cfxsec-low36"
other = users.module_user(OTHER)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = cr.make_prefix(tmp_path_factory.mktemp("envs") / "env", other_scripts=False)
    for f in p.glob("lib/python3*/site-packages/_cudafix_test_inject.pth"):
        f.unlink()
    return p


@pytest.mark.skipif(not cr.available("tcsh"), reason="tcsh not installed")
def test_tcsh_activation_never_runs_rm_from_path(prefix, tmp_path):
    """The csh script removed its one-time file with `rm` / `rmdir` looked up on PATH: a directory
    early on the user's PATH (a project's bin/) decided what ran at every activation."""
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "planted-rm-ran"
    bad = tmp_path / "bin"
    bad.mkdir()
    for tool in ("rm", "rmdir"):
        (bad / tool).write_text("#!/bin/sh\necho %s >> %s\nexec /bin/%s \"$@\"\n" % (tool, marker, tool))
        (bad / tool).chmod(0o755)
    env = cr.base_env(home, {"PYTHONPATH": ""})
    env["PATH"] = "%s:%s" % (bad, env["PATH"])
    r = cr.Replay("tcsh", prefix, tmp_path / "w", env)
    r.activate().snap("during")
    p, envs = r.run()
    assert p.returncode == 0, p.stderr
    assert b"skipped" not in p.stderr, p.stderr  # the cold path ran (the one that removes its file)
    assert not marker.exists(), "tcsh ran %s from PATH" % marker.read_text().split()


def _pe_with_section_name(src: pathlib.Path, dst: pathlib.Path, name: bytes) -> None:
    data = bytearray(src.read_bytes())
    (lfanew,) = struct.unpack_from("<I", data, 0x3C)
    _m, _n, _ts, symptr, _ns, optsize, _c = struct.unpack_from("<HHIIIHH", data, lfanew + 4)
    if not symptr:  # a string table to look the long name up in
        struct.pack_into("<I", data, lfanew + 4 + 8, 0x40)
    sec = lfanew + 24 + optsize
    data[sec:sec + 8] = name.ljust(8, b"\0")
    dst.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["/\u00b2".encode(), "/\u2460".encode()])
def test_crafted_pe_section_name_is_a_reason_not_a_crash(tmp_path, name):
    """A section name "/²" (str.isdigit() is true, int() refuses it): 89c72a4 raised ValueError out
    of read_pe and lost the whole WSL probe."""
    from cudafix.probes.binfmt.pe import read_pe
    from tests.wintree import pe_files

    files = pe_files()
    if not files:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("the recorded Windows wheels")
    f = tmp_path / "crafted.dll"
    _pe_with_section_name(files[0], f, name)
    pe, why = read_pe(str(f))  # never raises
    assert pe is not None or why.startswith("not a readable PE file"), why


CTOR = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void ran(void) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0666); if (fd >= 0) { write(fd, "ran\n", 4); close(fd); }
}
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
"""


def test_driver_probe_never_loads_a_libcuda_of_another_users_directory(tmp_path, other):
    """Activation and `status` dlopened the libcuda.so.1 they located, whoever's directory it was
    in (an LD_LIBRARY_PATH entry another user can write)."""
    from cudafix.probes.machine import driver

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("a C compiler")
    marker = tmp_path / "ran"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (tmp_path / "c.c").write_text(CTOR)
    lib = theirs / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", '-DMARKER="%s"' % marker, "-o", str(lib), str(tmp_path / "c.c")],
                   check=True, timeout=120)
    os.chown(str(theirs), other.pw_uid, other.pw_gid)
    v, why = driver.query_driver_cuda_version(str(lib))
    assert not marker.exists(), "a libcuda in another user's directory was loaded"
    assert v is None and "not loaded" in why, why
    os.chown(str(theirs), 0, 0)  # the control: the same file in a directory of root's is loaded
    v, why = driver.query_driver_cuda_version(str(lib))
    assert v == 13000 and marker.exists(), why
