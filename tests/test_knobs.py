"""The CUDAFIX_* settings: one truthiness rule (cudafix/knowledge/knobs.py), the same in every reader.

The shipped activate.d scripts are run by the real shells with CUDAFIX_DISABLE set to each value,
over an env whose `bin/python` only leaves a mark: a disabled activation must never start it.
The expected on/off of each value is the documented rule (docs/env-vars.md), written here, not
read from cudafix: unset, empty, 0, no, false, off (any case) are off; anything else is on.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess

import pytest

from cudafix.knowledge import knobs
from tests.conftest import REPO, require

OFF = [None, "", "0", "no", "NO", "False", "off", "OFF"]
ON = ["1", "yes", "true", "TRUE", "on", "x", " 0"]  # " 0": no trimming, so on (like any other text)

SHELLS = {  # shell -> (argv prefix, script)
    "dash": (["dash", "-c"], "activate.d/cudafix.sh"),
    "bash": (["bash", "--norc", "-c"], "activate.d/cudafix.sh"),
    "zsh": (["zsh", "-f", "-c"], "activate.d/cudafix.sh"),
    "ash": (["busybox", "ash", "-c"], "activate.d/cudafix.sh"),
    "fish": (["fish", "--no-config", "-c"], "activate.d/cudafix.fish"),
    "tcsh": (["tcsh", "-f", "-c"], "activate.d/cudafix.csh"),
}


@pytest.mark.parametrize("value", OFF + ON)
def test_flag_rule(value):
    assert knobs.flag_on(value) is (value in ON)


def test_startup_module_uses_the_same_words():
    tree = ast.parse((REPO / "_cudafix_startup.py").read_text(encoding="utf-8"))
    tuples = [ast.literal_eval(n) for n in ast.walk(tree)
              if isinstance(n, ast.Tuple) and n.elts and all(isinstance(e, ast.Constant) and isinstance(e.value, bytes) for e in n.elts)]
    assert tuple(w.encode() for w in knobs.FALSE_WORDS) in tuples


def _env(tmp_path, value):
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    mark = tmp_path / "python-ran"
    py = prefix / "bin" / "python"
    py.write_text("#!/bin/sh\n: > %s\nexit 0\n" % mark)
    py.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAFIX_", "_CUDAFIX_"))}
    env.update(CONDA_PREFIX=str(prefix), HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    if value is not None:
        env["CUDAFIX_DISABLE"] = value
    return env, mark


@pytest.mark.parametrize("shell", sorted(SHELLS))
@pytest.mark.parametrize("value", OFF + ON)
def test_activation_honours_disable_like_the_hook(tmp_path, shell, value):
    argv, script = SHELLS[shell]
    require(shutil.which(argv[0]), "%s is not installed (./run test installs it)" % argv[0])
    env, mark = _env(tmp_path, value)
    src = "source" if shell in ("fish", "tcsh") else "."
    p = subprocess.run(argv + ["%s %s" % (src, REPO / script)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    ran = mark.exists()
    assert ran is (not knobs.flag_on(value)), "CUDAFIX_DISABLE=%r: the env's python %s" % (
        value, "ran" if ran else "did not run")
    assert ran is (value in OFF)
