"""`status` and `check` without click (cudafix/cli/fast.py) behave as their click commands do.

The truth is click itself: for any argument list the fast path accepts, click's own parse of the
same arguments (the group's default command included) must give the same command and the same
parameters, and where click would refuse the arguments the fast path must not run at all.  End
to end, `python -m cudafix ARGS` (fast path) and the click group run directly print the same
stdout and stderr and exit with the same status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudafix.cli import fast
from tests.conftest import REPO

EXAMPLE = "h200-rich-torch2.11-cu130"
FIXTURE = str(REPO / "cudafix" / "data" / "examples" / (EXAMPLE + ".json"))


def _click_parse(argv: List[str]) -> Optional[Tuple[str, Dict[str, Any]]]:
    """(command, params) as the click group parses ``argv``, or None where click stops (usage
    error, help, version)."""
    from cudafix.cli.group import main

    try:
        with main.make_context("cudafix", list(argv), resilient_parsing=False) as ctx:
            args = list(getattr(ctx, "_protected_args", [])) + list(ctx.args)
            if not args:
                return None
            name, cmd, rest = main.resolve_command(ctx, args)
            if cmd is None:
                return None
            with cmd.make_context(name, rest, parent=ctx) as sub:
                return name, dict(sub.params)
    except (click.exceptions.Exit, click.exceptions.ClickException, click.exceptions.Abort):
        return None


def _fast_params(got: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    params = dict(got["opts"])
    params.update({k: v for k, v in got.items() if k not in ("command", "opts")})
    return got["command"], params


COMMON = [
    [], ["status"], ["--json"], ["status", "--json"], ["status", "-v"], ["status", "--verbose", "--json"],
    ["check"], ["check", "--json"], ["check", "--strict"], ["check", "--json", "--strict"],
    ["status", "--from", "x.json"], ["status", "--from", "-"], ["check", "--example", EXAMPLE, "--strict"],
    ["status", "--only", "no-driver,arch-unsupported", "--skip", "nccl-ib", "--only", "x"],
    ["status", "--assume-driver", "550.54.15", "--assume-gpu", "H100", "--assume-gpu", "sm_80"],
    ["status", "--python", "/usr/bin/python3", "--json"], ["--from", "a", "--from", "b"],
]


@pytest.mark.parametrize("argv", COMMON, ids=lambda a: " ".join(a) or "(none)")
def test_common_forms_take_the_fast_path_and_parse_as_click_does(argv):
    got = fast.parse(argv)
    assert got is not None, argv
    assert _fast_params(got) == _click_parse(argv)


@pytest.mark.parametrize("argv", [
    ["status", "--help"], ["-h"], ["--version"], ["check", "-v"], ["status", "--strict"], ["status", "--from"],
    ["status", "--from=x"], ["status", "--only", "--json"], ["status", "extra"], ["status", "--"],
    ["status", "-vv"], ["snapshot"], ["explain", "--list"], ["fix"], ["status", "--jso"],
])
def test_other_forms_go_to_click(argv):
    assert fast.parse(argv) is None


TOKENS = ["status", "check", "--json", "-v", "--verbose", "--strict", "--from", "--example", "--python",
          "--assume-driver", "--assume-gpu", "--only", "--skip", "-", "x.json", "", "sm_80", "no-driver,nccl-ib",
          "--from=y", "--help", "-h", "--version", "--", "-vx", "extra", "-x"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=9))
def test_whatever_the_fast_path_accepts_click_parses_the_same(argv):
    got = fast.parse(argv)
    if got is not None:
        assert _fast_params(got) == _click_parse(argv), argv


def test_shell_completion_goes_to_click(monkeypatch):
    monkeypatch.setenv("_CUDAFIX_COMPLETE", "bash_complete")
    assert fast.fast_main(["status"]) is None


def _run(argv: List[str], tmp_path, through_click: bool) -> Tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAFIX_", "PYTHON"))}
    env.update(PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(tmp_path / "cache"), NO_COLOR="1")
    if through_click:
        cmd = [sys.executable, "-c", "import sys; sys.argv[0] = 'cudafix'; from cudafix.cli.group import main; main()"]
    else:
        cmd = [sys.executable, "-c", "import sys; sys.argv[0] = 'cudafix'; from cudafix.cli import run; run()"]
    p = subprocess.run(cmd + argv, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("argv", [
    ["status", "--from", FIXTURE], ["status", "--from", FIXTURE, "--json"], ["status", "--from", FIXTURE, "-v"],
    ["check", "--from", FIXTURE], ["check", "--from", FIXTURE, "--strict", "--json"],
    ["--from", FIXTURE, "--skip", "arch-unsupported"], ["check", "--example", EXAMPLE, "--only", "driver-too-old"],
    ["status", "--from", "/nonexistent/snap.json"], ["check", "--example", "nope"], ["status", "--only", "nope"],
    ["check", "--from", FIXTURE, "--assume-driver", "x.y"], ["status", "--from", FIXTURE, "--python", "/bin/sh"],
    ["status", "--example", "list"],
], ids=lambda a: " ".join(x if x != FIXTURE else "FIXTURE" for x in a))
def test_same_output_and_exit_status_as_click(argv, tmp_path):
    assert fast.parse(argv) is not None  # this case runs the fast path
    assert _run(argv, tmp_path, False) == _run(argv, tmp_path, True)


def test_console_script_passes_other_commands_to_click(tmp_path):
    rc, out, err = _run(["explain", "--list"], tmp_path, False)
    assert rc == 0 and "driver-too-old" in out
    rc, out, err = _run(["status", "--bogus"], tmp_path, False)
    assert rc == 2 and "No such option '--bogus'" in err
