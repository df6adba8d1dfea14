"""Real second and third unprivileged users for the trust tests (issue 18 item 3): created with
useradd by the test session (this machine runs the tests as root), used through setpriv, removed
with userdel at the end.  Under CI a missing prerequisite (not root, no useradd/setpriv) fails.

Their files live in a directory the test makes world-traversable (0755) under /tmp, with a venv
made by the system's /usr/bin/python3 (pyenv's interpreters are under /root, 0700).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from typing import Dict, List, Optional

import pytest

NAMES = ("cfxhh-victim", "cfxhh-attacker")
SYSTEM_PYTHON = "/usr/bin/python3"


def need_users() -> None:
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        missing.append(SYSTEM_PYTHON)
    if missing:
        msg = "second-user tests need %s" % ", ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def create(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True, timeout=60)
        return pwd.getpwnam(name)


def remove(name: str) -> None:
    subprocess.run(["userdel", name], capture_output=True, timeout=60)


def module_user(name: str, fixture_name: str = "other"):
    """A module-scoped fixture: the user ``name``, created for the test module, removed after it.
    In a test module: ``other = users.module_user("cfxsec-x")``."""

    @pytest.fixture(scope="module", name=fixture_name)
    def _user():
        need_users()
        u = create(name)
        yield u
        remove(name)

    return _user


def as_user(user: pwd.struct_passwd, argv: List[str], env: Optional[Dict[str, str]] = None, timeout: float = 120,
            cwd: str = "/") -> subprocess.CompletedProcess:
    """Run argv as ``user`` (no supplementary groups), in its own session, with exactly ``env``."""
    cmd = ["setpriv", "--reuid=%d" % user.pw_uid, "--regid=%d" % user.pw_gid, "--clear-groups", "--"] + argv
    return subprocess.run(cmd, env=env if env is not None else {"PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, start_new_session=True)
