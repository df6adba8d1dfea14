"""Activation where no cache can be written (issue 18 item 8), replayed in the real shells.

sh and fish eval the code python prints; tcsh sourced the cache python wrote, so without a cache
(HOME unset, a cache directory that cannot be created) it skipped the fix with a false "the env's
python could not run cudafix".  Now tcsh sources a private file python writes for that one
activation (cudafix.activation.runtime.write_private_dir) and removes it.
"""

from __future__ import annotations

import os
import pathlib
import stat

import pytest

from cudafix.model.findings import Finding
from cudafix.model.fixes import EnvOp, EnvPatch, Fix
from cudafix.activation import runtime as activation
from tests import conda_replay as cr

ALL_SHELLS = [s for s in cr.SHELLS if cr.available(s)]

# HOME unset; or a cache base that is a path below a character device: no user, root included,
# can create it (ENOTDIR)
NO_CACHE = {"home-unset": ({}, ("HOME",)), "cache-uncreatable": ({"XDG_CACHE_HOME": "/dev/null/cache"}, ())}


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = cr.make_prefix(tmp_path_factory.mktemp("nocache") / "env '\"$(touch x) \u00fc")
    cr.set_findings(p, [Finding(rule="cuda-home-mismatch", severity="warning", message="m",
                                fix=Fix(summary="set CUDA_HOME (matches torch)", auto=True, applies_in="activation",
                                        env=EnvPatch((EnvOp("set", "CUDA_HOME", "/opt/cuda '!0"),))))])
    return p


# zsh and fish set HOME from the password database when it is unset: no such case for them
CASES = [(s, how) for how in sorted(NO_CACHE) for s in ALL_SHELLS if not (how == "home-unset" and s in ("zsh", "fish"))]


@pytest.mark.parametrize("shell,how", CASES)
def test_fix_applied_without_a_cache(shell, how, prefix, tmp_path):
    extra, drop = NO_CACHE[how]
    home = tmp_path / "home"
    home.mkdir()
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = cr.base_env(home, dict(extra, CUDA_HOME="/usr/local/cuda", TMPDIR=str(tmpdir)), drop=drop)
    calls = cr.cold_calls(prefix)
    r = cr.Replay(shell, prefix, tmp_path / "w", env).snap("before").activate().snap("during")
    r.activate().snap("during2").deactivate().snap("after")
    p, envs = r.run()
    assert p.returncode == 0, p.stderr
    assert p.stdout == b""
    assert list(r.cwd.iterdir()) == []
    assert envs["during"][b"CUDA_HOME"] == b"/opt/cuda '!0"
    assert envs["during2"] == envs["during"]
    assert envs["after"] == envs["before"]
    lines = p.stderr.decode().splitlines()
    assert lines == ["cudafix: set CUDA_HOME to /opt/cuda '!0 (matches torch) \u2014 cudafix status"] * 2, lines
    assert cr.cold_calls(prefix) == calls + 2  # no cache: both activations took the cold path
    assert list(tmpdir.iterdir()) == []  # tcsh removed the private file and its directory
    assert not any(home.rglob("*.cudafix"))


def test_private_dir_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    d = activation.write_private_dir("setenv X 1\n", "activate.csh")
    assert pathlib.Path(d).parent == tmp_path
    st_d = os.lstat(d)
    st_f = os.lstat(os.path.join(d, "activate.csh"))
    assert stat.S_ISDIR(st_d.st_mode) and stat.S_IMODE(st_d.st_mode) == 0o700 and st_d.st_uid == os.getuid()
    assert stat.S_ISREG(st_f.st_mode) and stat.S_IMODE(st_f.st_mode) == 0o600
    assert pathlib.Path(d, "activate.csh").read_text() == "setenv X 1\n"


@pytest.mark.skipif(not cr.available("tcsh"), reason="tcsh missing")
def test_tcsh_refuses_a_file_others_can_write(prefix, tmp_path, monkeypatch):
    """A directory python printed that is not private is not sourced: one true line instead."""
    fake = tmp_path / "fakepy"
    fake.mkdir()
    evil = tmp_path / "shared"
    evil.mkdir()
    evil.chmod(0o777)
    (evil / "activate.csh").write_text("setenv PWNED 1\n")
    (evil / "activate.csh").chmod(0o666)
    py = fake / "bin" / "python"
    py.parent.mkdir()
    py.write_text("#!/bin/sh\nprintf '%%s\\n' %s\n" % cr.QUOTE["sh"](str(evil)))
    py.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    script = "setenv CONDA_PREFIX %s\nsource %s\nenv -0 > %s\n" % (
        cr.QUOTE["csh"](str(fake)), cr.QUOTE["csh"](str(cr.REPO / "activate.d" / "cudafix.csh")), cr.QUOTE["csh"](str(tmp_path / "env")))
    (tmp_path / "w").mkdir()
    p = cr.run_shell("tcsh", script, cr.base_env(home), tmp_path / "w")
    assert p.returncode == 0, p.stderr
    assert p.stderr.decode().splitlines() == ["cudafix: skipped (the file the env's python wrote is not a private file of this user)"]
    assert b"PWNED" not in cr.read_env(tmp_path / "env")
    assert (evil / "activate.csh").exists()  # and not removed either


@pytest.mark.parametrize("shell", ALL_SHELLS)
def test_cache_behind_a_symlink_is_not_sourced(shell, prefix, tmp_path):
    """The cache file replaced by a symlink (even to a file of ours) is not sourced: cold path."""
    home = tmp_path / "home"
    home.mkdir()
    env = cr.base_env(home, {"CUDA_HOME": "/usr/local/cuda"})
    r = cr.Replay(shell, prefix, tmp_path / "1", env).snap("before").activate().snap("during")
    p, envs = r.run()
    assert p.returncode == 0, p.stderr
    fam = cr.SHELLS[shell][1]
    cache = next(home.rglob("activate." + fam))
    planted = tmp_path / "planted"
    planted.write_text({"sh": "export PWNED=1\n_cudafix_fresh=1\n", "fish": "set -gx PWNED 1\nset -g _cudafix_fresh 1\n",
                        "csh": "setenv PWNED 1\nset _cudafix_fresh = 1\n"}[fam])
    cache.unlink()
    cache.symlink_to(planted)
    calls = cr.cold_calls(prefix)
    r = cr.Replay(shell, prefix, tmp_path / "2", env).snap("before").activate().snap("during")
    p, envs = r.run()
    assert p.returncode == 0, p.stderr
    assert b"PWNED" not in envs["during"]
    assert envs["during"][b"CUDA_HOME"] == b"/opt/cuda '!0"
    assert cr.cold_calls(prefix) == calls + 1


@pytest.mark.parametrize("entry", ["fast", "click"])
def test_print_dir_from_both_entry_points(entry, tmp_path, monkeypatch):
    """`python -m cudafix shell` (fast_main) and the click command print the same file's directory."""
    import tempfile

    from click.testing import CliRunner

    from cudafix.cli import main

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    args = ["shell", "--shell", "tcsh", "--deactivate", "--print-dir"]
    if entry == "fast":
        import io
        import sys

        buf = io.StringIO()
        monkeypatch.setattr(sys, "stdout", buf)
        assert activation.fast_main(args) == 0
        out = buf.getvalue()
    else:
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
        out = r.output
    d = pathlib.Path(out.strip())
    assert out.endswith("\n") and d.parent == tmp_path
    assert (d / "activate.csh").read_text() == activation.render_deactivate("tcsh")
