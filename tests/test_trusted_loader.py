"""One trusted loader (issue 36, H1 and H2): a symbolic link flipped by another user's process while
cudafix checks it never gets that user's module loaded, and `verify --first-run`'s --load child
loads nothing the check refuses.

Real processes, real files, a real second user (useradd; this suite runs as root): the attacker
is a separate process running as that user (setpriv), flipping a link in a shared sticky
directory (a team TORCH_EXTENSIONS_DIR) between a module of root's and one of its own, as fast as
it can.  A real shared library whose constructor appends the loading process's euid to a marker
is the independent truth of a load.  Every test here fails on 89c72a4 (the check and the load
were two resolutions; the first-run child had no check at all).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from cudafix.model.snapshot import GPU, Snapshot
from tests import users, worldenv
from tests.test_hook_hardening import shared  # noqa: F401 (fixture: a stub-torch venv of the system's python)

OTHER = "cfxsec-race"
ATTEMPTS = 60

CTOR = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void ran(void) {
    char b[64]; int n = snprintf(b, sizeof b, "%s %d\n", WHO, (int)geteuid());
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0666); if (fd >= 0) { write(fd, b, n); close(fd); }
}
"""

FLIPPER = r"""
import os, sys
link, a, b = sys.argv[1:4]
tmp = link + ".%d" % os.getpid()
i = 0
while True:
    i += 1
    try:
        os.symlink(a if i % 2 else b, tmp)
        os.rename(tmp, link)
    except OSError:
        pass
"""

other = users.module_user(OTHER)


def _cc():
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("a C compiler")
    return cc


def _so(d: pathlib.Path, who: str, marker: pathlib.Path) -> pathlib.Path:
    d.mkdir(parents=True, exist_ok=True)
    src = d / ("%s.c" % who)
    src.write_text(CTOR)
    out = d / ("libcfx_%s.so" % who)
    subprocess.run([_cc(), "-shared", "-fPIC", '-DWHO="%s"' % who, '-DMARKER="%s"' % marker, "-o", str(out), str(src)],
                   check=True, timeout=120)
    out.chmod(0o755)
    return out


@pytest.fixture
def arena(tmp_path, other, request):
    """A team extension dir (1777, root's) where the attacker flips a link of their own;
    good (root's, 0755 dirs) and evil (the attacker's own directory and file)."""
    # a directory the attacker's own process can reach (pytest's tmp_path is under a 0700 dir)
    root = worldenv.world_dir("cfxarena-")
    request.addfinalizer(lambda: shutil.rmtree(str(root), ignore_errors=True))
    marker = root / "marker"
    marker.touch()
    marker.chmod(0o666)
    good = _so(root / "good", "good", marker)
    evil = _so(root / "evil", "evil", marker)
    os.chown(str(evil.parent), other.pw_uid, other.pw_gid)
    os.chown(str(evil), other.pw_uid, other.pw_gid)
    team = root / "shared"
    team.mkdir()
    team.chmod(0o1777)
    return {"root": root, "marker": marker, "good": good, "evil": evil, "shared": team}


def _flip(user, link: pathlib.Path, a: pathlib.Path, b: pathlib.Path) -> subprocess.Popen:
    """The attacker: another process (as ``user``, or root when None) flipping ``link``."""
    os.symlink(str(a), str(link))
    if user is not None:
        os.lchown(str(link), user.pw_uid, user.pw_gid)
    # the attacker's interpreter: the system's (pyenv's is under /root, 0700)
    py = users.SYSTEM_PYTHON if user is not None and os.access(users.SYSTEM_PYTHON, os.X_OK) else sys.executable
    argv = [py, "-I", "-c", FLIPPER, str(link), str(a), str(b)]
    if user is not None:
        argv = ["setpriv", "--reuid=%d" % user.pw_uid, "--regid=%d" % user.pw_gid, "--clear-groups", "--"] + argv
    p = subprocess.Popen(argv, cwd="/", stdin=subprocess.DEVNULL, start_new_session=True)
    time.sleep(0.3)
    assert p.poll() is None, "the attacker's flipping process did not start"
    return p


def _stop(p: subprocess.Popen) -> None:
    os.killpg(p.pid, 9)
    p.wait()


def _target_snap(path: pathlib.Path):
    from cudafix.warm.plan import WarmModule, WarmTarget

    gpu = GPU(index=0, name="NVIDIA H200", compute_capability="9.0", uuid="GPU-x")
    t = WarmTarget("9.0", gpu, [WarmModule(str(path), "cfx (unowned)", 1000, "dlopen", None)])
    snap = Snapshot()
    snap.python.executable = sys.executable
    return t, snap


def _evil_runs(marker: pathlib.Path):
    return [ln for ln in marker.read_text().splitlines() if ln.startswith("evil")]


@pytest.mark.parametrize("link_owner", ["attacker", "root"])
def test_warm_child_never_loads_the_other_side_of_a_flipped_link(arena, other, link_owner, tmp_path):
    """H1: warm's check and its child's load are one resolution.  ``attacker``: the attacker's
    own link in the sticky shared dir (the issue's case: 4-9 of 40 loads on 89c72a4).  ``root``:
    a link of root's flipped by a root process -- the check may pass on the good side, and the child
    must then load exactly that file: the control that the good module is really loaded."""
    from cudafix.warm import runtime as warmrun

    link = arena["shared"] / "cfx_mod.so"
    flipper = _flip(other if link_owner == "attacker" else None, link, arena["good"], arena["evil"])
    loaded_good = 0
    try:
        t, snap = _target_snap(link)
        env = dict(os.environ, CUDA_CACHE_PATH=str(tmp_path / "cache"))
        for _ in range(ATTEMPTS):
            res = warmrun.run_child(sys.executable, t, snap, env, timeout=60)
            loaded_good += any(s.get("step") == "dlopen" for s in res["steps"])
            if _evil_runs(arena["marker"]):
                break
    finally:
        _stop(flipper)
    evil = _evil_runs(arena["marker"])
    assert not evil, "the attacker's module ran in warm's child (%s) in %d attempts" % (evil, ATTEMPTS)
    if link_owner == "root":
        assert loaded_good > 0, "the control never loaded the good module"


def test_trusted_load_in_process_never_loads_the_flipped_side(arena, other):
    """The hook's preload and the driver probe load in their own process: 300 loads through the
    trusted loader while the attacker flips, none of them the attacker's module."""
    from cudafix.store import trustload

    link = arena["shared"] / "libcfx_pre.so"
    flipper = _flip(other, link, arena["good"], arena["evil"])
    try:
        code = ("import sys; sys.path.insert(0, %r)\nfrom cudafix.store import trustload\n"
                "for _ in range(300):\n    trustload.load(%r, (), True)\n") % (str(pathlib.Path(__file__).parent.parent), str(link))
        subprocess.run([sys.executable, "-I", "-c", code], cwd="/", timeout=120, check=True)
    finally:
        _stop(flipper)
    assert not _evil_runs(arena["marker"])
    assert "symbolic link of another user" in trustload.refusal(str(link), (), True)


def test_open_checked_refuses_another_users_link_and_dir(arena, other):
    from cudafix.store import trustload

    link = arena["shared"] / "l.so"
    os.symlink(str(arena["good"]), str(link))
    assert trustload.refusal(str(link), (), sticky_ok=True) is None
    assert "can be written by a user other" in trustload.refusal(str(link), (), sticky_ok=False)  # a preload: no sticky dir
    os.lchown(str(link), other.pw_uid, other.pw_gid)
    assert "symbolic link of another user" in trustload.refusal(str(link), (), sticky_ok=True)
    assert "/evil can be written by a user other" in trustload.refusal(str(arena["evil"]), (), sticky_ok=True)
    assert trustload.refusal(str(arena["evil"]), (other.pw_uid,), sticky_ok=True) is None  # the env's owner
    opened, why = trustload.open_checked(str(arena["good"]), sticky_ok=True)
    assert why is None and opened.real == str(arena["good"])
    opened.close()


def _torch_python():
    p = pathlib.Path.home() / ".cache" / "cudafix-venvs" / "torch-cpu" / "bin" / "python"
    if not p.exists():
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("the torch-cpu venv (tests/make_venvs.sh)")
    return str(p)


@pytest.mark.parametrize("case", ["file-of-another-user", "attacker-link", "ours"])
def test_first_run_load_child_loads_only_what_the_check_passes(arena, other, case, tmp_path):
    """H2: `verify --first-run`'s modules runs (`--load-only --load ...`) loaded every module that
    needs JIT with no check.  The CPU torch venv's real interpreter runs the real child."""
    from cudafix.verify import firstrun

    if case == "file-of-another-user":
        path = arena["evil"]
    elif case == "attacker-link":
        path = arena["shared"] / "cfx_link.so"
        os.symlink(str(arena["evil"]), str(path))
        os.lchown(str(path), other.pw_uid, other.pw_gid)
    else:
        path = arena["good"]
    args = firstrun._child_args("modules-cold", 1, 32, False, 1, [str(path)], "cpu")
    env = dict(os.environ, CUDA_CACHE_PATH=str(tmp_path / "jit"))
    out = firstrun.run_child(_torch_python(), args, env, 300)
    assert "torch" in out, out
    ran = arena["marker"].read_text().splitlines()
    if case == "ours":
        assert [ln.split()[0] for ln in ran] == ["good"], (ran, out)
    else:
        assert ran == [], "another user's module ran in the first-run child: %s" % ran


def test_hook_never_preloads_through_a_link_in_another_users_directory(shared, tmp_path, other):  # noqa: F811
    """H1 through the real hook: a preload whose path is a link in another user's directory (the
    one they can flip: 89c72a4 checked only the real path's directories, then loaded a second
    realpath).  The link points at a library of root's the whole time: what is refused is the
    place the link is in, so no flip can ever be loaded.  A real `import torch` in a real venv."""
    from tests.test_hook_hardening import _preload_finding
    from tests.test_startup_helpers import clean_env, run, write_plan

    _, py = shared
    libdir = pathlib.Path(tempfile.mkdtemp(prefix="cfxrace-", dir=str(pathlib.Path.home())))  # root's 0700 home
    try:
        os.chmod(str(libdir), 0o755)
        marker = libdir / "marker"
        marker.touch()
        marker.chmod(0o666)
        good = _so(libdir / "good", "good", marker)
        theirs = libdir / "theirs"
        theirs.mkdir(mode=0o755)
        link = theirs / "libcfxtest.so.1"
        os.symlink(str(good), str(link))
        env = clean_env(tmp_path / "cache", CUDAFIX_DEBUG="1")
        write_plan(py, json.dumps([_preload_finding(link)]), env)  # planned while the directory was root's
        os.chown(str(theirs), other.pw_uid, other.pw_gid)
        os.lchown(str(link), other.pw_uid, other.pw_gid)
        p = run(py, "import torch", env, timeout=60)
        assert p.returncode == 0, p.stderr
        assert marker.read_text() == "", "preloaded through another user's link: %s" % p.stderr
        assert "not preloading %s" % link in p.stderr, p.stderr
        os.chown(str(theirs), 0, 0)  # the control: the same link, root's, is preloaded
        os.lchown(str(link), 0, 0)
        p = run(py, "import torch", env, timeout=60)
        assert marker.read_text().split() == ["good", "0"], p.stderr
    finally:
        shutil.rmtree(str(libdir), ignore_errors=True)
