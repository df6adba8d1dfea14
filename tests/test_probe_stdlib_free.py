"""The probes' facts read without importing platform and datetime (issue 23: ~3 ms of `status`)
are the ones those modules give: the host's os / kernel / machine as platform.uname() names them,
the interpreter's version as platform.python_version() spells it (on every real CPython 3.8-3.13
installed here, each run as its own process), and the snapshot's time as datetime's isoformat()."""

from __future__ import annotations

import datetime
import glob
import os
import platform
import subprocess

import pytest

from cudafix import probes
from cudafix.probes.machine import host
from tests.conftest import REPO, require

PYTHONS = sorted(p for p in glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3.*"))
                 if p.rsplit("python", 1)[1].replace(".", "").isdigit() and not p.endswith(("3.6", "3.7")))


def test_host_as_platform_names_it():
    u = platform.uname()
    got = host.probe_host()
    assert got["os"] == (u.system.lower() or "unknown")
    assert got.get("kernel") == (u.release or None) and got.get("machine") == (u.machine or None)


@pytest.mark.parametrize("python", PYTHONS or ["(none)"])
def test_python_version_as_platform_spells_it(python):
    require(python != "(none)", "no pyenv CPython 3.8+ interpreters on this machine")
    code = ("import platform, sys; sys.path.insert(0, %r); from cudafix import probes; "
            "print(probes.current_python()[0].version); print(platform.python_version())" % str(REPO))
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert len(out) == 2 and out[0] == out[1], (python, out)


def test_python_version_of_this_interpreter():
    assert probes.current_python()[0].version == platform.python_version()


def test_snapshot_time_is_utc_isoformat_to_the_second():
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    got = probes._now()
    after = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    when = datetime.datetime.fromisoformat(got)
    assert before <= when <= after and when.isoformat() == got
