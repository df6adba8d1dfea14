"""The README's install routes, run verbatim as a new user would: a fresh venv, a fresh copy of
the checkout, a HOME of its own (no pip config of this machine), the lines of the marked blocks
(`<!-- install:pip` / `<!-- install:conda`) run one by one with bash.  Each line must succeed
with nothing on stderr, and the result must be a working `cudafix`.

`conda` itself is not on PyPI, so CI cannot run the conda route's last line with the real thing:
a stand-in `conda` (below) checks that the channel the line names holds cudafix and its
dependencies as conda would read them (py-rattler).  The route was run with a real conda too:
docs/install.md, "Verified with a real conda".
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
from typing import Dict, List

import pytest

from tests.conftest import REPO
from tests.test_packaging_conda import RUN_DEPENDS
from tests.test_packaging_wheel import copy_checkout, source_version

README = REPO / "README.md"


def readme_block(marker: str) -> List[str]:
    """The command lines of the ```sh block right after ``<!-- install:MARKER``."""
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- install:%s\b[^\n]*-->\s*\n```sh\n(.*?)\n```" % re.escape(marker), text, re.S)
    assert m, "README.md has no <!-- install:%s --> block followed by ```sh" % marker
    lines = [ln.strip() for ln in m.group(1).splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def new_user_env(home: pathlib.Path, venv: pathlib.Path) -> Dict[str, str]:
    """The environment of a new user whose shell has the venv activated."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "CONDA"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               VIRTUAL_ENV=str(venv), PATH="%s:%s" % (venv / "bin", os.environ.get("PATH", "/usr/bin:/bin")))
    # Kept from this machine: the CA bundle pip must trust here.  pip's own "a new release of
    # pip is available" notice depends on pip's release date, not on cudafix: switched off.
    if "PIP_CERT" in os.environ:
        env["PIP_CERT"] = os.environ["PIP_CERT"]
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture()
def fresh(tmp_path) -> dict:
    src = copy_checkout(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    home = tmp_path / "home"
    home.mkdir()
    return {"src": src, "venv": venv, "env": new_user_env(home, venv), "tmp": tmp_path}


def run_lines(lines: List[str], fresh: dict) -> None:
    for line in lines:
        proc = subprocess.run(["bash", "-c", line], cwd=str(fresh["src"]), env=fresh["env"],
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, "%s\n%s%s" % (line, proc.stdout, proc.stderr)
        assert proc.stderr == "", "README line %r wrote to stderr:\n%s" % (line, proc.stderr)


def assert_working_cudafix(fresh: dict) -> None:
    exe = fresh["venv"] / "bin" / "cudafix"
    proc = subprocess.run([str(exe), "--version"], env=fresh["env"], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (0, "cudafix, version %s" % source_version(), "")
    proc = subprocess.run([str(exe), "status", "--json", "--example", "h200-torch2.11-cu130"], env=fresh["env"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == "cudafix.status/1"


def test_readme_pip_route_verbatim_in_a_fresh_venv(fresh):
    lines = readme_block("pip")
    assert lines == ["python -m pip install ."]  # what a reader copies; change both together
    run_lines(lines, fresh)
    assert_working_cudafix(fresh)


# The stand-in for `conda install -c DIR ... NAME` (CI has no conda): it resolves NAME in the
# local channels the way a conda client reads them and records what it found.
STAND_IN = textwrap.dedent('''\
    #!{python}
    import json, os, sys
    import rattler
    args = sys.argv[1:]
    assert args[0] == "install", args
    channels = [args[i + 1] for i, a in enumerate(args) if a == "-c"]
    names = [a for i, a in enumerate(args[1:], 1) if not a.startswith("-") and args[i - 1] != "-c"]
    found = []
    for ch in channels:
        if not os.path.isdir(ch):
            continue  # conda-forge: not reachable here
        repodata = os.path.join(ch, "noarch", "repodata.json")
        repo = rattler.SparseRepoData(rattler.Channel(os.path.abspath(ch)), "noarch", repodata)
        for name in names:
            for r in repo.load_records(rattler.PackageName(name)):
                found.append({{"name": r.name.normalized, "version": str(r.version),
                              "depends": [str(d) for d in r.depends], "file": os.path.join(ch, "noarch", r.file_name)}})
    with open(os.environ["STAND_IN_LOG"], "w") as fh:
        json.dump({{"args": args, "found": found}}, fh)
    sys.exit(0 if found else 1)
    ''')


def test_readme_conda_route_verbatim_with_the_local_channel(fresh):
    lines = readme_block("conda")
    assert lines[-1] == "conda install -c ./channel -c conda-forge cudafix"
    real = shutil.which("conda", path=fresh["env"]["PATH"])
    assert real is None, "a real conda on PATH: %s (this test's stand-in would shadow it)" % real
    bindir = fresh["tmp"] / "standin"
    bindir.mkdir()
    (bindir / "conda").write_text(STAND_IN.format(python=fresh["venv"] / "bin" / "python"))
    (bindir / "conda").chmod(0o755)
    fresh["env"]["PATH"] = "%s:%s" % (bindir, fresh["env"]["PATH"])
    fresh["env"]["STAND_IN_LOG"] = str(fresh["tmp"] / "conda.json")
    run_lines(lines, fresh)
    log = json.loads((fresh["tmp"] / "conda.json").read_text())
    assert [(f["name"], f["version"]) for f in log["found"]] == [("cudafix", source_version())]
    rec = log["found"][0]
    assert rec["depends"] == RUN_DEPENDS  # what setup.cfg says (tests/test_packaging_conda.py)
    assert pathlib.Path(fresh["src"], rec["file"]).is_file()
