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
import tempfile
import time

import pytest

from tests import users, worldenv
from tests.test_fleet_engines import NHC_HARNESS

REPO = pathlib.Path(__file__).resolve().parent.parent
PROLOG = REPO / "deploy" / "slurm" / "cudafix-prolog.sh"
NHC = REPO / "deploy" / "nhc" / "cudafix.nhc"
# a root-owned interpreter with cudafix's requirements; this checkout through PYTHONPATH.  A venv
# of the system's python in a world-traversable directory (set by `_world`): since issue 36 the
# prolog and NHC run the env's python as an unprivileged user, who cannot reach /root's pyenv.
PY = pathlib.Path(sys.executable)
OTHER = "cfxsec-env"
SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]


other = users.module_user(OTHER)


@pytest.fixture(scope="module", autouse=True)
def _world():
    global PY
    root = worldenv.world_dir("cfxdeploy-")
    PY = worldenv.world_venv(root / "base")
    yield root
    shutil.rmtree(str(root), ignore_errors=True)


@pytest.fixture
def tmp_path(_world, request):
    """A fresh directory every user can traverse (the env's python runs unprivileged)."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="t-", dir=str(_world)))
    os.chmod(str(d), 0o755)
    return d


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


# -- issue 36, H3: root never executes the env -------------------------------------------------------

PLANT = "import os; open(%r, 'a').write('%%d\\n' %% os.geteuid())\n"
RUNNERS = [("prolog", s) for s in SHELLS] + [("nhc", "bash")]


def _plant_in_env(placement: str, site: pathlib.Path, marker: pathlib.Path, other) -> None:
    """Another user (a real one, through setpriv) who can write one part of a root-owned env
    plants code Python runs at start: a .pth line, or cudafix's own package."""
    line = PLANT % str(marker)
    if placement == "site-packages":  # the usual team-env layout: site-packages writable by the team
        os.chown(str(site), other.pw_uid, other.pw_gid)
        cmd = "printf '%s' \"$1\" > \"$0/zz-team.pth\""
        p = users.as_user(other, ["sh", "-c", cmd, str(site), line.replace("\n", "")])
    elif placement == "lib-python":  # lib/python3.X writable: the whole site-packages swapped
        os.chown(str(site.parent), other.pw_uid, other.pw_gid)
        cmd = ("mv \"$0\" \"$0.old\" && mkdir \"$0\" && cp -r \"$0.old/.\" \"$0/\" && "
               "printf '%s' \"$1\" > \"$0/zz-team.pth\"")
        p = users.as_user(other, ["sh", "-c", cmd, str(site), line.replace("\n", "")])
    else:  # cudafix's own package
        for d, _dirs, files in os.walk(str(site / "cudafix")):
            os.chown(d, other.pw_uid, other.pw_gid)
            for f in files:
                os.chown(os.path.join(d, f), other.pw_uid, other.pw_gid)
        cmd = "printf '%s' \"$1\" >> \"$0/cudafix/__init__.py\""
        p = users.as_user(other, ["sh", "-c", cmd, str(site), "\n" + line])
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("runner, shell", RUNNERS)
@pytest.mark.parametrize("placement", ["site-packages", "lib-python", "cudafix-package"])
def test_root_never_runs_code_another_user_planted_in_the_env(runner, shell, placement, tmp_path, other):
    """H3: an env of root's (its python, bin/ and directory pass the ownership checks) in which
    another user can write site-packages, lib/python3.X or cudafix's package.  The planted code
    runs at interpreter start; it must never run as root (on 89c72a4 it did, 6/6)."""
    marker = tmp_path / "planted-ran"
    marker.touch()
    marker.chmod(0o666)
    py = worldenv.world_venv(tmp_path / "env", cudafix=True)
    _plant_in_env(placement, worldenv.site_packages(py), marker, other)
    if runner == "prolog":
        p, _ = _prolog(shell, _conf(tmp_path / "etc", "CUDAFIX_PYTHON=%s\n" % py))
        said = p.stderr
    else:
        got, out = _nhc([py], {"PATH": "/usr/bin:/bin"})
        said = out.stdout + out.stderr
    euids = marker.read_text().split()
    assert "0" not in euids, "root ran the code another user planted in %s: %s" % (placement, said)
    assert euids, "the planted code never ran: the case tests nothing (%s)" % said
