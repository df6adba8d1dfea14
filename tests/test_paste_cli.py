"""`--from-report` as users run it: status, check, fix, explain, snapshot, --json, stdin, bad input.

The report files are the transcribed ones of tests/fixtures/paste/ and tests/fixtures/reports/.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_dev_cudafix

FIX = Path(__file__).resolve().parent / "fixtures"
DRIVER_OLD = str(FIX / "paste" / "collect_env-1.3-pytorch-30071.txt")  # driver 410.48, torch 1.3.1 (CUDA 10.1)
TV = str(FIX / "reports" / "32-tv-sdnext-3531.txt")  # pip show torch 2.4.0+cu121, torchvision 0.20.1+cu124
CONTROL = str(FIX / "reports" / "39-control-pytorch-97436.txt")


def test_status_shows_facts_certainty_and_what_needs_the_env() -> None:
    r = run_dev_cudafix("status", "--from-report", DRIVER_OLD)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())  # the report wraps at 80 columns
    assert "a pasted report, from %s" % DRIVER_OLD in out
    assert "line 26 NVIDIA driver 410.48 (collect_env)" in out  # its line in the file (3 header lines, the fence)
    assert "Certain from the report (1 finding)" in out and "driver-too-old" in out
    assert "Needs the env" in out and "run `cudafix status` in that env to decide" in out
    assert "upgrade the NVIDIA driver to >= 418.39" in out


def test_check_exit_status_and_fast_path_equals_click() -> None:
    bad = run_dev_cudafix("check", "--from-report", DRIVER_OLD)
    assert bad.returncode == 1, bad.stderr
    good = run_dev_cudafix("check", "--from-report", CONTROL)
    assert good.returncode == 0, good.stdout + good.stderr
    strict = run_dev_cudafix("check", "--strict", "--from-report", CONTROL)
    assert strict.returncode == 1  # what needs the env is not a pass under --strict
    # `--from-report=FILE` goes through click; `--from-report FILE` through cli/fast.py: the same
    clicked = run_dev_cudafix("check", "--from-report=%s" % DRIVER_OLD)
    assert (clicked.returncode, clicked.stdout) == (bad.returncode, bad.stdout)


def test_json_carries_the_report() -> None:
    r = run_dev_cudafix("status", "--json", "--from-report", TV)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "cudafix.status/1" and doc["snapshot"]["source"] == "pasted report"
    rep = doc["from_report"]
    tv = [f for f in rep["findings"] if f["rule"] == "torchvision-mismatch"]
    assert tv and tv[0]["certainty"] == "certain from the report" and tv[0]["severity"] == "error"
    assert {"name": "package", "value": "torchvision|0.20.1+cu124|pip||"}.items() <= next(
        f for f in rep["report"]["facts"] if f["value"].startswith("torchvision")).items()


def test_stdin_fix_and_explain(tmp_path) -> None:
    text = Path(TV).read_text(encoding="utf-8")
    import subprocess
    import sys

    from tests.conftest import REPO

    p = subprocess.run([sys.executable, "-m", "cudafix", "fix", "--from-report", "-"], input=text, capture_output=True,
                       text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "the plan for a pasted report, from stdin" in p.stdout and "torchvision" in p.stdout
    assert "pip install torch==" in p.stdout
    applied = run_dev_cudafix("fix", "--apply", "--from-report", TV)
    assert applied.returncode == 2 and "nothing here to apply" in applied.stderr and applied.stdout == ""
    ex = run_dev_cudafix("explain", "--from-report", TV)
    assert ex.returncode == 0 and ex.stdout.startswith("torchvision-mismatch")


def test_bad_input_is_one_line() -> None:
    for argv in (["status", "--from-report", "/nonexistent/report.txt"],
                 ["status", "--from-report", DRIVER_OLD, "--example", "h200-torch2.11-cu130"],
                 ["check", "--from-report", DRIVER_OLD, "--assume-driver", "580.95.05"],
                 ["explain", "driver-too-old", "--from-report", DRIVER_OLD]):
        r = run_dev_cudafix(*argv)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert r.stdout == "" and len(r.stderr.splitlines()) == 1 and r.stderr.startswith("cudafix: error: "), (argv, r.stderr)


def test_snapshot_from_report_round_trips(tmp_path) -> None:
    out = tmp_path / "snap.json"
    r = run_dev_cudafix("snapshot", "--from-report", DRIVER_OLD, "-o", str(out))
    assert r.returncode == 0, r.stderr
    again = run_dev_cudafix("check", "--from", str(out))
    assert again.returncode == 1 and "driver-too-old" in again.stdout


def test_a_huge_file_is_read_in_bounded_memory(tmp_path, monkeypatch) -> None:
    from cudafix.cli import pasted

    monkeypatch.setattr(pasted, "MAX_BYTES", 1000)
    path = tmp_path / "huge.log"
    path.write_bytes(b"Nvidia driver version: 410.48\n" + b"x" * 5000 + b"\nPyTorch version: 1.3.1\n")
    data = pasted.read_bytes(str(path))
    assert len(data) <= 1001 and data.startswith(b"Nvidia driver version: 410.48") and data.endswith(b"PyTorch version: 1.3.1\n")
