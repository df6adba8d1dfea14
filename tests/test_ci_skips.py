"""Green never means skipped: under CI=true a missing prerequisite fails the test with its reason.

Runs a small test file in a child pytest with this suite's conftest loaded as a plugin, once as
CI (CI=true) and once locally, and reads the outcomes pytest reports.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

CASES = '''
import pytest
from tests.conftest import require

def test_require_missing():
    require(False, "frobnicator 9 not installed")

def test_require_present():
    require(True, "never said")

def test_plain_skip():
    pytest.skip("some tool missing")

@pytest.mark.skipif(True, reason="marked skip")
def test_skipif_mark():
    pass

@pytest.mark.gpu
def test_needs_a_gpu():
    pytest.skip("no NVIDIA GPU here")

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False
'''


def _run(tmp_path, ci):
    f = tmp_path / "test_cases.py"
    f.write_text(CASES)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    env["PYTHONPATH"] = str(REPO)
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-rA",
                        "--rootdir", str(tmp_path), str(f)], capture_output=True, text=True, cwd=str(REPO), env=env, timeout=300)
    outcomes = {}
    for line in p.stdout.splitlines():
        if line.startswith("SKIPPED ["):  # "SKIPPED [1] file:line: reason"
            outcomes.setdefault("_skips", []).append(line)
            continue
        for word in ("PASSED", "FAILED", "ERROR", "XFAIL"):
            if line.startswith(word + " ") and "::" in line:
                outcomes[line.split("::", 1)[1].split()[0]] = word
    return p, outcomes


def test_under_ci_a_missing_prerequisite_fails_with_its_reason(tmp_path):
    p, out = _run(tmp_path, ci=True)
    assert out.get("test_require_missing") == "FAILED", p.stdout[-3000:]
    assert "prerequisite missing (CI=true, so this is a failure): frobnicator 9 not installed" in p.stdout
    assert out.get("test_require_present") == "PASSED"
    assert out.get("test_plain_skip") == "FAILED", out
    assert out.get("test_skipif_mark") == "ERROR", out  # a skip mark acts at setup: reported as an error
    assert "skipped under CI=true (a missing prerequisite is a failure): marked skip" in p.stdout
    assert out.get("test_expected_failure") == "XFAIL"
    # the one kind of test that may skip in CI, with its reason printed
    assert [s for s in out.get("_skips", []) if "no NVIDIA GPU here" in s], p.stdout[-3000:]
    assert p.returncode == 1


def test_locally_a_missing_prerequisite_skips_and_says_why(tmp_path):
    p, out = _run(tmp_path, ci=False)
    skips = "\n".join(out.get("_skips", []))
    for reason in ("frobnicator 9 not installed", "some tool missing", "marked skip", "no NVIDIA GPU here"):
        assert reason in skips, p.stdout[-3000:]
    assert p.returncode == 0, p.stdout[-3000:]
