"""The Slurm prolog and the NHC module, as root, against hostile settings (issue 21, item 6; item 1
for their `python -m`).

The prolog is run as Slurm runs it (a root /bin/sh with an almost empty environment; `scontrol`
fails here for want of a controller, SLURM_CONF=/dev/null, so "drained" is read from the
prolog's own exit 1 and its stderr line).  The NHC module through NHC's documented check contract
(tests/test_fleet_engines.py's harness).  Every case fails on 51656f0 except the controls.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from tests import users
from tests.test_fleet_engines import NHC_HARNESS

REPO = pathlib.Path(__file__).resolve().parent.parent
PROLOG = REPO / "deploy" / "slurm" / "cudafix-prolog.sh"
NHC = REPO / "deploy" / "nhc" / "cudafix.nhc"
# a root-owned interpreter with cudafix's requirements; this checkout through PYTHONPATH
PY = pathlib.Path(sys.executable)
OTHER = "cfxsec-env"
SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]


other = users.module_user(OTHER)


def _conf(d: pathlib.Path, body: str, mode: int = 0o644, dmode: int = 0o755) -> pathlib.Path:
    d.mkdir(mode=0o755, exist_ok=True)
    conf = d / "prolog.env"
    conf.write_text(body)
    conf.chmod(mode)
    d.chmod(dmode)
    return conf


def _prolog(shell: str, conf: pathlib.Path, cwd: pathlib.Path = pathlib.Path("/"), timeout: float = 120):
    env = {"CUDAFIX_PROLOG_ENV": str(conf), "SLURMD_NODENAME": "nodeX", "SLURM_CONF": "/dev/null"}
    t0 = time.monotonic()
    p = subprocess.run([shell, str(PROLOG)], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - t0


def _settings(marker: pathlib.Path, **kw: str) -> str:
    lines = ["CUDAFIX_PYTHON=%s" % PY, "PYTHONPATH=%s" % REPO, "touch %s" % marker]
    lines += ["%s=%s" % kv for kv in kw.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("case", ["world-writable", "group-writable", "dir-world-writable", "symlink", "control"])
def test_prolog_sources_only_a_settings_file_nobody_else_can_write(shell, case, tmp_path):
    marker = tmp_path / "sourced"
    d = tmp_path / "etc-cudafix"
    body = _settings(marker)
    conf = {"world-writable": lambda: _conf(d, body, 0o666), "group-writable": lambda: _conf(d, body, 0o664),
            "dir-world-writable": lambda: _conf(d, body, 0o644, 0o777), "symlink": lambda: _conf(d, body),
            "control": lambda: _conf(d, body)}[case]()
    if case == "symlink":
        link = tmp_path / "link.env"
        link.symlink_to(conf)
        conf = link
    p, _ = _prolog(shell, conf)
    if case == "control":
        assert marker.exists(), p.stderr
        assert p.returncode == 1 or p.returncode == 0, p.stderr  # this machine's own verdict
    else:
        assert not marker.exists(), "a settings file others can write was sourced as root"
        assert "not sourced" in p.stderr, p.stderr


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("policy", ["pass", "drain"])
def test_prolog_python_without_cudafix_follows_the_cannot_run_policy(shell, policy, tmp_path):
    # the env's python runs, but cannot import cudafix (exit 1, a traceback): not "errors found"
    conf = _conf(tmp_path / "etc", "CUDAFIX_PYTHON=%s\nCUDAFIX_PROLOG_CANNOT_RUN=%s\n" % (PY, policy))
    p, _ = _prolog(shell, conf)
    if policy == "pass":
        assert p.returncode == 0, p.stderr
        assert "drained" not in p.stderr
    else:
        assert p.returncode == 1 and "cudafix check could not run (exit 1)" in p.stderr, p.stderr
        assert "No module named cudafix" in p.stderr, p.stderr


def _fake_python(path: pathlib.Path, body: str) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("shell", SHELLS)
def test_prolog_times_out(shell, tmp_path):
    py = _fake_python(tmp_path / "env" / "bin" / "python", "exec sleep 60\n")
    conf = _conf(tmp_path / "etc", "CUDAFIX_PYTHON=%s\nCUDAFIX_PROLOG_TIMEOUT=2\n" % py)
    p, took = _prolog(shell, conf, timeout=50)
    assert took < 40, took
    assert p.returncode == 1 and "timed out after 2s" in p.stderr, p.stderr


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("what", ["env-dir", "python", "bin-world-writable"])
def test_prolog_never_runs_an_env_of_another_user_as_root(shell, what, tmp_path, other):
    ran = tmp_path / "ran"
    env = tmp_path / "env"
    py = _fake_python(env / "bin" / "python", "touch %s\necho '{\"findings\": []}'\n" % ran)
    env.chmod(0o755)
    if what == "env-dir":
        os.chown(str(env), other.pw_uid, other.pw_gid)
    elif what == "python":
        os.chown(str(py), other.pw_uid, other.pw_gid)
    else:
        (env / "bin").chmod(0o777)
    conf = _conf(tmp_path / "etc", "CUDAFIX_PYTHON=%s\n" % py)
    p, _ = _prolog(shell, conf)
    assert not ran.exists(), "root ran %s" % py
    assert p.returncode == 1 and "not run as root" in p.stderr, p.stderr


def _plant(cwd: pathlib.Path, marker: pathlib.Path) -> None:
    pkg = cwd / "cudafix"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("open(%r, 'a').write('ran\\n')\n" % str(marker))
    (pkg / "__main__.py").write_text("print('{\"findings\": []}')\n")


@pytest.mark.parametrize("shell", SHELLS)
def test_prolog_never_imports_cudafix_from_its_current_directory(shell, tmp_path):
    marker = tmp_path / "ran"
    cwd = tmp_path / "cwd"
    _plant(cwd, marker)
    # the env's python has no cudafix: only a planted one could say "healthy"
    conf = _conf(tmp_path / "etc", "CUDAFIX_PYTHON=%s\n" % PY)
    p, _ = _prolog(shell, conf, cwd=cwd)
    assert not marker.exists()
    assert p.returncode == 1 and "could not run" in p.stderr, p.stderr


def _nhc(args, env, cwd="/", timeout=120):
    out = subprocess.run(["bash", "-c", NHC_HARNESS, "nhc", str(NHC)] + [str(a) for a in args], capture_output=True,
                         text=True, env=env, timeout=timeout, cwd=str(cwd))
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line), out


@pytest.mark.parametrize("policy", ["pass", "drain"])
def test_nhc_python_without_cudafix_follows_the_cannot_run_policy(policy, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "CUDAFIX_PROLOG_CANNOT_RUN": policy}
    got, out = _nhc([PY], env)
    if policy == "pass":
        assert got.get("rc") == "0" and got.get("die") == "", out.stdout + out.stderr
    else:
        assert got.get("rc") == "1" and got.get("die", "").startswith("cudafix check could not run (exit 1)"), out.stdout


def test_nhc_never_imports_cudafix_from_its_current_directory(tmp_path):
    marker = tmp_path / "ran"
    cwd = tmp_path / "cwd"
    _plant(cwd, marker)
    got, out = _nhc([PY], {"PATH": "/usr/bin:/bin"}, cwd=cwd)
    assert not marker.exists()
    assert got.get("rc") == "1" and "could not run" in got.get("die", ""), out.stdout + out.stderr


def test_nhc_times_out_and_never_runs_an_env_of_another_user(tmp_path, other):
    slow = _fake_python(tmp_path / "slow" / "bin" / "python", "exec sleep 60\n")
    t0 = time.monotonic()
    got, out = _nhc([slow], {"PATH": "/usr/bin:/bin", "CUDAFIX_PROLOG_TIMEOUT": "2"}, timeout=50)
    assert time.monotonic() - t0 < 40
    assert got.get("rc") == "1" and "timed out after 2s" in got.get("die", ""), out.stdout
    ran = tmp_path / "ran"
    py = _fake_python(tmp_path / "theirs" / "bin" / "python", "touch %s\necho '{\"findings\": []}'\n" % ran)
    os.chown(str(tmp_path / "theirs"), other.pw_uid, other.pw_gid)
    got, out = _nhc([py], {"PATH": "/usr/bin:/bin"})
    assert not ran.exists()
    assert got.get("rc") == "1" and "not run as root" in got.get("die", ""), out.stdout
