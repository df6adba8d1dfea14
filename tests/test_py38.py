"""Everything that runs inside a user's env must work on Python 3.8 (yolov9 images ship 3.8).

Only a newer Python runs here, so the check is static: vermin over the package and the
startup module, targeting 3.8.  Annotations are evaluated at runtime in cudafix/model/snapshot.py
(typing.get_type_hints rebuilds dataclasses from JSON), so that file is also checked with
--eval-annotations: `list[str]` there would break `--from` on 3.8.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

# vermin has no __main__; run its console-script entry point with this interpreter
VERMIN = [sys.executable, "-c", "import sys; from vermin import main; sys.exit(main())"]


def _vermin(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(VERMIN + ["-t=3.8-", "--no-tips", "--violations", *args],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)


def _violations(out: str) -> list:
    # vermin --violations prints "!2, 3.9      path" per offending file, then indented reasons
    return [ln for ln in out.splitlines() if ln.strip() and not ln.startswith(("Detecting", "Analyzing", "Minimum", "Incompatible", "Target", "No known"))]


@pytest.fixture(scope="module", autouse=True)
def _have_vermin():
    r = subprocess.run(VERMIN + ["--version"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("vermin is not installed (pip install -r requirements-dev.txt): %s" % r.stderr.strip())


def test_package_and_startup_module_are_python38():
    targets = ["cudafix", "_cudafix_startup.py"]
    missing = [t for t in targets if not (REPO / t).exists()]
    assert not missing, missing
    r = _vermin(*targets)
    assert r.returncode == 0 and not _violations(r.stdout), r.stdout + r.stderr


def test_snapshot_annotations_are_python38():
    r = _vermin("--eval-annotations", "cudafix/model/snapshot.py", "cudafix/model/findings.py", "cudafix/model/fixes.py")
    assert r.returncode == 0 and not _violations(r.stdout), r.stdout + r.stderr


def test_the_check_catches_a_violation(tmp_path):
    """The check itself can fail: a 3.9-only construct must be reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("import functools\n\n@functools.cache\ndef f(x: list[int]) -> None:\n    pass\n")
    r = subprocess.run(VERMIN + ["-t=3.8-", "--no-tips", "--violations", "--eval-annotations", str(bad)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "functools.cache" in r.stdout and _violations(r.stdout)

