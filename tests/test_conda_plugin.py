"""cudafix/plugins/conda.py: the `conda doctor` health check and the `conda cudafix` subcommand.

conda itself cannot be installed here (not on PyPI), so registration is tested against a
stand-in `conda` package written by this test only: `conda.plugins.hookimpl` is a real pluggy
marker for the project name "conda" (what conda uses), and `conda.plugins.types` has exactly
the documented fields of CondaHealthCheck(name, action, fixer, summary, fix) and
CondaSubcommand(name, summary, action, aliases, configure_parser), as in conda's
conda/plugins/types.py at 26.x.  The health check and the fixer run for real on fake env
prefixes (venvs whose python sees this checkout).
"""

from __future__ import annotations

import configparser
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pluggy  # noqa: F401  conda's plugin manager library (requirements-dev.txt)
import pytest

from tests.conftest import REPO, venv_site_packages

STAND_IN = {
    "conda/__init__.py": '__version__ = "26.7.0"  # stand-in for tests/test_conda_plugin.py\n',
    "conda/base/__init__.py": "",
    "conda/base/constants.py": 'OK_MARK = "\\u2705"\nX_MARK = "\\u274c"\n',
    "conda/plugins/__init__.py": textwrap.dedent('''
        import pluggy
        hookimpl = pluggy.HookimplMarker("conda")
        _hookspec = pluggy.HookspecMarker("conda")

        class CondaSpecs:
            @_hookspec
            def conda_health_checks(self):
                """Iterable[CondaHealthCheck]"""

            @_hookspec
            def conda_subcommands(self):
                """Iterable[CondaSubcommand]"""
    '''),
    "conda/plugins/types.py": textwrap.dedent('''
        from dataclasses import dataclass, field
        from typing import Callable, Optional, Tuple

        @dataclass
        class CondaPlugin:
            name: str
            def __post_init__(self):
                self.name = self.name.lower().strip()

        @dataclass
        class CondaHealthCheck(CondaPlugin):
            action: Callable = None
            fixer: Optional[Callable] = None
            summary: Optional[str] = None
            fix: Optional[str] = None

        @dataclass
        class CondaSubcommand(CondaPlugin):
            summary: str = ""
            action: Callable = None
            aliases: Tuple[str, ...] = field(default_factory=tuple)
            configure_parser: Optional[Callable] = None
    '''),
}


@pytest.fixture(scope="module")
def stand_in_conda(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("conda-stand-in")
    for rel, text in STAND_IN.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def child_env(*paths: pathlib.Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in paths] + [str(REPO)])
    env["CUDAFIX_DISABLE"] = "1"
    return env


def conda_entry_point() -> str:
    cfg = configparser.ConfigParser()
    cfg.read(str(REPO / "setup.cfg"))
    lines = [ln.strip() for ln in cfg["options.entry_points"]["conda"].splitlines() if ln.strip()]
    assert len(lines) == 1
    name, value = (s.strip() for s in lines[0].split("=", 1))
    assert name == "cudafix"
    return value


# -- registration --------------------------------------------------------------------------------


def test_plugin_registers_with_condas_plugin_manager(stand_in_conda):
    """What conda does: pluggy PluginManager("conda"), specs added, the entry point's module
    registered; then it asks for health checks and subcommands."""
    script = textwrap.dedent('''
        import importlib, json, sys, pluggy
        from conda.plugins import CondaSpecs
        from conda.plugins.types import CondaHealthCheck, CondaSubcommand
        pm = pluggy.PluginManager("conda")
        pm.add_hookspecs(CondaSpecs)
        pm.register(importlib.import_module(sys.argv[1]))
        checks = [c for it in pm.hook.conda_health_checks() for c in it]
        subs = [s for it in pm.hook.conda_subcommands() for s in it]
        assert all(isinstance(c, CondaHealthCheck) for c in checks)
        assert all(isinstance(s, CondaSubcommand) for s in subs)
        print(json.dumps({
            "checks": [[c.name, callable(c.action), callable(c.fixer), c.summary, c.fix] for c in checks],
            "subs": [[s.name, callable(s.action), s.configure_parser] for s in subs],
        }))
    ''')
    proc = subprocess.run([sys.executable, "-c", script, conda_entry_point()], capture_output=True, text=True,
                          env=child_env(stand_in_conda), timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert len(got["checks"]) == 1
    name, has_action, has_fixer, summary, fix = got["checks"][0]
    assert (name, has_action, has_fixer) == ("cudafix", True, True)
    assert summary and fix
    # no configure_parser: conda hands the raw argv tuple to the action (greedy subcommand)
    assert got["subs"] == [["cudafix", True, None]]


def test_cudafix_works_without_conda_and_never_imports_it():
    script = textwrap.dedent('''
        import sys, importlib.util
        assert importlib.util.find_spec("conda") is None
        import cudafix, cudafix.cli, cudafix.rules
        assert "cudafix.plugins.conda" not in sys.modules
        import cudafix.plugins.conda as p
        assert not any(m == "conda" or m.startswith("conda.") for m in sys.modules)
        assert p.marks() == ("\\u2705", "\\u274c")
        print("ok")
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=child_env(), timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# -- rendering -------------------------------------------------------------------------------------


def synthetic_runs():
    from cudafix.model.findings import OK, PROBLEM, Outcome, Rule, RuleRun
    from cudafix.model.fixes import EnvOp, EnvPatch, Fix

    def rule(rid, sev):
        return Rule(id=rid, severity=sev, title=rid, check=lambda s: ())

    advice = Fix(summary="upgrade the driver", commands=("sudo apt install nvidia-driver-580",))
    safe = Fix(summary="unset CUDA_LAUNCH_BLOCKING", auto=True, env=EnvPatch((EnvOp("unset", "CUDA_LAUNCH_BLOCKING"),)))
    return [
        RuleRun(rule("fine-rule", "error"), [Outcome(OK, "all good")]),
        RuleRun(rule("driver-too-old", "error"), [Outcome(PROBLEM, "driver 535 too old for cu124", fix=advice)]),
        RuleRun(rule("launch-blocking", "warning"), [Outcome(PROBLEM, "CUDA_LAUNCH_BLOCKING=1 slows kernels", fix=safe)]),
    ]


def test_render_health_reports_each_finding_with_condas_marks():
    from cudafix.plugins import conda as conda_plugin
    from cudafix.render import report

    runs = synthetic_runs()
    text = conda_plugin.render_health(runs, ok_mark="OK!", x_mark="BAD!")
    lines = text.splitlines()
    assert lines[0] == "BAD! cudafix: " + report.summary_line(runs)
    body = "\n".join(lines[1:])
    for f in report.sorted_findings(runs):
        assert f.rule in body and f.message in body
    assert "$ sudo apt install nvidia-driver-580" in body  # advice: the exact command
    assert "OK!" not in text
    verbose = conda_plugin.render_health(runs, verbose=True, ok_mark="OK!", x_mark="BAD!")
    for ln in report.render_check(runs).strip().splitlines():
        assert ln in verbose


def test_render_health_all_clear_is_one_ok_line():
    from cudafix.plugins import conda as conda_plugin
    from cudafix.render import report

    runs = synthetic_runs()[:1]
    text = conda_plugin.render_health(runs, ok_mark="OK!", x_mark="BAD!")
    assert text.splitlines() == ["OK! cudafix: no CUDA stack problems found (%s)." % report.summary_line(runs)]


def test_render_health_never_puts_the_x_mark_beside_a_finding_cudafix_corrects():
    """Issue 16: '❌' beside '(auto-fixed by cudafix)' for the same finding, and the --fix hint
    printed with every hook installed."""
    from cudafix.plugins import conda as conda_plugin
    from cudafix.render import report

    only_safe = synthetic_runs()[2:]  # one finding, its fix automatic
    installed = conda_plugin.render_health(only_safe, ok_mark="OK!", x_mark="BAD!", hooks=True)
    assert installed.startswith("OK! cudafix: %s, each corrected automatically" % report.summary_line(only_safe))
    assert "BAD!" not in installed and "(corrected automatically by cudafix)" in installed
    assert "--fix" not in installed
    missing = conda_plugin.render_health(only_safe, ok_mark="OK!", x_mark="BAD!", hooks=False)
    assert missing.startswith("BAD! ") and "OK!" not in missing
    assert "corrected automatically" not in missing and "once its hooks are installed" in missing
    assert "`conda doctor --fix cudafix` installs cudafix's missing hooks" in missing
    absent = conda_plugin.render_health(only_safe, ok_mark="OK!", x_mark="BAD!", hooks=None)
    assert absent.startswith("BAD! ") and "cudafix is not installed in this env" in absent
    # advice is never "corrected": a finding that needs the user keeps the X mark, hooks or not
    mixed = conda_plugin.render_health(synthetic_runs(), ok_mark="OK!", x_mark="BAD!", hooks=True)
    assert mixed.startswith("BAD! ") and "--fix" not in mixed


# -- on real (fake) env prefixes -------------------------------------------------------------------


@pytest.fixture
def env_prefix(tmp_path, monkeypatch) -> pathlib.Path:
    """A venv standing in for a conda env; its python sees this checkout (PYTHONPATH) and
    cudafix's dependencies (a .pth to the test interpreter's site-packages)."""
    import sysconfig

    prefix = tmp_path / "env with space"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=300)
    site = venv_site_packages(prefix / "bin" / "python")
    (site / "zz-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("CUDAFIX_DISABLE", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    return prefix


def hook_paths(prefix: pathlib.Path) -> list:
    site = venv_site_packages(prefix / "bin" / "python")
    return [site / "cudafix.pth", site / "cudafix.start"] + [
        prefix / "etc" / "conda" / d / ("cudafix." + ext)
        for d in ("activate.d", "deactivate.d") for ext in ("sh", "fish", "csh")
    ]


def cli_check(python: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cudafix", "check", "--python", str(python)],
                          capture_output=True, text=True, timeout=300, cwd=str(REPO))


def test_health_check_agrees_with_cudafix_check_for_the_prefix(env_prefix, capsys):
    from cudafix.plugins import conda as conda_plugin

    cli = cli_check(env_prefix / "bin" / "python")
    assert cli.returncode in (0, 1), cli.stderr
    # issue 35: the verdict is line 1 of `check`; the counts head the findings after it
    summary = next(ln for ln in cli.stdout.splitlines() if ln.startswith("Findings: ")).split("Findings: ", 1)[1]
    conda_plugin.health_check(str(env_prefix), False)
    out = capsys.readouterr().out
    mark = "\u2705" if cli.returncode == 0 else "\u274c"
    assert out.startswith(mark + " cudafix: "), out
    assert summary in out


def test_health_check_offers_the_fix_only_while_hooks_are_missing(env_prefix, capsys, monkeypatch):
    from cudafix.plugins import conda as conda_plugin
    from cudafix.render import report

    # the findings: one that cudafix corrects (this machine may have none); the hooks' state is
    # the env's own, asked through its `cudafix hooks status` as conda doctor does
    runs = synthetic_runs()[2:]
    assert all(f.auto for f in report.sorted_findings(runs))
    monkeypatch.setattr(conda_plugin, "analyse_prefix", lambda prefix: (None, runs))
    conda_plugin.health_check(str(env_prefix), False)
    before = capsys.readouterr().out
    assert "`conda doctor --fix cudafix` installs cudafix's missing hooks" in before
    assert "corrected automatically" not in before
    conda_plugin.fix_prefix(str(env_prefix), None, lambda msg: None)
    capsys.readouterr()
    conda_plugin.health_check(str(env_prefix), False)
    after = capsys.readouterr().out
    assert "--fix" not in after, after
    assert "(corrected automatically by cudafix)" in after
    for line in after.splitlines():
        assert not ("\u274c" in line and "corrected automatically" in line), line


def test_health_check_without_python_in_the_env(tmp_path, capsys):
    from cudafix.plugins import conda as conda_plugin

    (tmp_path / "conda-meta").mkdir()
    conda_plugin.health_check(str(tmp_path), True)
    out = capsys.readouterr().out
    assert out.startswith("\u2705 cudafix: no Python in this environment")


def test_health_check_reports_a_probe_failure_instead_of_raising(env_prefix, capsys, monkeypatch):
    import cudafix.probes
    from cudafix.plugins import conda as conda_plugin

    def boom(**kw):
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(cudafix.probes, "take_snapshot", boom)
    conda_plugin.health_check(str(env_prefix), False)
    out = capsys.readouterr().out
    assert out.startswith("\u274c cudafix could not inspect %s: RuntimeError: probe exploded" % env_prefix)


class Declined(Exception):
    """What conda's confirm raises on 'no' (CondaSystemExit) or --dry-run (DryRunExit)."""


def test_fixer_installs_the_hooks_once_after_confirmation(env_prefix, capsys):
    from cudafix.plugins import conda as conda_plugin

    asked = []
    assert not any(p.exists() for p in hook_paths(env_prefix))
    rc = conda_plugin.fix_prefix(str(env_prefix), None, asked.append)
    assert rc == 0
    assert len(asked) == 1 and str(env_prefix) in asked[0]
    for p in hook_paths(env_prefix):
        assert p.is_file(), p
    # the same state `cudafix hooks status` (the env's own cudafix) reports
    status = subprocess.run([str(env_prefix / "bin" / "python"), "-m", "cudafix", "hooks", "status", "--prefix", str(env_prefix)],
                            capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stdout + status.stderr
    capsys.readouterr()
    # idempotent: nothing to install, nothing asked
    rc = conda_plugin.fix_prefix(str(env_prefix), None, asked.append)
    assert rc == 0 and len(asked) == 1
    assert "hooks are installed in %s" % env_prefix in capsys.readouterr().out


def test_fixer_changes_nothing_when_the_user_declines(env_prefix):
    from cudafix.plugins import conda as conda_plugin

    def no(msg):
        raise Declined(msg)

    with pytest.raises(Declined):
        conda_plugin.fix_prefix(str(env_prefix), None, no)
    assert not any(p.exists() for p in hook_paths(env_prefix))


def test_fixer_without_cudafix_in_the_env_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    from cudafix.plugins import conda as conda_plugin

    prefix = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=300)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("CUDAFIX_DISABLE", "1")
    asked = []
    conda_plugin.fix_prefix(str(prefix), None, asked.append)
    out = capsys.readouterr().out
    assert asked == []
    assert "cudafix is not installed in %s" % prefix in out
    assert "conda install -p %s cudafix" % prefix in out
    assert not any(p.exists() for p in hook_paths(prefix))


# -- `conda cudafix` -----------------------------------------------------------------------------


def _has_option(path, opt):
    from cudafix.cli import main

    cmd = main
    for name in path:
        cmd = cmd.commands[name]
    return any(opt in p.opts for p in cmd.params)


def test_subcommand_targets_the_active_env(env_prefix):
    from cudafix.plugins import conda as conda_plugin
    from cudafix.cli import main

    prefix = str(env_prefix)
    py = str(env_prefix / "bin" / "python")
    # every command cudafix has: --python / --prefix added exactly where the command takes them
    paths = []
    for name, cmd in main.commands.items():
        if hasattr(cmd, "commands"):
            paths.extend((name, sub) for sub in cmd.commands)
        else:
            paths.append((name,))
    assert paths
    for path in paths:
        got = conda_plugin.target_args(list(path), prefix)
        want = list(path)
        if _has_option(path, "--python"):
            want += ["--python", py]
        if _has_option(path, "--prefix"):
            want += ["--prefix", prefix]
        assert got == want, path
    # no subcommand is `status`, as for the cudafix command itself
    assert conda_plugin.target_args([], prefix)[:1] == ["status"]
    # the user's own choice wins; help and version are left alone; conda's own env: untouched
    assert conda_plugin.target_args(["check", "--python", "/x/python"], prefix) == ["check", "--python", "/x/python"]
    assert conda_plugin.target_args(["--version"], prefix) == ["--version"]
    assert conda_plugin.target_args(["check", "--help"], prefix) == ["check", "--help"]
    assert conda_plugin.target_args(["check"], sys.prefix) == ["check"]
    if _has_option(("check",), "--from"):
        assert conda_plugin.target_args(["check", "--from", "s.json"], prefix) == ["check", "--from", "s.json"]


def test_subcommand_forwards_to_the_cli_and_returns_its_status(env_prefix, monkeypatch, capsys):
    from cudafix import __version__
    from cudafix.plugins import conda as conda_plugin

    assert conda_plugin.subcommand(("--version",)) == 0
    assert __version__ in capsys.readouterr().out
    monkeypatch.setenv("CONDA_PREFIX", str(env_prefix))
    cli = cli_check(env_prefix / "bin" / "python")
    assert conda_plugin.subcommand(("check",)) == cli.returncode
    out = capsys.readouterr().out
    assert cli.stdout.splitlines()[0] in out
    assert conda_plugin.subcommand(("no-such-command",)) == 2
