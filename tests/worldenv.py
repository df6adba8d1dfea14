"""Envs every user can reach, for the tests that run an env's python unprivileged (issue 36: the
Slurm prolog and the NHC check drop root before they touch the env).  /root (pyenv, the test
venvs) is 0700 here, so these are venvs of the system's /usr/bin/python3 in a world-traversable
directory under /tmp, with cudafix's runtime requirements from the test interpreter's own
site-packages (a .pth line) and, where asked, a stub torch (tests/test_startup_helpers.py)."""

from __future__ import annotations

import os
import pathlib
import sys
import sysconfig
import tempfile
from typing import Optional

from tests import users
from tests.test_startup_helpers import make_venv, site_packages as _venv_site, stub_torch


def world_dir(prefix: str) -> pathlib.Path:
    d = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(str(d), 0o755)
    return d


def world_venv(path: pathlib.Path, cudafix: bool = False, torch: Optional[str] = None, cuda: Optional[str] = None) -> pathlib.Path:
    """A root-owned venv at ``path`` (its parent must be world-traversable); returns its python."""
    python = users.SYSTEM_PYTHON if os.access(users.SYSTEM_PYTHON, os.X_OK) else sys.executable
    deps = [sysconfig.get_paths()["purelib"]]
    if torch is not None:
        deps.append(str(stub_torch(path.parent / ("%s-torch" % path.name), version=torch, cuda=cuda)))
    return make_venv(path, cudafix=cudafix, deps=deps, python=python)


def site_packages(python: pathlib.Path) -> pathlib.Path:
    return _venv_site(python.parent.parent)
