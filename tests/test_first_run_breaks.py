"""Issue 35, item 3: breaks a newcomer hit on the first day, each held by a test that failed before.

- `cudafix shell --activate` (the venv route docs/install.md gives) honours CUDAFIX_DISABLE by the
  one truthiness rule (cudafix/knowledge/knobs.py), as the activate.d scripts and the startup hook do.
- `cudafix fix --apply` runs every step the plan prints under "run": a `pip install` step of the
  env's own interpreter with a variable in front (a package rebuild) is runnable, not "nothing to run".
- In a pip install, `hooks install` after `hooks uninstall` puts the hook files back (their text is
  not read from the very files uninstall removed), and `hooks status` says what is missing.
"""

from __future__ import annotations

import copy
import os
import shlex
import shutil
import subprocess

import pytest

from cudafix.knowledge import knobs
from tests.conftest import REPO, VENVS, require
from tests.test_knobs import OFF, ON

# A real venv (tests/make_venvs.sh) whose torch 1.10.0+cu102 meets this machine's CUDA 13.0
# toolkit at /usr/local: activation announces cuda-home-mismatch on stderr (a finding to show).
TORCH_110 = VENVS / "torch-110" / "bin" / "python"


def _activate(value):
    require(TORCH_110.exists(), "test venv %s missing: run tests/make_venvs.sh" % TORCH_110)
    require(shutil.which("bash"), "bash not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAFIX_", "_CUDAFIX_", "CUDA_HOME", "CONDA"))}
    env["PYTHONPATH"] = str(REPO)
    if value is not None:
        env["CUDAFIX_DISABLE"] = value
    script = 'eval "$("$1" -m cudafix shell --shell bash --activate)"; printf "vars=%s\\n" "${_CUDAFIX_VARS-unset}"'
    return subprocess.run(["bash", "--norc", "-c", script, "bash", str(TORCH_110)], env=env, capture_output=True,
                          text=True, timeout=300, cwd="/")


@pytest.mark.parametrize("value", [None, "0", "off", "1", "yes", "TRUE", "x"])
def test_shell_activate_honours_cudafix_disable(value):
    p = _activate(value)
    assert p.returncode == 0, p.stderr
    said = "cudafix:" in p.stderr
    if knobs.flag_on(value):
        assert not said, "CUDAFIX_DISABLE=%r: activation still ran: %s" % (value, p.stderr)
        assert "vars=unset" in p.stdout
    else:
        assert said and "cuda-home-mismatch" in p.stderr, p.stderr


def test_value_lists_are_the_documented_ones():
    assert set(["0", "off"]) <= set(OFF) and set(["1", "yes", "TRUE", "x"]) <= set(ON)


# -- fix --apply runs what the plan prints under "run" ---------------------------------------------


def _owned_ext_snapshot():
    """tests/fixtures/snapshots/ext_foreign_torch_h200.json (recorded) with its extension module
    owned by a pip package (overrides: package, version): the rebuild fix is then a `pip install`."""
    from tests.test_rules_fixtures import load

    snap = copy.deepcopy(load("ext_foreign_torch_h200.json"))
    for m in snap.extensions.modules:
        m.package, m.package_version, m.location = "cfx-ext", "1.0", "site-packages"
    return snap


def test_every_printed_run_step_is_run_by_apply():
    from cudafix.plans.planner import make_plan
    from cudafix.render.plan import plan_lines

    plan = make_plan(_owned_ext_snapshot())
    printed = [ln for ln in plan_lines(plan) if ln.lstrip().split(" ", 1)[0].rstrip(".").isdigit() and " $ " in ln]
    assert any("-m pip install" in ln for ln in printed), plan_lines(plan)
    assert len(printed) == len(plan.runnable), "printed under run: %s; --apply runs: %s" % (
        printed, [s.text for s in plan.runnable])
    for step in plan.runnable:
        # what --apply executes is exactly what the printed line says to sh
        argv = list(step.argv)
        if argv[0] == "env":
            argv = argv[1:]
        assert argv == shlex.split(step.text), step


def test_hook_files_data_is_the_shipped_files():
    """`hooks install` writes cudafix/hook/files.py's bytes; the wheel ships the checkout's files."""
    from cudafix.cli.shell import HOOK_FILES
    from cudafix.hook.files import FILES

    assert tuple(name for name, _ in FILES) == HOOK_FILES
    for name, data in FILES:
        assert (REPO / name).read_bytes() == data, name
