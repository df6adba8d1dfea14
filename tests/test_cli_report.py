"""`cudafix status / check / snapshot / explain` as users run them: on the real torch venvs,
on recorded snapshots, with bad input, in a pipe and on a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cudafix import cli, rules
from cudafix.cli import report as cli_report
from cudafix.model.findings import OK, PROBLEM, Outcome, Rule
from cudafix.model.fixes import Fix
from cudafix.model.snapshot import Snapshot
from tests.conftest import REPO, require, run_cudafix, run_dev_cudafix
from tests.test_report import healthy_h200, no_driver

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def write(tmp_path, snap: Snapshot, name: str = "snap.json") -> str:
    path = tmp_path / name
    path.write_text(snap.to_json())
    return str(path)


def one_line_error(r) -> str:
    """Bad input: exit 2, nothing on stdout, exactly one line on stderr."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("cudafix: error: ")
    return lines[0]


# -- the real venvs ----------------------------------------------------------------------


def test_status_json_on_the_cuda_venv(torch_cu_python):
    r = run_cudafix(torch_cu_python, "status", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "cudafix.status/1"
    snap = Snapshot.from_dict(doc["snapshot"])  # the embedded snapshot is a valid cudafix.snapshot/1
    assert snap.python.executable.startswith(str(torch_cu_python.parent.parent))
    t = snap.primary_torch
    assert t is not None and t.version == "2.14.1+cu130" and t.cuda == "13.0"
    for f in doc["findings"]:
        assert set(f) >= {"rule", "severity", "message", "evidence", "fix", "auto"}
        assert f["rule"] in rules.BY_ID and f["severity"] in ("error", "warning", "info")
        assert isinstance(f["evidence"], list) and isinstance(f["auto"], bool)
    assert set(doc["verdicts"]) == {r.id for r in rules.REGISTRY}


def test_check_on_the_cuda_venv_without_driver(torch_cu_python):
    """This machine has no NVIDIA driver: a CUDA torch build here gets a no-driver finding, and
    check's exit status follows the severities of what it found."""
    r = run_cudafix(torch_cu_python, "check", "--json")
    doc = json.loads(r.stdout)
    severities = {f["severity"] for f in doc["findings"]}
    assert "no-driver" in [f["rule"] for f in doc["findings"]]
    assert r.returncode == (1 if "error" in severities else 0), r.stderr
    strict = run_cudafix(torch_cu_python, "check", "--strict")
    # issue 12: without NVIDIA hardware (no 0x10de function on this machine's PCI bus) the CUDA
    # build simply runs on the CPU: a note, and --strict passes; with the hardware, an error.
    import pathlib

    nvidia = "0x10de" in [p.read_text().strip() for p in pathlib.Path("/sys/bus/pci/devices").glob("*/vendor")]
    assert strict.returncode == (1 if nvidia else 0), strict.stdout
    assert re.search(r"^  (error|info) +no-driver", strict.stdout, re.M), strict.stdout


def test_cpu_venv_is_healthy(torch_cpu_python):
    """torch 2.13.0 CPU on a machine without GPU: nothing to complain about, even with --strict."""
    r = run_cudafix(torch_cpu_python, "check", "--strict")
    assert r.returncode == 0, r.stdout + r.stderr
    s = run_cudafix(torch_cpu_python)  # plain `cudafix` is `cudafix status`
    assert s.returncode == 0, s.stderr
    assert "torch 2.13.0" in s.stdout and "CPU-only build" in s.stdout
    for section in ("Driver", "GPUs", "PyTorch", "Toolkits", "Libraries", "Environment", "Findings"):
        assert re.search("^%s" % section, s.stdout, re.M), section


def test_python_option_inspects_another_env(torch_cpu_python, tmp_path):
    out = tmp_path / "cpu.json"
    r = run_dev_cudafix("snapshot", "--python", str(torch_cpu_python), "-o", str(out))
    assert r.returncode == 0, r.stderr
    snap = Snapshot.load(str(out))
    assert snap.primary_torch is not None and snap.primary_torch.version.startswith("2.13.0")


# -- exit codes of check (in-process, with rules made for the test) ----------------------


def _fires_on(var: str, severity: str) -> Rule:
    def check(snap):
        if var in snap.env:
            yield Outcome(PROBLEM, "%s is set" % var, fix=Fix(summary="unset %s" % var))
        else:
            yield Outcome(OK, "%s unset" % var)

    return Rule(id="t-%s" % severity, severity=severity, title="test rule", check=check)


@pytest.fixture
def test_rules(monkeypatch):
    reg = (_fires_on("ERR", "error"), _fires_on("WARN", "warning"), _fires_on("NOTE", "info"))
    monkeypatch.setattr(rules, "REGISTRY", reg)
    monkeypatch.setattr(rules, "BY_ID", {r.id: r for r in reg})
    return reg


@pytest.mark.parametrize("env, strict, code", [
    ({}, False, 0),
    ({"NOTE": "1"}, True, 0),
    ({"WARN": "1"}, False, 0),
    ({"WARN": "1"}, True, 1),
    ({"ERR": "1"}, False, 1),
    ({"ERR": "1", "WARN": "1"}, True, 1),
])
def test_check_exit_codes(tmp_path, test_rules, env, strict, code):
    snap = Snapshot(env=env)
    args = ["check", "--from", write(tmp_path, snap)] + (["--strict"] if strict else [])
    res = CliRunner().invoke(cli.main, args)
    assert res.exit_code == code, res.output
    for var in env:
        assert "%s is set" % var in res.stdout


def test_only_and_skip_select_rules(tmp_path, test_rules):
    path = write(tmp_path, Snapshot(env={"ERR": "1", "WARN": "1"}))
    run = CliRunner().invoke
    assert run(cli.main, ["check", "--from", path, "--skip", "t-error"]).exit_code == 0
    assert run(cli.main, ["check", "--from", path, "--skip", "t-error", "--strict"]).exit_code == 1
    assert run(cli.main, ["check", "--from", path, "--only", "t-warning,t-info", "--strict"]).exit_code == 1
    assert run(cli.main, ["check", "--from", path, "--only", "t-info", "--only", "t-warning", "--skip", "t-warning", "--strict"]).exit_code == 0
    doc = json.loads(run(cli.main, ["status", "--json", "--from", path, "--only", "t-error"]).stdout)
    assert doc["verdicts"] == {"t-error": "problem"}


def test_probe_crash_is_exit_2_not_1(monkeypatch, test_rules):
    """A crash outside every probe's guard (here: the snapshot's assembly, where the CLI's
    sections come together, cudafix/probes/sections.py) is cudafix's failure: exit 2."""
    from cudafix.probes import sections

    def boom(*a, **kw):
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(sections, "assemble", boom)
    res = CliRunner().invoke(cli.main, ["check"])
    assert res.exit_code == 2
    assert res.stdout == ""
    assert res.stderr == "cudafix: error: cudafix failed: RuntimeError: probe exploded (CUDAFIX_DEBUG=1 shows where)\n"


def test_crashed_rule_is_unknown_not_a_crash(tmp_path, monkeypatch):
    def boom(snap):
        raise ValueError("bad data")

    reg = (Rule(id="t-crash", severity="error", title="t", check=boom),)
    monkeypatch.setattr(rules, "REGISTRY", reg)
    monkeypatch.setattr(rules, "BY_ID", {r.id: r for r in reg})
    res = CliRunner().invoke(cli.main, ["check", "--from", write(tmp_path, Snapshot())])
    assert res.exit_code == 0
    assert "t-crash: rule could not run: ValueError: bad data" in res.stdout


# -- bad input: one line on stderr, exit 2, nothing changed --------------------------------


CORRUPT = {
    "truncated": b'{"schema": "cudafix.snapshot/1", "driver": {',
    "not-utf8": b"\xff\xfe\x00garbage",
    "not-an-object": b"[1, 2]",
    "wrong-schema": b'{"schema": "cudafix.snapshot/999"}',
    "wrong-type": b'{"schema": "cudafix.snapshot/1", "gpus": {"gpus": [{"index": "zero", "name": "x"}]}}',
    "missing-required": b'{"schema": "cudafix.snapshot/1", "torch": [{"version": "2.0"}]}',
    "empty": b"",
}


@pytest.mark.parametrize("command", ["status", "check", "snapshot"])
@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_corrupt_from_file(tmp_path, command, kind):
    bad = tmp_path / ("%s.json" % kind)
    bad.write_bytes(CORRUPT[kind])
    line = one_line_error(run_dev_cudafix(command, "--from", str(bad)))
    assert str(bad) in line


def test_unreadable_from_file(tmp_path):
    line = one_line_error(run_dev_cudafix("status", "--from", str(tmp_path / "missing.json")))
    assert "No such file or directory" in line
    line = one_line_error(run_dev_cudafix("check", "--from", str(tmp_path)))
    assert "Is a directory" in line


def test_unknown_rule_ids():
    for args in (["status", "--only", "no-such-rule"], ["check", "--skip", "x,no-such-rule"], ["explain", "no-such-rule"]):
        line = one_line_error(run_dev_cudafix(*args))
        assert "unknown rule" in line and "cudafix explain --list" in line


def test_conflicting_sources_and_bad_python(tmp_path):
    path = write(tmp_path, Snapshot())
    assert "--from and --python cannot be combined" in one_line_error(
        run_dev_cudafix("status", "--from", path, "--python", sys.executable))
    assert "not an executable file" in one_line_error(run_dev_cudafix("status", "--python", str(tmp_path / "nope")))


def test_bad_assume_value(tmp_path):
    path = write(tmp_path, Snapshot())
    assert "banana" in one_line_error(run_dev_cudafix("check", "--from", path, "--assume-driver", "banana"))
    assert "sm_banana" in one_line_error(run_dev_cudafix("check", "--from", path, "--assume-gpu", "sm_banana"))
    env = dict(os.environ, CUDAFIX_ASSUME_DRIVER="not-a-version")
    assert "not-a-version" in one_line_error(run_dev_cudafix("status", "--from", path, env=env))


def test_snapshot_to_missing_directory_writes_nothing(tmp_path):
    path = write(tmp_path, Snapshot())
    one_line_error(run_dev_cudafix("snapshot", "--from", path, "-o", str(tmp_path / "no" / "such.json")))
    assert sorted(os.listdir(tmp_path)) == ["snap.json"]


# -- snapshot, default command, examples ---------------------------------------------------


def test_snapshot_round_trip(tmp_path):
    snap = healthy_h200()
    src = write(tmp_path, snap, "src.json")
    out = tmp_path / "out.json"
    r = run_dev_cudafix("snapshot", "--from", src, "-o", str(out))
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    assert Snapshot.load(str(out)) == snap
    r = run_dev_cudafix("snapshot", "--from", src)
    assert Snapshot.from_json(r.stdout) == snap
    assert [p for p in os.listdir(tmp_path) if p.startswith(".cudafix")] == []


def test_plain_cudafix_is_status(tmp_path):
    path = write(tmp_path, no_driver())
    a = run_dev_cudafix("--from", path, "--json")
    b = run_dev_cudafix("status", "--from", path, "--json")
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout) == json.loads(b.stdout)


def test_bundled_examples():
    names = cli_report.example_names()
    assert names, "no snapshot bundled under cudafix/data/examples"
    for name in names:
        snap = Snapshot.load(os.path.join(cli_report.EXAMPLES_DIR, name + ".json"))
        assert snap.source and snap.source != "probed", "%s: say where it was recorded" % name
        r = run_dev_cudafix("status", "--example", name)
        assert r.returncode == 0, r.stderr
        # the report wraps at 80 columns (render.text.fit_lines): compare the words
        words = " ".join(r.stdout.split())
        assert "snapshot: bundled example %s at %s source: %s " % (name, snap.created, " ".join(snap.source.split())) in words
    assert "unknown example" in one_line_error(run_dev_cudafix("status", "--example", "no-such-example"))


# -- colour: TTY only, NO_COLOR honoured --------------------------------------------------


def _in_pty(args, env):
    master, slave = pty.openpty()
    e = dict(env, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "cudafix", *args], stdin=slave, stdout=slave, stderr=slave,
                         env=e, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert p.wait(timeout=120) == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_on_tty_only(tmp_path):
    path = write(tmp_path, healthy_h200())
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    base["TERM"] = "xterm"
    tty = _in_pty(["status", "--from", path], base)
    assert ANSI.search(tty), tty[:300]
    assert "\x1b[1mDriver" in tty
    assert not ANSI.search(_in_pty(["status", "--from", path], dict(base, NO_COLOR="1")))
    # NO_COLOR present but empty does not disable colour (no-color.org)
    assert ANSI.search(_in_pty(["status", "--from", path], dict(base, NO_COLOR="")))
    assert not ANSI.search(_in_pty(["status", "--from", path], dict(base, TERM="dumb")))
    piped = run_dev_cudafix("status", "--from", path, env=base)
    assert piped.returncode == 0 and not ANSI.search(piped.stdout)
    # what the terminal showed is the piped text plus colour
    assert ANSI.sub("", tty).replace("\r\n", "\n") == piped.stdout


# -- explain -------------------------------------------------------------------------------


def test_explain_every_registered_rule():
    assert rules.REGISTRY, "no rules registered"
    runner = CliRunner()
    listing = runner.invoke(cli.main, ["explain", "--list"])
    assert listing.exit_code == 0
    from cudafix.fleet.checks import FLEET_RULES

    listed = [ln.split()[0] for ln in listing.stdout.splitlines() if not ln.startswith(" ")]  # wrapped: indented
    assert listed == [r.id for r in rules.REGISTRY] + [r.id for r in FLEET_RULES]
    for rule in tuple(rules.REGISTRY) + FLEET_RULES:
        res = runner.invoke(cli.main, ["explain", rule.id])
        assert res.exit_code == 0, (rule.id, res.output)
        assert res.stdout.startswith(rule.id + "  (" + rule.severity)
        assert " ".join(rule.title.split()) in " ".join(res.stdout.split())  # wrapped at 80 columns
        for symptom in rule.symptoms:
            assert "  " + symptom + "\n" in res.stdout, (rule.id, symptom)
        for source in rule.sources:
            assert "  - " + source + "\n" in res.stdout, (rule.id, source)


def test_every_rule_is_documented():
    """explain must have something to say: cause, real error texts, evidence used, fix, sources."""
    missing = {}
    for rule in rules.REGISTRY:
        holes = [name for name in ("cause", "symptoms", "evidence_used", "fix_text", "sources") if not getattr(rule, name)]
        if holes:
            missing[rule.id] = holes
    assert not missing


# -- the README's two commands and CI --------------------------------------------------------


def _readme_commands():
    text = (REPO / "README.md").read_text()
    block = text.split("## Two commands", 1)[1].split("```", 2)[1]
    return [ln.split("#")[0].strip() for ln in block.strip().splitlines()]


def test_ci_runs_exactly_the_readme_test_command():
    status_cmd, test_cmd = _readme_commands()
    assert status_cmd == "./run status" and test_cmd == "./run test"
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert ci[0] == "#!/usr/bin/env bash"
    code = [ln for ln in ci if ln.strip() and not ln.startswith("#")]
    assert code == ["set -euo pipefail", 'cd "$(dirname "${BASH_SOURCE[0]}")/.."', "exec " + test_cmd]
    assert os.access(REPO / ".ci" / "run", os.X_OK) and os.access(REPO / "run", os.X_OK)


def test_run_test_fails_when_no_test_is_collected():
    # CUDAFIX_RUN_NO_SETUP: no apt-get, no test venvs -- a test never installs software
    env = dict(os.environ, CUDAFIX_RUN_PYTHON=sys.executable, CUDAFIX_RUN_NO_SETUP="1")
    r = subprocess.run([str(REPO / "run"), "test", "-q", "-k", "no_test_has_this_name_zzz"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "pytest collected no tests (exit status 5)" in r.stderr


def test_run_status_shows_the_bundled_example_without_driver():
    require(not (os.path.exists("/sys/module/nvidia/version") or os.path.exists("/proc/driver/nvidia/version")),
            "needs a machine without an NVIDIA driver (with one, ./run status shows only the real machine)")
    env = dict(os.environ, CUDAFIX_RUN_PYTHON=sys.executable)
    r = subprocess.run([str(REPO / "run"), "status"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.split("No NVIDIA driver here (said above)")
    # issue 35: said in the first lines of the machine's own report, its unknown rows collapsed
    assert "no NVIDIA driver on this machine" in "\n".join(first.splitlines()[:6])
    assert "kernel module    unknown" not in first and "none             no kernel module, no libcuda.so.1" in first
    assert "snapshot: bundled example h100-rich-torch2.11-cu130" in second
    assert "0  NVIDIA H100 80GB HBM3  sm_90" in second


def test_status_caches_the_arch_scan_per_env(torch_cu_python, tmp_path):
    """The fatbin scan result is kept in the env's cache dir (as the hook does) and reused."""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    first = run_cudafix(torch_cu_python, "status", "--json", env=env)
    assert first.returncode == 0, first.stderr
    caches = list(tmp_path.glob("cudafix/envs/*/fatbin-cache.json"))
    assert len(caches) == 1
    assert caches[0].parent.name == __import__("cudafix.store.paths").store.paths.env_key(str(torch_cu_python.parent.parent))
    second = run_cudafix(torch_cu_python, "status", "--json", env=env)
    arch = [[(a["library"], a["sass"], a["ptx"]) for a in json.loads(r.stdout)["snapshot"]["torch"][0]["arch"]]
            for r in (first, second)]
    assert arch[0] == arch[1] and any("sm_90" in sass for _lib, sass, _ptx in arch[0])
