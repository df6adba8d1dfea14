"""Issue 21, hardening item 7 (low): a quoted CUDA_HOME export, an idempotent `hooks uninstall
--shell`, `cache clear` never through another user's link, no hang on a FIFO in a dist-info, and a
Kubernetes manifest that holds no GPU.  Each fails on 51656f0.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests import users
from tests.conftest import REPO, run_dev_cudafix

OTHER = "cfxsec-low"


other = users.module_user(OTHER)


# -- fix prints a CUDA_HOME export that works when pasted -----------------------------------------

@pytest.mark.parametrize("shell", ["sh", "bash", "dash"])
def test_cuda_home_export_is_quoted_for_the_shell(shell, tmp_path):
    from cudafix.model.snapshot import Snapshot, Toolkit
    from cudafix.rules.toolkit import check_cuda_home_missing

    path = str(tmp_path / "cuda 12.4 $(touch pwned) 'x'")  # a real directory with a hostile name
    os.makedirs(os.path.join(path, "bin"))
    snap = Snapshot()
    snap.env["CUDA_HOME"] = "/nonexistent"
    snap.toolkits.unknown["CUDA_HOME"] = "/nonexistent: does not exist"
    snap.toolkits.toolkits = [Toolkit(path=path, version="12.4", nvcc=os.path.join(path, "bin", "nvcc"))]
    (o,) = [o for o in check_cuda_home_missing(snap) if o.fix is not None]
    (cmd,) = o.fix.commands
    # the truth: what the real shell sets when the printed line is pasted
    p = subprocess.run([shell, "-c", cmd + '\nprintf %s "$CUDA_HOME"'], capture_output=True, text=True, cwd=str(tmp_path),
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == path
    assert not (tmp_path / "pwned").exists()


# -- a second `hooks uninstall --shell` ------------------------------------------------------------

from tests.test_uninstall_active import ACTIVE, BEFORE, FIXTURE, PRELUDE, env, wheel  # noqa: E402,F401  (fixtures)


def test_second_hooks_uninstall_succeeds_and_still_prints_the_undo_code(env, tmp_path):  # noqa: F811
    # run from a directory of its own: from the checkout, `-m cudafix` would import the checkout
    # (whose source files never go away) instead of the wheel installed in the env
    script = '''
show; conda_activate; show
"$P/bin/python" -m cudafix hooks uninstall >/dev/null 2>&1   # a first uninstall, not in this shell
code=$("$P/bin/python" -m cudafix hooks uninstall --shell bash 2>/dev/null) && eval "$code" && echo chained; show
"$P/bin/python" -m cudafix hooks uninstall --shell bash >/dev/null 2>&1; echo "third=$?"
"$P/bin/python" -c 'import cudafix, sys; print("from-env" if cudafix.__file__.startswith(sys.prefix) else cudafix.__file__)'
'''
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = subprocess.run(["bash", "-c", PRELUDE + script, "bash", str(env["prefix"]), str(FIXTURE)], env=env["env"],
                          capture_output=True, text=True, timeout=600, cwd=str(cwd))
    out = proc.stdout.splitlines()
    assert out == [BEFORE, ACTIVE, "chained", BEFORE, "third=0", "from-env"], proc.stdout + proc.stderr


# -- cache clear --------------------------------------------------------------------------------

def test_cache_clear_never_follows_another_users_link(tmp_path, other):
    from cudafix.store import paths

    prefix = str(tmp_path / "env")
    os.makedirs(prefix)
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    # root's own data elsewhere, laid out like a cache
    victim = tmp_path / "victim"
    key_dir = victim / "envs" / paths.env_key(prefix)
    key_dir.mkdir(parents=True, mode=0o700)
    for d in (victim, victim / "envs", key_dir):
        d.chmod(0o700)
    (key_dir / "precious").write_text("root's")
    link = xdg / "cudafix"
    link.symlink_to(victim)
    os.lchown(str(link), other.pw_uid, other.pw_gid)  # the other user's link on the way
    res = run_dev_cudafix("cache", "clear", "--prefix", prefix, env=dict(os.environ, XDG_CACHE_HOME=str(xdg)))
    assert res.returncode == 0, res.stderr
    assert (key_dir / "precious").read_text() == "root's"
    assert "nothing to remove" in res.stdout


def test_cache_clear_removes_our_own(tmp_path):
    """The control: the same layout, ours and without a link, is removed."""
    from cudafix.store import paths

    prefix = str(tmp_path / "env")
    os.makedirs(prefix)
    xdg = tmp_path / "xdg"
    key_dir = xdg / "cudafix" / "envs" / paths.env_key(prefix)
    key_dir.mkdir(parents=True)
    for d in (xdg / "cudafix", xdg / "cudafix" / "envs", key_dir):
        d.chmod(0o700)
    res = run_dev_cudafix("cache", "clear", "--prefix", prefix, env=dict(os.environ, XDG_CACHE_HOME=str(xdg)))
    assert res.returncode == 0 and not key_dir.exists(), res.stdout + res.stderr


# -- a FIFO in a dist-info ----------------------------------------------------------------------

def test_fifo_in_a_dist_info_does_not_hang_status(tmp_path):
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    site = pathlib.Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                       capture_output=True, text=True, check=True).stdout.strip())
    tdi = site / "torch-2.4.0.dist-info"
    tdi.mkdir()
    os.mkfifo(str(tdi / "METADATA"))  # nobody ever writes it: an open for reading blocks forever
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    ndi = site / "nvidia_cublas_cu12-12.4.5.8.dist-info"
    ndi.mkdir()
    os.mkfifo(str(ndi / "RECORD"))
    (ndi / "METADATA").write_text("Name: nvidia-cublas-cu12\nVersion: 12.4.5.8\n")
    e = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    try:
        res = run_dev_cudafix("status", "--python", str(py), env=e, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("`cudafix status` hung on a FIFO in a dist-info")
    assert res.returncode in (0, 1), res.stderr[-2000:]
    assert "torch" in res.stdout


# -- the Kubernetes manifest ----------------------------------------------------------------------

def test_daemonset_claims_no_gpu_and_sees_the_driver():
    text = (REPO / "deploy" / "kubernetes" / "cudafix-daemonset.yaml").read_text()
    body = [ln.split("#", 1)[0] for ln in text.splitlines()]
    spec = "\n".join(body)
    assert "nvidia.com/gpu:" not in spec.replace("nvidia.com/gpu.present", ""), "a GPU claim is held for good"
    assert "- name: NVIDIA_VISIBLE_DEVICES" in spec and "value: all" in spec
    assert "status.phase!=Running" in text  # how to find the nodes whose pod stays Pending


def test_demangle_never_runs_a_cxxfilt_from_the_current_directory(tmp_path, monkeypatch):
    """A missing symbol is named with c++filt; a `.` or empty entry in PATH must not make cudafix
    run one planted in the working directory (issue 21 item 1's rule, for programs too)."""
    from cudafix.probes.pyenv import extensions

    mark = tmp_path / "planted-ran"
    fake = tmp_path / "c++filt"
    fake.write_text("#!/bin/sh\n: > %s\necho planted\n" % mark)
    fake.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for path in (".:/usr/bin", ":/usr/bin", "/usr/bin:"):
        monkeypatch.setenv("PATH", path)
        got = extensions.demangle("_ZN3c104cuda9SetDeviceEa")
        assert not mark.exists(), "PATH=%r ran ./c++filt" % path
        if shutil.which("c++filt", path="/usr/bin"):
            assert got == subprocess.run(["/usr/bin/c++filt", "_ZN3c104cuda9SetDeviceEa"], capture_output=True,
                                         text=True, timeout=30).stdout.strip()
