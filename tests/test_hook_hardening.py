"""Issue 18 items 1, 3, 4, 5, 7 in real interpreters: the tests reproduce each finding (20 of the
23 process-level tests fail on the code before the fix, commit 2b4064a; the other three are
controls that hold on both: a preload from a safe directory, DataLoader workers with spawn and
fork) and pass now.  docs/security.md names each.

1. a FIFO at the cache path must not hang `import torch` (also one planted by another user in
   the /tmp fallback used when HOME is unset);
3. the cache path: real directories of the user, 0700 where cudafix makes them, no other user's
   link followed (not by root either), nothing written in a directory another user chose;
4. preloads never from a directory others can write, a relative one or the current directory;
5. `_cudafix_startup.py` comes from the .pth file's own directory, never from the current one
   through an empty PYTHONPATH entry (with -P too), on every CPython 3.8-3.13 here;
7. a warning once per process group: a launcher that never imports torch and starts 4 workers
   (spawn, fork, forkserver, a pool, xargs -P) prints it once; the next command prints it again.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from cudafix.store import paths
from tests import users
from tests.test_startup_helpers import TORCH_CPU_SITE, clean_env, make_venv, run, site_packages, stub_torch, write_plan
from tests.test_startup_versions import INTERPRETERS

IMPORT = "import torch, sys; sys.stdout.write('ok')"
CACHE_PATH = "import cudafix.hook.runtime as h; print(h.check().cache_path)"
ADVICE = {"rule": "driver-too-old", "severity": "error", "message": "driver 535 supports CUDA <= 12.2",
          "fix": {"summary": "install torch built for cu121", "auto": False}}


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A world-traversable dir under /tmp with a stub-torch venv of the system's python."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="cfxhh-", dir="/tmp"))
    os.chmod(str(root), 0o755)
    stub = stub_torch(root / "stub", version="2.5.1", cuda=None)
    py = make_venv(root / "v", deps=[stub], python=users.SYSTEM_PYTHON if os.access(users.SYSTEM_PYTHON, os.X_OK) else sys.executable)
    yield root, py
    shutil.rmtree(str(root), ignore_errors=True)


@pytest.fixture(scope="module")
def two_users():
    users.need_users()
    made = [users.create(n) for n in users.NAMES]
    yield made
    for n in users.NAMES:
        users.remove(n)


def _cache_path(py, env):
    p = run(py, CACHE_PATH, env)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


# -- 1. FIFO ---------------------------------------------------------------------------------


def test_fifo_at_cache_path_does_not_hang(shared, tmp_path):
    _, py = shared
    env = clean_env(tmp_path / "cache")
    path = _cache_path(py, env)
    os.makedirs(os.path.dirname(path), mode=0o700)
    os.mkfifo(path, 0o600)
    p = run(py, IMPORT, env, timeout=30)  # before the fix: TimeoutExpired (blocked in open())
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok", "")
    assert pathlib.Path(path).is_file()  # our own directory: the cold path replaced it by a whole cache


def test_fifo_planted_in_tmp_fallback_by_another_user(shared, two_users):
    root, py = shared
    victim, attacker = two_users
    base = "/tmp/cudafix-%d" % victim.pw_uid
    shutil.rmtree(base, ignore_errors=True)
    d = "%s/envs/%s" % (base, paths.env_key(str(root / "v")))
    try:
        p = users.as_user(attacker, ["sh", "-c", 'mkdir -p "$0" && chmod -R 0777 %s && mkfifo -m 0666 "$0/hook.json"' % base, d])
        assert p.returncode == 0, p.stderr
        p = users.as_user(victim, [str(py), "-c", IMPORT], timeout=30)  # HOME unset: the /tmp fallback
        assert (p.returncode, p.stdout, p.stderr) == (0, "ok", "")
        assert sorted(os.listdir(d)) == ["hook.json"]  # and nothing of the victim's written there
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- 3. the cache path -------------------------------------------------------------------------


def test_tmp_fallback_made_private(shared, two_users):
    root, py = shared
    victim, _ = two_users
    base = "/tmp/cudafix-%d" % victim.pw_uid
    shutil.rmtree(base, ignore_errors=True)
    try:
        p = users.as_user(victim, [str(py), "-c", IMPORT], timeout=120)
        assert (p.returncode, p.stdout, p.stderr) == (0, "ok", "")
        d = "%s/envs/%s" % (base, paths.env_key(str(root / "v")))
        for path, mode in ((base, 0o700), (base + "/envs", 0o700), (d, 0o700), (d + "/hook.json", 0o600)):
            st = os.lstat(path)
            assert (st.st_uid, st.st_mode & 0o7777) == (victim.pw_uid, mode), path
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_directory_of_another_user_at_tmp_fallback_is_not_used(shared, two_users):
    root, py = shared
    victim, attacker = two_users
    base = "/tmp/cudafix-%d" % victim.pw_uid
    shutil.rmtree(base, ignore_errors=True)
    try:
        p = users.as_user(attacker, ["sh", "-c", "mkdir -m 0777 %s" % base])
        assert p.returncode == 0, p.stderr
        p = users.as_user(victim, [str(py), "-c", IMPORT], timeout=120)
        assert (p.returncode, p.stdout, p.stderr) == (0, "ok", "")
        mine = [os.path.join(dp, n) for dp, dns, fns in os.walk(base) for n in dns + fns
                if os.lstat(os.path.join(dp, n)).st_uid == victim.pw_uid]
        assert mine == []  # before the fix: envs/<key>/hook.v1, in a directory the attacker can rename
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("link_at", ["envs", "key"])
def test_root_never_follows_another_users_link(shared, two_users, tmp_path, link_at):
    # A cache home in a sticky world-writable directory (what /tmp is for the HOME-less fallback).
    # The attacker makes cudafix/ there, with envs (or envs/<key>) a link to a directory of root's.
    # Before the fix root created envs/<key> there (os.makedirs follows links) and wrote hook.v1.
    root, py = shared
    _, attacker = two_users
    sticky = root / ("sticky-" + link_at)
    sticky.mkdir()
    os.chmod(str(sticky), 0o1777)
    target = root / ("roots-" + link_at)
    target.mkdir()
    key = paths.env_key(str(root / "v"))
    link = "$0/cudafix/envs" if link_at == "envs" else "$0/cudafix/envs/%s" % key
    p = users.as_user(attacker, ["sh", "-c", 'mkdir -p "$0/cudafix/envs" && rmdir "$0/cudafix/envs" 2>/dev/null; '
                                             'mkdir -p "$(dirname %s)" && ln -s "$1" %s' % (link, link), str(sticky), str(target)])
    assert p.returncode == 0, p.stderr
    env = clean_env(sticky)  # XDG_CACHE_HOME=<sticky>
    p = run(py, IMPORT, env, timeout=120)
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok", "")
    assert os.listdir(str(target)) == []


# -- 4. preloads -------------------------------------------------------------------------------


def _preload_finding(lib):
    return {"rule": "lib-shadowed", "severity": "error", "message": "libcfxtest.so.1 is shadowed",
            "fix": {"summary": "load torch's own libcfxtest.so.1", "auto": True, "applies_in": "process",
                    "preload": [{"soname": "libcfxtest.so.1", "path": str(lib)}]}}


MAPS = "import torch; print(any('libcfxtest' in ln for ln in open('/proc/self/maps')))"


@pytest.mark.parametrize("later_mode", [0o755, 0o777, 0o775])
def test_preload_refused_from_a_directory_others_can_write(shared, tmp_path, later_mode):
    _, py = shared
    # a real library in a directory only root can write (under root's 0700 home, not /tmp)
    libdir = pathlib.Path(tempfile.mkdtemp(prefix="cfxhh-lib-", dir=str(pathlib.Path.home())))
    try:
        os.chmod(str(libdir), 0o755)
        lib = libdir / "libcfxtest.so.1"
        shutil.copy2(os.path.realpath("/usr/lib/x86_64-linux-gnu/libz.so.1"), str(lib))
        env = clean_env(tmp_path / "cache", CUDAFIX_DEBUG="1")
        write_plan(py, json.dumps([_preload_finding(lib)]), env)
        os.chmod(str(libdir), later_mode)  # the cache entry was planned while it was safe
        p = run(py, MAPS, env, timeout=60)
        assert p.returncode == 0, p.stderr
        if later_mode == 0o755:
            assert p.stdout.strip() == "True" and "preloaded %s" % lib in p.stderr
        else:
            assert p.stdout.strip() == "False", p.stderr
            assert "not preloading %s for libcfxtest.so.1: directory %s can be written by a user other than root or the env's owner" % (lib, libdir) in p.stderr
    finally:
        shutil.rmtree(str(libdir), ignore_errors=True)


def test_preload_never_planned_from_tmp_or_the_current_directory(shared, tmp_path):
    _, py = shared
    lib = tmp_path / "libcfxtest.so.1"  # under /tmp: a sticky directory others can write
    shutil.copy2(os.path.realpath("/usr/lib/x86_64-linux-gnu/libz.so.1"), str(lib))
    env = clean_env(tmp_path / "cache", CUDAFIX_DEBUG="1")
    path = write_plan(py, json.dumps([_preload_finding(lib)]), env)
    from cudafix.hook import cache as hookcache

    (entry,), why = hookcache.read_cache(path)
    assert why is None and entry.preloads == ()  # no preload planned
    assert "Fix: load torch's own libcfxtest.so.1" in entry.warns[0][3]  # the finding is still said


# -- 5. the start module's own directory -----------------------------------------------------


@pytest.mark.parametrize("python", INTERPRETERS, ids=[os.path.basename(p) for p in INTERPRETERS])
def test_start_module_never_from_the_current_directory(python, tmp_path):
    py = make_venv(tmp_path / "v", python=python)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "_cudafix_startup.py").write_text("import sys\nsys.stdout.write('HIJACKED ')\ndef run(): pass\n")
    flags = ["-P"] if "3.8" not in python and "3.9" not in python and "3.10" not in python else []
    env = clean_env(tmp_path / "cache", PYTHONPATH=":/nonexistent")  # the empty entry: the cwd
    p = run(py, "import sys; sys.stdout.write('ok %s' % sys.modules['_cudafix_startup'].__file__)", env, flags, cwd=str(cwd))
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok %s/_cudafix_startup.py" % site_packages(tmp_path / "v"), "")


# -- 7. once per process group -----------------------------------------------------------------

LAUNCHER = r"""
import multiprocessing as mp, sys

def work(_):
    import torch  # noqa: F401

if __name__ == "__main__":
    how = sys.argv[1]
    if how == "pool":
        with mp.get_context("spawn").Pool(4) as pool:
            pool.map(work, range(8))
    else:
        ctx = mp.get_context(how)
        ps = [ctx.Process(target=work, args=(i,)) for i in range(4)]
        for p in ps:
            p.start()
        for p in ps:
            p.join()
    import torch  # noqa: F401  (not warned again: workers of this group said it)
"""


@pytest.fixture
def warning_venv(shared, tmp_path):
    _, py = shared
    env = clean_env(tmp_path / "cache")
    write_plan(py, json.dumps([ADVICE]), env)
    (tmp_path / "launch.py").write_text(LAUNCHER)
    return py, env, tmp_path


def _warnings(stderr):
    return [ln for ln in stderr.splitlines() if "CudafixWarning: cudafix [driver-too-old]" in ln]


@pytest.mark.parametrize("how", ["spawn", "fork", "forkserver", "pool"])
def test_launcher_workers_warn_once(warning_venv, how):
    py, env, d = warning_venv
    for _ in range(2):  # and the next command (a new process group) warns again
        p = subprocess.run([str(py), "launch.py", how], env=env, cwd=str(d), capture_output=True, text=True,
                           timeout=180, start_new_session=True)
        assert p.returncode == 0, p.stderr
        assert len(_warnings(p.stderr)) == 1, p.stderr


def test_xargs_parallel_warns_once(warning_venv):
    py, env, d = warning_venv
    p = subprocess.run(["sh", "-c", 'seq 4 | xargs -P 4 -I{} "$0" -c "import torch"', str(py)], env=env, cwd=str(d),
                       capture_output=True, text=True, timeout=180, start_new_session=True)
    assert p.returncode == 0, p.stderr
    assert len(_warnings(p.stderr)) == 1, p.stderr


DATALOADER = r"""
import torch
from torch.utils.data import DataLoader, Dataset

class DS(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        import torch  # noqa: F401
        return i

if __name__ == "__main__":
    print(sum(int(x) for x in DataLoader(DS(), num_workers=4, multiprocessing_context="%s")))
"""


@pytest.mark.parametrize("how", ["spawn", "fork"])
def test_dataloader_workers_warn_once(tmp_path, how):
    if not TORCH_CPU_SITE.is_dir():
        pytest.fail("needs the torch-cpu venv (tests/make_venvs.sh)")
    py = make_venv(tmp_path / "v", deps=[TORCH_CPU_SITE])
    env = clean_env(tmp_path / "cache")
    write_plan(py, json.dumps([ADVICE]), env)
    (tmp_path / "dl.py").write_text(DATALOADER % how)
    p = subprocess.run([str(py), "dl.py"], env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300,
                       start_new_session=True)
    assert (p.returncode, p.stdout) == (0, "28\n"), p.stderr
    assert len(_warnings(p.stderr)) == 1, p.stderr


def test_preload_refusal_unit(tmp_path, monkeypatch):
    from cudafix.store import safefs

    libc = os.path.realpath("/usr/lib/x86_64-linux-gnu/libc.so.6")
    assert safefs.preload_refusal(libc, "/usr/local/cuda/lib64") is None
    assert safefs.preload_refusal("libc.so.6", None) == "not an absolute path"
    # the current directory through an empty or relative LD_LIBRARY_PATH entry
    libdir = pathlib.Path(tempfile.mkdtemp(prefix="cfxhh-cwd-", dir=str(pathlib.Path.home())))
    try:
        os.chmod(str(libdir), 0o755)
        (libdir / "sub").mkdir()
        shutil.copy2(libc, str(libdir / "libcuda.so.1"))
        shutil.copy2(libc, str(libdir / "sub" / "libcuda.so.1"))
        monkeypatch.chdir(str(libdir))
        assert safefs.preload_refusal(str(libdir / "libcuda.so.1"), "/x") is None
        assert "current directory or relative" in safefs.preload_refusal(str(libdir / "libcuda.so.1"), "/x::/y")
        assert "current directory or relative" in safefs.preload_refusal(str(libdir / "sub" / "libcuda.so.1"), "sub")
        # a file of another user (not the env's owner) in a good directory
        os.chown(str(libdir / "libcuda.so.1"), 65534, 65534)
        assert "not a file of root or the env's owner" in safefs.preload_refusal(str(libdir / "libcuda.so.1"), None)
        assert safefs.preload_refusal(str(libdir / "libcuda.so.1"), None, owners=(65534,)) is None
    finally:
        shutil.rmtree(str(libdir), ignore_errors=True)


def test_forward_compat_repair_prefers_the_drivers_own_copy():
    from cudafix.model.snapshot import LibraryResolution, Snapshot
    from cudafix.rules import driver

    snap = Snapshot()
    snap.libraries.ld_library_path = ["/opt/evil/lib", "/usr/local/cuda-13.0/compat"]
    snap.libraries.resolutions = [LibraryResolution(
        soname="libcuda.so.1", requested_by="libcudart.so.13", resolved="/usr/local/cuda-13.0/compat/libcuda.so.580.95.05",
        others=["/opt/evil/lib/libcuda.so.580.159.04", "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"])]
    assert driver._system_libcuda(snap, "580.159.04") == "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"
    snap.libraries.resolutions[0].others = ["/opt/evil/lib/libcuda.so.580.159.04"]
    assert driver._system_libcuda(snap, "580.159.04") == "/opt/evil/lib/libcuda.so.580.159.04"  # vetted at plan time


def test_one_trust_check_and_one_stat_signature():
    """Issue 17: owner/permission checks and stat signatures live in cudafix.store.safefs only --
    and, issue 36, the trusted loader beside it (store/trustload.py), which safefs's load check
    delegates to (the check and the load are one resolution there)."""
    import re

    pkg = pathlib.Path(__file__).resolve().parent.parent / "cudafix"
    offenders = []
    for path in sorted(pkg.rglob("*.py")):
        if path.relative_to(pkg).as_posix() in ("store/safefs.py", "store/trustload.py"):
            continue
        text = path.read_text()
        for pattern in (r"\.st_uid\b", r"0o022\b", r"def stat_sig\b", r"def trusted\b", r"S_IWOTH|S_IWGRP"):
            if re.search(pattern, text):
                offenders.append("%s: %s" % (path.relative_to(pkg), pattern))
    assert offenders == []
