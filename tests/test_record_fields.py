"""cudafix.model.record gives its classes the fields dataclasses.dataclass would (record's
``_fields_fast`` skips dataclasses' per-field checks, issue 23): checked for every record class on
every real CPython 3.8-3.13 installed here and on this interpreter, against dataclasses itself
(tests/record_fields_check.py)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, require

PYTHONS = sorted(p for p in glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3.*"))
                 if p.rsplit("python", 1)[1].replace(".", "").isdigit() and not p.endswith(("3.6", "3.7")))


@pytest.mark.parametrize("python", [sys.executable] + PYTHONS)
def test_fields_as_dataclasses_makes_them(python):
    require(os.path.exists(python), "interpreter %s" % python)
    p = subprocess.run([python, str(REPO / "tests" / "record_fields_check.py"), str(REPO)], capture_output=True, text=True,
                       timeout=300, cwd=str(REPO))
    assert p.returncode == 0, p.stderr[-2000:]
    summary = [x for x in p.stdout.splitlines() if x.startswith("SUMMARY ")][-1].split()
    classes, differing, missed = int(summary[2]), int(summary[4]), int(summary[6])
    assert classes >= 60 and differing == 0 and missed == 0, p.stdout[-3000:]


def test_pyenv_interpreters_are_there():
    require(len(PYTHONS) >= 4, "pyenv's CPython 3.8-3.13 (this image has them)")
