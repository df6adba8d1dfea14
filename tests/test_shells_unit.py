"""Renderers, plan and hooks: units, each checked against a real shell or the file system."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudafix.activation import runtime as activation
from cudafix.activation import shells
from cudafix.activation.plan import plan_from_findings
from cudafix.cli.shell import script_sources
from cudafix.model.findings import Finding
from cudafix.model.fixes import EnvOp, EnvPatch, Fix
from tests import conda_replay as cr

REPO = cr.REPO


def test_shipped_scripts_are_the_rendered_ones():
    for rel, text in script_sources():
        assert (REPO / rel).read_text() == text, "regenerate %s from cudafix/shells" % rel


# -- quoting: what each real shell reads back is the value ---------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
PRINT = {"sh": "printf '%%s\\0' %s\n", "fish": "printf '%%s\\0' %s\n", "csh": "setenv V %s\nprintenv V\nprintf '\\0'\n"}


@pytest.mark.parametrize("shell", [s for s in ("dash", "bash", "zsh", "ash", "fish", "tcsh") if cr.available(s)])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(TEXT, min_size=1, max_size=8))
def test_quote_round_trips(shell, values, tmp_path):
    fam = cr.SHELLS[shell][1]
    q = shells.renderer(fam).quote
    script = "".join(PRINT[fam] % q(v) for v in values)
    f = tmp_path / "q"
    f.write_text(script, encoding="utf-8")
    p = subprocess.run(cr.SHELLS[shell][0] + [str(f)], capture_output=True, cwd=str(tmp_path), env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode("utf-8").split("\0")[:-1]
    if fam == "csh":  # printenv ends each value with one newline
        assert all(o.endswith("\n") for o in out)
        out = [o[:-1] for o in out]
    assert out == values
    assert sorted(os.listdir(str(tmp_path))) == ["q"]


# -- the plan ----------------------------------------------------------------------------------

def _f(rule, ops, summary="x", auto=True, applies_in="activation", severity="warning"):
    return Finding(rule=rule, severity=severity, message=rule, fix=Fix(summary=summary, auto=auto, applies_in=applies_in, env=EnvPatch(tuple(ops))))


def test_plan_final_values_and_summary():
    env = {"CUDA_HOME": "/usr/local/cuda", "LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib64:/opt/x", "CUDA_VISIBLE_DEVICES": ""}
    found = [
        _f("cuda-home-mismatch", [EnvOp("set", "CUDA_HOME", "/usr/local/cuda-11.3")], "Set CUDA_HOME (matches torch 1.10.0+cu113)"),
        _f("lib-shadowed", [EnvOp("remove-path", "LD_LIBRARY_PATH", "/usr/local/cuda-12.1/lib64")], applies_in="both"),
        _f("process-only", [EnvOp("set", "CUDA_MODULE_LOADING", "LAZY")], applies_in="process"),
        _f("advice", [EnvOp("set", "X", "1")], auto=False, severity="error"),
        _f("path-is-conda's", [EnvOp("prepend-path", "PATH", "/opt/cuda/bin")]),
        Finding(rule="info", severity="info", message="fine"),
    ]
    plan = plan_from_findings(found, env)
    assert plan.changes == (("CUDA_HOME", "/usr/local/cuda-11.3"), ("LD_LIBRARY_PATH", "/opt/x"))
    assert plan.summary == (
        "cudafix: set CUDA_HOME to /usr/local/cuda-11.3 (matches torch 1.10.0+cu113); "
        "removed /usr/local/cuda-12.1/lib64 from LD_LIBRARY_PATH (lib-shadowed: lib-shadowed); "
        "advice: advice; process-only: process-only; path-is-conda's: path-is-conda's \u2014 cudafix status"
    )
    # removing the last entry unsets the variable
    plan = plan_from_findings(found[1:2], {"LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib64"})
    assert plan.changes == (("LD_LIBRARY_PATH", None),)


def test_plan_on_recorded_yolov9_h100():
    """The real rules on the recorded yolov9 / H100 / conda torch 1.10 snapshot (issue 8)."""
    from cudafix import rules
    from cudafix.model.snapshot import Snapshot

    snap = Snapshot.load(str(REPO / "tests/fixtures/yolov9/yolov9-h100-conda-cudahome.json"))
    plan = plan_from_findings(rules.findings(rules.run(snap)), snap.env)
    # (both warnings, in the rules' order)
    assert dict(plan.changes) == {"CUDA_HOME": "/usr/local/cuda-11.3", "CUDA_CACHE_MAXSIZE": "4294967296"}
    # arch-ptx-jit: the cache is raised, but the native-build advice is still open
    assert plan.summary.startswith("cudafix: set ")
    assert "set CUDA_HOME to /usr/local/cuda-11.3 (" in plan.summary
    assert "set CUDA_CACHE_MAXSIZE to 4294967296 (" in plan.summary
    msg = [f for f in rules.findings(rules.run(snap)) if f.rule == "arch-ptx-jit"][0].message
    assert plan.summary.count(msg) == 1 and plan.summary.endswith("; arch-ptx-jit [GPU0] still open \u2014 cudafix status"), plan.summary


def test_plan_all_well_is_silent():
    assert plan_from_findings([], {"CUDA_HOME": "/x"}) == shells.ActivationPlan()
    # a safe fix that changes nothing: no change, but the finding still counts
    plan = plan_from_findings([_f("r", [EnvOp("set", "CUDA_HOME", "/x")])], {"CUDA_HOME": "/x"})
    assert plan.changes == () and plan.summary == "cudafix: r: r \u2014 cudafix status"


def test_plan_refuses_unmanageable_names():
    with pytest.raises(ValueError):
        shells.ActivationPlan(changes=(("PATH", "/x"),))
    with pytest.raises(ValueError):
        shells.ActivationPlan(changes=(("A;B", "/x"),))


def test_restored_env_matches_the_shells(tmp_path):
    """Python's model of the restore code agrees with dash and fish running it."""
    env = {
        "PATH": "/usr/bin:/bin",
        "CUDA_HOME": "/new", "_CUDAFIX_OLD_CUDA_HOME": "s:/old", "_CUDAFIX_NEW_CUDA_HOME": "s:/new",
        "CUDA_CACHE_DISABLE": "", "_CUDAFIX_OLD_CUDA_CACHE_DISABLE": "u", "_CUDAFIX_NEW_CUDA_CACHE_DISABLE": "s:",
        "PYTORCH_CUDA_ALLOC_CONF": "mine", "_CUDAFIX_OLD_PYTORCH_CUDA_ALLOC_CONF": "s:orig",
        "_CUDAFIX_NEW_PYTORCH_CUDA_ALLOC_CONF": "s:ours",
        "_CUDAFIX_OLD_CUDA_CACHE_MAXSIZE": "s:\n'x", "_CUDAFIX_NEW_CUDA_CACHE_MAXSIZE": "u",
        # listed, but not variables cudafix manages: left alone, backups included
        "_CUDAFIX_OLD_PATH": "s:/evil", "_CUDAFIX_NEW_PATH": "s:/usr/bin:/bin",
        "_CUDAFIX_VARS": "CUDA_HOME CUDA_CACHE_DISABLE PYTORCH_CUDA_ALLOC_CONF CUDA_CACHE_MAXSIZE PATH BAD;NAME",
    }
    want = activation.restored_env(env)
    assert want["CUDA_HOME"] == "/old" and "CUDA_CACHE_DISABLE" not in want
    assert want["PYTORCH_CUDA_ALLOC_CONF"] == "mine" and want["CUDA_CACHE_MAXSIZE"] == "\n'x"
    assert want["PATH"] == "/usr/bin:/bin" and want["_CUDAFIX_OLD_PATH"] == "s:/evil"
    assert sorted(k for k in want if k.startswith("_CUDAFIX")) == ["_CUDAFIX_NEW_PATH", "_CUDAFIX_OLD_PATH"]
    for shell in ("dash", "bash", "zsh", "ash", "fish", "tcsh"):
        fam = cr.SHELLS[shell][1]
        f = tmp_path / ("d." + fam)
        f.write_text(shells.renderer(fam).deactivate() + "env -0\n")
        p = subprocess.run(cr.SHELLS[shell][0] + [str(f)], capture_output=True, env=env)
        got = dict(kv.split("=", 1) for kv in p.stdout.decode().split("\0") if kv)
        got = {k: v for k, v in got.items() if k in want or k.startswith("_CUDAFIX") or k in env}
        assert {k: v for k, v in got.items() if k not in ("PWD", "SHLVL", "_")} == {k: v for k, v in want.items()}, shell


def test_cache_path_is_the_prefix_spelled_out():
    env = {"HOME": "/home/u"}
    assert activation.cache_file("/opt/envs/my env", "sh", env) == "/home/u/.cache/cudafix/activation/opt/envs/my env.cudafix/activate.sh"
    assert activation.cache_file("/opt/envs/x", "fish", {"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == "/c/cudafix/activation/opt/envs/x.cudafix/activate.fish"
    for bad in ("relative", "/a/../b", "/a/./b", "/a//b", "/a/.."):
        assert activation.cache_file(bad, "sh", env) is None
    assert activation.cache_file("/opt/x", "sh", {}) is None


def test_write_cache_is_private(tmp_path):
    env = {"HOME": str(tmp_path)}
    path = activation.cache_file("/opt/env", "sh", env)
    assert activation.write_cache(path, {"activate.sh": "x\n"}, 1000.0, env)
    st = os.stat(path)
    assert st.st_mode & 0o777 == 0o600 and st.st_mtime == 1000.0
    base = tmp_path / ".cache" / "cudafix" / "activation"
    for d in (base, base / "opt", pathlib.Path(path).parent):
        assert os.stat(str(d)).st_mode & 0o077 == 0
    assert activation.remove_cache("/opt/env", env) == [path]
    assert not base.exists() or not any(base.iterdir())


# -- CLI ---------------------------------------------------------------------------------------

def test_cli_deactivate_prints_the_static_restore():
    from click.testing import CliRunner

    from cudafix.cli import main

    for sh in ("bash", "fish", "tcsh"):
        r = CliRunner().invoke(main, ["shell", "--shell", sh, "--deactivate"])
        assert r.exit_code == 0, r.output
        assert r.output == shells.renderer(sh).deactivate()


def test_cli_activate_when_probing_fails_prints_one_skip_line(monkeypatch):
    from click.testing import CliRunner

    from cudafix.cli import main

    def boom(env):
        raise RuntimeError("no probes")

    monkeypatch.setattr(activation, "collect", boom)
    r = CliRunner().invoke(main, ["shell", "--shell", "bash", "--activate"])
    assert r.exit_code == 0
    p = subprocess.run(["bash", "-c", r.output], capture_output=True, text=True)
    assert p.stderr == "cudafix: skipped (RuntimeError: no probes)\n"


# -- hooks install / uninstall -----------------------------------------------------------------

def _tree(root: pathlib.Path):
    return sorted((str(p.relative_to(root)), p.is_dir()) for p in root.rglob("*"))


def test_hooks_install_status_uninstall(tmp_path):
    pfx = tmp_path / "env x"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(pfx)], check=True)
    (pfx / "conda-meta").mkdir()
    before = _tree(pfx)
    py = str(pfx / "bin" / "python")
    env = dict(os.environ, PYTHONPATH=str(REPO), HOME=str(tmp_path / "home"))

    def hooks(*args):
        return subprocess.run([sys.executable, "-m", "cudafix", "hooks", *args, "--prefix", str(pfx)], capture_output=True, text=True, env=env)

    r = hooks("status")
    assert r.returncode == 1 and r.stdout.count("missing") == 8
    r = hooks("install")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("installed") == 8
    r = hooks("install")
    assert r.stdout.count("unchanged") == 8  # idempotent
    r = hooks("status")
    assert r.returncode == 0 and r.stdout.count("installed") == 8
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True).stdout.strip()
    assert (pathlib.Path(site) / "cudafix.pth").read_bytes() == (REPO / "cudafix.pth").read_bytes()
    assert (pfx / "etc/conda/activate.d/cudafix.sh").read_text() == (REPO / "activate.d/cudafix.sh").read_text()
    # a cache for this env, as an activation would leave it
    cache = activation.cache_file(str(pfx), "sh", {"HOME": env["HOME"]})
    activation.write_cache(cache, {"activate.sh": ":\n"}, 0.0, {"HOME": env["HOME"]})
    r = hooks("uninstall")
    assert r.returncode == 0, r.stderr
    assert _tree(pfx) == before  # nothing left behind
    assert not os.path.exists(cache)
    r = hooks("uninstall")
    assert r.returncode == 0 and r.stdout == ""  # idempotent
