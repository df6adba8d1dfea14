"""warm never loads a module another user owns or can write (issue 21, hardening item 2).

The background warm that activation starts dlopens every PTX-only module it found under
TORCH_EXTENSIONS_DIR, the sys.path dirs and conda's lib/, as the activating user (root included):
the module's constructors run in that process.  Real files, owned by a real second user (created
with useradd; this suite runs as root) or in directories others can write; a real shared library
whose constructor writes a marker shows whether it was loaded.  The plan cases and the load case
fail on 51656f0 (the plan had no trust check; the child loaded whatever the plan listed).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from cudafix.model.snapshot import GPU, ExtensionModule, Snapshot
from tests import users

OTHER = "cfxsec-other"  # this module's own user: another module's teardown cannot remove it under us

CTOR = r"""
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>
__attribute__((constructor)) static void ran(void) {
    const char *m = getenv("CFX_MARKER");
    if (m) { int fd = open(m, O_WRONLY | O_CREAT | O_APPEND, 0644); if (fd >= 0) { write(fd, "loaded\n", 7); close(fd); } }
}
"""


other = users.module_user(OTHER)


@pytest.fixture(scope="module")
def ctor_so(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("a C compiler")
    d = tmp_path_factory.mktemp("so")
    (d / "m.c").write_text(CTOR)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "libcfx_ctor.so"), str(d / "m.c")], check=True, timeout=120)
    return d / "libcfx_ctor.so"


def _layout(root: pathlib.Path, case: str, so: pathlib.Path, other) -> pathlib.Path:
    """A module placed as ``case`` says; returns its path."""
    root.mkdir(mode=0o755)
    d = root / "ext"
    if case == "sticky-above-ours":  # /tmp/torch_extensions: torch's default, below a sticky /tmp
        s = root / "sticky"
        s.mkdir(mode=0o755)
        s.chmod(0o1777)
        d = s / "torch_extensions"
    d.mkdir(mode=0o755)
    f = d / "libcfx_ctor.so"
    shutil.copy(str(so), str(f))
    f.chmod(0o755)
    if case == "file-of-another-user":
        os.chown(str(f), other.pw_uid, other.pw_gid)
    elif case == "file-others-can-write":
        f.chmod(0o777)
    elif case == "dir-others-can-write":
        d.chmod(0o777)
    elif case == "dir-group-can-write":
        d.chmod(0o775)
    elif case == "dir-of-another-user":
        os.chown(str(d), other.pw_uid, other.pw_gid)
    elif case == "sticky-is-its-own-dir":
        d.chmod(0o1777)
    return f


def _snap(path: pathlib.Path) -> Snapshot:
    snap = Snapshot()
    snap.gpus.gpus = [GPU(index=0, name="NVIDIA H200", compute_capability="9.0", uuid="GPU-x")]
    snap.python.executable = sys.executable
    snap.extensions.scanned = True
    snap.extensions.modules = [ExtensionModule(path=str(path), ptx=["compute_90"], ptx_bytes={"compute_90": 1000},
                                               cudart="13", cudart_linkage="shared")]
    return snap


REFUSED = ["file-of-another-user", "file-others-can-write", "dir-others-can-write", "dir-group-can-write",
           "dir-of-another-user", "sticky-is-its-own-dir"]


@pytest.mark.parametrize("case", REFUSED + ["ours", "sticky-above-ours"])
def test_plan_and_status_say_what_is_skipped_and_why(case, tmp_path, ctor_so, other):
    from cudafix.warm import plan as warm

    f = _layout(tmp_path / "t", case, ctor_so, other)
    (t,) = warm.targets(_snap(f))
    (m,) = t.modules
    lines = warm.plan_lines([t], _snap(f), {}, {"CUDA_CACHE_PATH": str(tmp_path / "nocache")})
    if case in REFUSED:
        assert not m.warmable and m.why_not.startswith("not loaded: "), m.why_not
        assert "another user" in m.why_not
        assert any(ln.lstrip().startswith("not") and "not loaded: " in ln for ln in lines), lines  # `warm --status`
    else:
        assert m.warmable, m.why_not
        assert any(ln.lstrip().startswith("cold") for ln in lines), lines


@pytest.mark.parametrize("case", ["file-of-another-user", "dir-others-can-write", "ours"])
def test_child_never_loads_a_module_that_fails_the_check_at_load_time(case, tmp_path, ctor_so, other):
    """The plan said warmable (the files changed since, or the plan is old): the child re-checks
    just before the load.  The constructor's marker is the independent truth of a load."""
    from cudafix.warm import runtime as warmrun
    from cudafix.warm import plan as warm

    f = _layout(tmp_path / "t", "ours", ctor_so, other)
    snap = _snap(f)
    (t,) = warm.targets(snap)
    assert t.modules[0].warmable
    _layout_change = {"file-of-another-user": lambda: os.chown(str(f), other.pw_uid, other.pw_gid),
                      "dir-others-can-write": lambda: f.parent.chmod(0o777), "ours": lambda: None}
    _layout_change[case]()
    marker = tmp_path / "marker"
    env = dict(os.environ, CUDA_CACHE_PATH=str(tmp_path / "cache"), CFX_MARKER=str(marker))
    res = warmrun.run_child(sys.executable, t, snap, env, timeout=120)
    if case == "ours":
        assert marker.read_text() == "loaded\n"  # the control: a module of ours is really loaded
        assert any(s.get("step") == "dlopen" for s in res["steps"]), res
    else:
        assert not marker.exists(), "the child loaded %s" % f
        assert res["ok"] is False and res["skipped"][0]["path"] == str(f)
        assert "not loaded: " in res["error"]


def test_warm_status_names_the_module_it_will_not_load(tmp_path, other):
    """What `cudafix warm --status` does (cudafix/cli/warm.py: take_snapshot, plan, plan_lines) on
    a real probe of TORCH_EXTENSIONS_DIR holding a real PTX-only CUDA module (nvcc: compute_75 PTX,
    a shared runtime: JIT on an sm_90 GPU, warmable) twice: in a build directory of ours and in
    one another user owns.  This machine has no GPU: the snapshot gets one H200 (CC 9.0)."""
    from cudafix import probes
    from cudafix.warm import plan as warm
    from tests import extbuild

    if extbuild.nvcc_path() is None:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("nvcc")
    so = pathlib.Path(extbuild.build_kernels("cfx_ptx75s", ["-gencode=arch=compute_75,code=compute_75"], cudart="shared"))
    ext = tmp_path / "torch_extensions"
    for owner in ("ours", "theirs"):
        d = ext / owner
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(str(so), str(d / so.name))
        if owner == "theirs":
            os.chown(str(d), other.pw_uid, other.pw_gid)
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(ext), CUDA_CACHE_PATH=str(tmp_path / "jit"))
    snap = probes.take_snapshot(env=env)
    snap.gpus.gpus = [GPU(index=0, name="NVIDIA H200", compute_capability="9.0", uuid="GPU-x")]
    snap.gpus.visible = [0]
    targets = warm.targets(snap)
    lines = warm.plan_lines(targets, snap, warm.load_state(str(tmp_path / "state")), env)
    mine = [ln for ln in lines if str(ext / "ours" / so.name) in ln]
    theirs = [ln for ln in lines if "not loaded" in ln]
    assert len(mine) == 1 and mine[0].lstrip().startswith("cold"), lines
    assert len(theirs) == 1 and str(ext / "theirs") in theirs[0] and "another user" in theirs[0], lines
