"""The startup hook's start under every real CPython 3.8-3.14 on this machine (pyenv's, where
present), not only the one running the tests: site.py's .pth handling is what the hook relies on
(an `import` line exec'd with `sitedir` in scope; in a venv, a second pass over site-packages that
_skip_second_pass removes), and it differs between versions.

The 3.8 interpreter is required (tests/make_venvs.sh uses the same one); the others are tested
where installed.
"""

from __future__ import annotations

import glob
import os
import pathlib
import shutil
import subprocess
from typing import List

import pytest

from tests.test_startup_helpers import COUNT_PTH, make_venv, site_packages


def _interpreters() -> List[str]:
    found = []
    for minor in range(8, 15):
        cands = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.%d.*/bin/python3.%d" % (minor, minor))))
        cands += ["/usr/bin/python3.%d" % minor, "/usr/local/bin/python3.%d" % minor]
        for c in cands:
            if os.access(c, os.X_OK):
                found.append(c)
                break
    return found


INTERPRETERS = _interpreters()


def test_a_python_38_is_there():
    assert any("3.8" in os.path.basename(p) for p in INTERPRETERS), \
        "no Python 3.8 found (pyenv's 3.8, as tests/make_venvs.sh uses): %s" % INTERPRETERS


def _venv(python: str, root: pathlib.Path) -> pathlib.Path:
    """A venv of ``python`` with cudafix installed and one other package's .pth, counting its runs
    (it sorts after cudafix.pth); returns its site-packages."""
    make_venv(root, python=python)
    site = site_packages(root)
    (site / "zz-other.pth").write_text(COUNT_PTH % "zz")
    return site


def _run(py: pathlib.Path, code: str, strace_out: pathlib.Path = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    cmd = [str(py), "-c", code]
    if strace_out is not None:
        cmd = ["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(strace_out)] + cmd
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd="/")


@pytest.mark.parametrize("python", INTERPRETERS, ids=[os.path.basename(p) for p in INTERPRETERS])
def test_start_in_a_venv(python, tmp_path):
    site = _venv(python, tmp_path / "v")
    py = tmp_path / "v" / "bin" / "python"
    code = ("import site, sys; print(sys.zz, site.addpackage.__module__, "
            "sum(1 for f in sys.meta_path if getattr(f, 'cudafix', 0) is True), '_cudafix_startup' in sys.modules)")
    p = _run(py, code)
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    # the other .pth ran twice, as site.py does in a venv; site.addpackage is site's own again;
    # one finder; the hook module loaded
    assert p.stdout.split() == ["[1,", "1]", "site", "1", "True"], p.stdout
    if shutil.which("strace"):
        trace = tmp_path / "trace"
        p = _run(py, "pass", trace)
        assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
        opens = [ln for ln in trace.read_text().splitlines() if ln.rstrip().find('cudafix.pth"') >= 0]
        assert len(opens) == 1, opens  # the second pass skipped it
    # stale .pth: cudafix uninstalled by hand but for the .pth: silent
    shutil.rmtree(str(site / "cudafix"))
    os.unlink(str(site / "_cudafix_startup.py"))
    shutil.rmtree(str(site / "__pycache__"), ignore_errors=True)
    p = _run(py, "import sys; print(sys.zz, '_cudafix_startup' in sys.modules)")
    assert (p.returncode, p.stdout.split(), p.stderr) == (0, ["[1,", "1]", "False"], "")
