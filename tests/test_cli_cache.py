"""`cudafix cache clear`: removes what uninstalling leaves in the user's cache dir (docs/install.md)."""

from __future__ import annotations

import os
import subprocess
import sys

from cudafix.activation import runtime as activation
from cudafix.store import paths
from tests.conftest import REPO


def run(home, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "CUDAFIX_DISABLE")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "cudafix"] + list(args), env=env, capture_output=True,
                          text=True, timeout=300, cwd=str(REPO))


def make_caches(home, prefix):
    env = {"HOME": str(home)}
    d = paths.env_cache_dir(prefix, env)
    os.makedirs(d)
    with open(os.path.join(d, "nvcc-cache.json"), "w") as fh:
        fh.write("{}")
    act = activation.cache_file(prefix, "sh", env)
    assert activation.write_cache(act, {"activate.sh": ":\n"}, 0.0, env)
    return d, act


def test_clear_removes_this_envs_caches_only(tmp_path):
    home = tmp_path / "home"
    mine, mine_act = make_caches(home, sys.prefix)
    other, other_act = make_caches(home, "/opt/conda/envs/other")
    r = run(home, "cache", "clear")
    assert r.returncode == 0, r.stderr
    assert "removed    %s\n" % mine in r.stdout and "removed    %s\n" % mine_act in r.stdout
    assert not os.path.exists(mine) and not os.path.exists(mine_act)
    assert os.path.exists(other) and os.path.exists(other_act)
    r = run(home, "cache", "clear")
    assert r.stdout == "nothing to remove\n"


def test_clear_all_removes_every_envs_caches(tmp_path):
    home = tmp_path / "home"
    make_caches(home, sys.prefix)
    make_caches(home, "/opt/conda/envs/gone")
    r = run(home, "cache", "clear", "--all")
    assert r.returncode == 0 and r.stdout == "removed    %s\n" % (home / ".cache" / "cudafix")
    assert not (home / ".cache" / "cudafix").exists()


def test_clear_all_never_follows_a_link(tmp_path):
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_text("x")
    os.symlink(str(target), str(home / ".cache" / "cudafix"))
    r = run(home, "cache", "clear", "--all")
    assert r.returncode == 0 and r.stdout == "nothing to remove\n"
    assert (target / "keep").exists()


def test_bad_usage_is_one_line_and_status_2(tmp_path):
    r = run(tmp_path, "cache", "clear", "--all", "--prefix", str(tmp_path))
    assert r.returncode == 2 and "--prefix or --all" in r.stderr
