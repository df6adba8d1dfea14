"""The speed work of issue 23 changes no output: `cudafix status` (text and --json) and `check` on
every snapshot fixture are byte for byte what commit 51656f0 (before that work) prints.  The
"before" side is that commit's own cudafix package, taken from git in the test run (git archive),
not a stored golden file; both sides run in one process each with the same interpreter."""

from __future__ import annotations

import fcntl
import glob
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, require

BEFORE = "51656f0"
SNAPSHOTS = sorted(p for p in glob.glob(str(REPO / "tests" / "fixtures" / "**" / "*.json"), recursive=True)
                   + glob.glob(str(REPO / "cudafix" / "data" / "examples" / "*.json"))
                   if '"cudafix.snapshot/1"' in open(p, encoding="utf-8").read(4096))

# Runs every command in one interpreter: cudafix.cli.main with stdout captured, exit status kept.
DRIVER = r"""
import io, json, sys
from cudafix.cli import main
out = {}
for snap in json.loads(sys.argv[1]):
    for args in (["status", "--from", snap], ["status", "--json", "--from", snap], ["check", "--from", snap]):
        buf, err = io.StringIO(), io.StringIO()
        sys.stdout, sys.stderr = buf, err
        try:
            main.main(args, prog_name="cudafix", standalone_mode=True)
            rc = 0
        except SystemExit as exc:
            rc = exc.code
        finally:
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        out[" ".join(args[:-1]) + " " + snap.split("/tests/", 1)[-1].split("/cudafix/", 1)[-1]] = [rc, buf.getvalue(), err.getvalue()]
print(json.dumps(out))
"""


@pytest.fixture(scope="session")
def before_tree(tmp_path_factory) -> str:
    """51656f0's cudafix package, extracted once per test run (shared by pytest-xdist workers)."""
    base = tmp_path_factory.getbasetemp().parent  # the same for every worker of this run
    dest = base / ("cudafix-" + BEFORE)
    with open(str(base / ("cudafix-" + BEFORE + ".lock")), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / "cudafix" / "__init__.py").exists():
            have = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", BEFORE + "^{commit}"], capture_output=True)
            require(have.returncode == 0, "commit %s in this clone's history (a shallow clone lacks it)" % BEFORE)
            tmp = str(dest) + ".tmp%d" % os.getpid()
            os.makedirs(tmp)
            arch = subprocess.run(["git", "-C", str(REPO), "archive", BEFORE, "cudafix"], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", tmp], input=arch.stdout, check=True)
            os.rename(tmp, str(dest))
    return str(dest)


def _outputs(tree: str, tmp_path) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, XDG_CACHE_HOME=str(tmp_path / "xdg"), NO_COLOR="1", COLUMNS="100",
               CUDAFIX_DISABLE="1")
    for k in [k for k in env if k.startswith("CUDAFIX_ASSUME")]:
        del env[k]
    p = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(SNAPSHOTS)], capture_output=True, text=True,
                       env=env, cwd="/", timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def test_every_fixture_prints_what_51656f0_printed(before_tree, tmp_path):
    assert len(SNAPSHOTS) >= 40
    before, after = _outputs(before_tree, tmp_path / "b"), _outputs(str(REPO), tmp_path / "a")
    assert sorted(before) == sorted(after)
    assert all(v[1] for v in before.values())  # every command printed something
    changed = [k for k in before if before[k] != after[k]]
    assert not changed, "%d differ, first: %s\nbefore:\n%s\nafter:\n%s" % (
        len(changed), changed[0], before[changed[0]][1][-1500:], after[changed[0]][1][-1500:])
