"""A hostile-input suite over the startup hook's files (issue 18; the count is in docs/security.md).

Each case starts from a valid cache entry for the child's own fingerprint that would set
CUDA_HOME=/hostile at `import torch` (written as the cold path writes it), then makes the file,
its directory or the cache home hostile: another kind of file (FIFO, socket, device, directory,
links of every sort), writable by others, owned by another user, too large, a directory path
through another user's directory or link, odd XDG_CACHE_HOME values.  In each, a real interpreter
of a venv with cudafix must start, `import torch` must proceed, nothing may be printed, nothing
may hang, and the planted entry must be applied only in the trusted control case.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import stat

import pytest

from tests.test_startup_helpers import clean_env, make_venv, run, stub_torch, write_plan

OTHER = 65534  # nobody: a uid that is not ours (chown needs root)
PLANT = [{"rule": "cuda-home-mismatch", "severity": "warning", "message": "CUDA_HOME is wrong",
          "fix": {"summary": "set CUDA_HOME=/hostile", "auto": True, "applies_in": "process",
                  "env": [{"op": "set", "name": "CUDA_HOME", "value": "/hostile"}]}}]
SHOW = "import torch, os, sys; sys.stdout.write('ok %s' % os.environ.get('CUDA_HOME'))"


def _mknod(p, kind):
    os.mknod(str(p), kind | 0o600, os.makedev(1, 5) if kind == stat.S_IFCHR else 0)


def _sock(p):
    # bound by its name from its directory: an absolute path over 107 bytes (pytest-xdist's worker
    # tmp dirs are deeper) is refused with "AF_UNIX path too long"
    here = os.getcwd()
    os.chdir(str(p.parent))
    try:
        s = socket.socket(socket.AF_UNIX)
        s.bind(p.name)
        s.close()
    finally:
        os.chdir(here)


def _swap(p, make):
    data = p.read_bytes()
    p.unlink()
    make(p, data)


def _elsewhere_link(p, data):
    other = p.parent.parent / "elsewhere"
    other.write_bytes(data)
    os.chmod(str(other), 0o600)
    p.symlink_to(other)


def _other_owner_link(p, data):
    _elsewhere_link(p, data)
    os.lchown(str(p), OTHER, OTHER)


def _dir_link(d, owner):
    real = d.parent / "real-dir"
    d.rename(real)
    d.symlink_to(real)
    if owner is not None:
        os.lchown(str(d), owner, owner)


# name -> what it does to (cache file path); True in the second field: the entry must apply
FILE_CASES = {
    "control: the entry as written": (lambda p: None, True),
    "fifo": (lambda p: _swap(p, lambda p, d: os.mkfifo(str(p), 0o600)), False),
    "unix socket": (lambda p: _swap(p, lambda p, d: _sock(p)), False),
    "char device (/dev/zero's numbers)": (lambda p: _swap(p, lambda p, d: _mknod(p, stat.S_IFCHR)), False),
    "symlink to /dev/zero": (lambda p: _swap(p, lambda p, d: p.symlink_to("/dev/zero")), False),
    "symlink to a valid cache of ours": (lambda p: _swap(p, _elsewhere_link), False),
    "symlink of another user to a valid cache": (lambda p: _swap(p, _other_owner_link), False),
    "symlink loop": (lambda p: _swap(p, lambda p, d: p.symlink_to(p.name)), False),
    "dangling symlink": (lambda p: _swap(p, lambda p, d: p.symlink_to("/nonexistent/hook")), False),
    "directory": (lambda p: _swap(p, lambda p, d: p.mkdir()), False),
    "mode 0666": (lambda p: os.chmod(str(p), 0o666), False),
    "mode 0620 (group-writable)": (lambda p: os.chmod(str(p), 0o620), False),
    "owned by another user": (lambda p: os.chown(str(p), OTHER, OTHER), False),
    "mode 0000 (root reads it anyway)": (lambda p: os.chmod(str(p), 0o000), True),
    "larger than the maximum": (lambda p: os.truncate(str(p), (1 << 20) + 1), False),
    "hard link to another user's file": (lambda p: (os.chown(str(p), OTHER, OTHER), os.link(str(p), str(p) + ".l"),
                                                   os.unlink(str(p)), os.rename(str(p) + ".l", str(p))), False),
    "the entry's dir mode 0777": (lambda p: os.chmod(str(p.parent), 0o777), False),
    "the entry's dir mode 0770": (lambda p: os.chmod(str(p.parent), 0o770), False),
    "the entry's dir owned by another user": (lambda p: os.chown(str(p.parent), OTHER, OTHER), False),
    "the entry's dir a link of ours (to a private dir)": (lambda p: _dir_link(p.parent, None), True),
    "the entry's dir a link of another user": (lambda p: _dir_link(p.parent, OTHER), False),
    "envs/ mode 0777": (lambda p: os.chmod(str(p.parent.parent), 0o777), False),
    "envs/ owned by another user": (lambda p: os.chown(str(p.parent.parent), OTHER, OTHER), False),
    "cudafix/ owned by another user": (lambda p: os.chown(str(p.parent.parent.parent), OTHER, OTHER), False),
    "cudafix/ mode 0757": (lambda p: os.chmod(str(p.parent.parent.parent), 0o757), False),
    "the cache home owned by another user, 0755": (lambda p: os.chown(str(p.parent.parent.parent.parent), OTHER, OTHER), False),
    "the cache home sticky 1777 (as /tmp)": (lambda p: os.chmod(str(p.parent.parent.parent.parent), 0o1777), True),
}


@pytest.fixture(scope="module")
def stub_python(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("chown/mknod to make hostile files need root") if os.environ.get("CI") != "true" else pytest.fail("needs root")
    root = tmp_path_factory.mktemp("hostile")
    return make_venv(root / "v", deps=[stub_torch(root / "s", version="2.5.1", cuda=None)])


@pytest.mark.parametrize("case", list(FILE_CASES), ids=list(FILE_CASES))
def test_hostile_cache_file(stub_python, tmp_path, case):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    env = clean_env(home)
    path = pathlib.Path(write_plan(stub_python, json.dumps(PLANT), env))
    make, applies = FILE_CASES[case]
    make(path)
    p = run(stub_python, SHOW, env, timeout=30)
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    assert p.stdout == ("ok /hostile" if applies else "ok None"), p.stdout


# XDG_CACHE_HOME values: the hook must start, import must proceed, silently
HOMES = {
    "relative": "relative/cache",
    "a regular file": "{tmp}/file",
    "dot-dot components": "{tmp}/a/../home",
    "longer than PATH_MAX": "{tmp}/" + "x" * 5000,
    "a component of 255+ bytes": "{tmp}/" + "y" * 300,
    "a newline in it": "{tmp}/new\nline",
    "not UTF-8": "{tmp}/\udcff\udcfe",
    "in a directory of another user": "{tmp}/others/cache",
    "a FIFO": "{tmp}/fifo",
    "/proc/self/environ": "/proc/self/environ",
    "/dev/null": "/dev/null",
    "the root dir": "/",
}


@pytest.mark.parametrize("case", list(HOMES), ids=list(HOMES))
def test_hostile_cache_home(stub_python, tmp_path, case):
    (tmp_path / "file").write_text("x")
    (tmp_path / "others").mkdir()
    os.chown(str(tmp_path / "others"), OTHER, OTHER)
    os.mkfifo(str(tmp_path / "fifo"))
    env = clean_env(tmp_path)
    env["XDG_CACHE_HOME"] = HOMES[case].format(tmp=tmp_path)
    envb = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in env.items()}
    p = run(stub_python, SHOW, envb, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok None", ""), p.stderr
    assert not (tmp_path / "others" / "cudafix").exists()
    assert stat.S_ISFIFO(os.lstat(str(tmp_path / "fifo")).st_mode)


def test_case_count():
    """docs/security.md states the count of this suite; keep them equal."""
    doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    n = len(FILE_CASES) + len(HOMES)
    assert "%d cases" % n in doc, n
