"""cudafix.probes.machine.host.which (the probes' PATH lookup, without importing shutil) finds what
``shutil.which(cmd, path=PATH)`` finds, on real files: executables, files without the x bit, a
directory of the same name, symlinks (working and dangling), empty, relative, repeated and
missing PATH entries.  shutil.which is the truth."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudafix.probes.machine.host import which

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the POSIX branch (Windows uses shutil.which itself)")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("which")
    kinds = {}
    for name, make in [
        ("exe", lambda p: (p.write_text("#!/bin/sh\n"), p.chmod(0o755))),
        ("noexec", lambda p: (p.write_text("x"), p.chmod(0o644))),
        ("dir", lambda p: p.mkdir()),
        ("link", lambda p: os.symlink(str(root / "exe" / "nvcc"), str(p))),
        ("dangling", lambda p: os.symlink(str(root / "nowhere"), str(p))),
        ("linkdir", lambda p: os.symlink(str(root / "dir" / "nvcc"), str(p))),
    ]:
        d = root / name
        d.mkdir()
        make(d / "nvcc")
        kinds[name] = str(d)
    kinds["missing"] = str(root / "missing")
    kinds["empty"] = ""
    kinds["relative"] = "exe"
    return root, kinds


@settings(max_examples=300, deadline=None)
@given(entries=st.lists(st.sampled_from(["exe", "noexec", "dir", "link", "dangling", "linkdir", "missing", "empty",
                                         "relative"]), max_size=6),
       trailing=st.booleans())
def test_same_answer_as_shutil_which(tree, entries, trailing):
    import shutil

    root, kinds = tree
    path = os.pathsep.join(kinds[e] for e in entries) + (os.pathsep if trailing else "")
    cwd = os.getcwd()
    os.chdir(str(root))  # the empty and relative entries resolve here: "exe/nvcc" exists
    try:
        for cmd in ("nvcc", "absent"):
            assert which(cmd, path) == shutil.which(cmd, path=path), (cmd, path)
    finally:
        os.chdir(cwd)


def test_finds_the_real_executable(tree):
    root, kinds = tree
    assert which("nvcc", os.pathsep.join([kinds["noexec"], kinds["dir"], kinds["exe"]])) == os.path.join(kinds["exe"], "nvcc")
    assert which("nvcc", "") is None
    assert which("sh", "/usr/bin:/bin") in ("/usr/bin/sh", "/bin/sh")
