"""One trusted runner (issue 36, the Medium items): every program cudafix runs gets `/` as its
directory, a closed stdin, bounded output, its own process group killed with it (when it exits,
on the timeout, on SIGTERM and SIGINT), and its temporary caches removed in every case; a program
cudafix picks itself (nvcc) must be root's, ours or the env owner's.

Real processes throughout: real shells whose grandchildren hold the output pipe, a real `yes`
under a real memory limit, a real SIGTERM to a real `cudafix verify` process, a real second user's
nvcc.  Every test fails on 89c72a4.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from tests import users
from tests.conftest import REPO

OTHER = "cfxsec-runner"
other = users.module_user(OTHER)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, within: float) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def test_verify_cmd_does_not_wait_for_a_grandchild_holding_stdout(tmp_path):
    """The command exits 0 but leaves a child holding its stdout: 89c72a4 waited the whole timeout
    and reported "exited with 124", and left the child running."""
    from cudafix.verify import cmdrun

    pidfile = tmp_path / "pid"
    cmd = ["sh", "-c", "sleep 60 & echo $! > %s; echo done" % pidfile]
    t0 = time.monotonic()
    try:
        rep = cmdrun.run_command(cmd, timeout=8, env=dict(os.environ))
    except cmdrun.CommandFailed as exc:
        pytest.fail("the command exited 0, cudafix says %s (after %.1f s)" % (exc, time.monotonic() - t0))
    took = time.monotonic() - t0
    assert all(r["rc"] == 0 and r["last_line"] == "done" for r in rep["runs"]), rep["runs"]
    assert took < 3 * len(rep["runs"]), "%.1f s for %d runs: waited on the grandchild" % (took, len(rep["runs"]))
    assert _wait_dead(int(pidfile.read_text()), 5), "the command's child was left running"


def test_verify_cmd_gets_no_stdin(tmp_path):
    code = ("from cudafix.verify import cmdrun\n"
            "rep = cmdrun.run_command(['sh', '-c', 'read x; echo \"got:$x\"'], timeout=30)\n"
            "print(rep['runs'][0]['last_line'])\n")
    p = subprocess.run([sys.executable, "-c", code], input="the caller's secret\n", capture_output=True, text=True,
                       timeout=120, cwd=str(REPO))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "got:", p.stdout


def test_verify_cmd_output_is_bounded():
    """`yes` for 6 s under a 1 GiB address-space limit: 89c72a4 buffered it whole (MemoryError)."""
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from cudafix.verify import cmdrun\n"
            "try:\n"
            "    cmdrun.run_command(['yes'], timeout=6)\n"
            "except cmdrun.CommandFailed as exc:\n"
            "    print('failed', exc.rc, len(''.join(exc.tail)))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(REPO))
    assert "MemoryError" not in p.stderr, p.stderr[-500:]
    assert p.returncode == 0 and p.stdout.split()[:2] == ["failed", "124"], (p.stdout, p.stderr[-500:])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_verify_cmd_on_a_signal_kills_the_command_and_removes_its_caches(sig, tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    pidfile = tmp_path / "pid"
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "cudafix", "verify", "--first-run", "--timeout", "120", "--",
                          "sh", "-c", "sleep 60 & echo $! > %s; wait" % pidfile], env=env, cwd="/",
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < end:
            time.sleep(0.05)
        assert pidfile.exists(), "the command never started"
        assert list(tmpdir.iterdir()), "no temporary cache to remove: the case tests nothing"
        os.kill(p.pid, sig)
        p.wait(timeout=30)
        grandchild = int(pidfile.read_text())
        assert _wait_dead(grandchild, 5), "the command's process was left running after %s" % sig.name
        assert list(tmpdir.iterdir()) == [], "temporary caches left behind: %s" % list(tmpdir.iterdir())
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        if pidfile.exists() and pidfile.read_text().strip():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except OSError:
                pass


def test_a_signal_inside_popen_still_kills_the_child(tmp_path, monkeypatch):
    """The window the SIGINT case lost once under load: the signal lands after the fork, while
    the caller is still inside ``Popen`` (before the runner holds the child).  Made certain here:
    the real Popen returns, its child has started a grandchild, then SIGINT arrives, still
    inside the call.  The child's group must be killed all the same (fails on 3061f1e)."""
    from cudafix.store import runner

    pidfile = tmp_path / "pid"
    real = subprocess.Popen

    def popen_then_sigint(*a, **kw):
        proc = real(*a, **kw)
        end = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < end:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs here, inside the call, as it would under load
        return proc

    monkeypatch.setattr(runner.subprocess, "Popen", popen_then_sigint)
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run(["/bin/sh", "-c", "sleep 60 & echo $! > %s; wait" % pidfile], 60, env=dict(os.environ))
    finally:
        monkeypatch.undo()
    assert pidfile.read_text().strip(), "the command never started"
    grandchild = int(pidfile.read_text())
    alive = not _wait_dead(grandchild, 5)
    if alive:
        os.kill(grandchild, signal.SIGKILL)
    assert not alive, "a SIGINT inside Popen left the command running"


def _plant_json(d: pathlib.Path, marker: pathlib.Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "json.py").write_text("open(%r, 'a').write('ran\\n')\nfrom _json import *\n" % str(marker))


def test_first_run_child_never_imports_from_the_callers_directory(tmp_path, monkeypatch):
    """A planted json.py in the caller's directory, an empty PYTHONPATH entry (`:$PYTHONPATH` unset)."""
    from cudafix.verify import firstrun

    marker = tmp_path / "ran"
    cwd = tmp_path / "project"
    _plant_json(cwd, marker)
    monkeypatch.chdir(str(cwd))
    env = dict(os.environ, PYTHONPATH=":" + str(REPO))
    try:
        firstrun.run_child(sys.executable, ["--load-only", "--device", "cpu"], env, 120)
    except firstrun.FirstRunError:
        pass  # no torch in this interpreter: what matters is what it imported
    assert not marker.exists(), "the first-run child imported json.py from the caller's directory"


def test_nccl_child_never_imports_from_the_callers_directory(tmp_path, monkeypatch):
    from cudafix.verify import nccl

    marker = tmp_path / "ran"
    cwd = tmp_path / "project"
    _plant_json(cwd, marker)
    monkeypatch.chdir(str(cwd))
    monkeypatch.setenv("PYTHONPATH", ":" + str(REPO))
    try:
        nccl.run_ranks(sys.executable, 1, 60)
    except nccl.NcclError:
        pass
    assert not marker.exists(), "the NCCL child imported json.py from the caller's directory"


def _nvcc(path: pathlib.Path, body: str) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_nvcc_of_another_user_is_never_run(tmp_path, other):
    """`$CUDA_HOME/bin/nvcc` of another user: 89c72a4 ran it (as root here) from status,
    activation and `import torch`'s cold path."""
    from cudafix.probes.pyenv import toolkits

    os.chmod(str(tmp_path), 0o755)
    marker = tmp_path / "ran"
    nvcc = _nvcc(tmp_path / "cuda" / "bin" / "nvcc", "touch %s\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n" % marker)
    os.chown(str(nvcc), other.pw_uid, other.pw_gid)
    ver, why = toolkits.run_nvcc_version(str(nvcc), timeout=10)
    assert not marker.exists(), "another user's nvcc ran"
    assert ver is None and "not run" in why, why
    os.chown(str(nvcc), 0, 0)  # the control: root's nvcc runs
    ver, why = toolkits.run_nvcc_version(str(nvcc), timeout=10)
    assert ver == "12.4.131" and marker.exists(), why


def test_hanging_nvcc_costs_its_timeout_and_no_more(tmp_path):
    """An nvcc whose child holds the pipe: 89c72a4 waited for the child after the timeout (here 30 s)."""
    from cudafix.probes.pyenv import toolkits

    pidfile = tmp_path / "pid"
    nvcc = _nvcc(tmp_path / "cuda" / "bin" / "nvcc", "sleep 30 &\necho $! > %s\nwait\n" % pidfile)
    t0 = time.monotonic()
    ver, why = toolkits.run_nvcc_version(str(nvcc), timeout=2)
    took = time.monotonic() - t0
    assert ver is None and "timed out" in why, why
    assert took < 6, "%.1f s for a 2 s timeout" % took
    assert _wait_dead(int(pidfile.read_text()), 5), "nvcc's child left running"


# -- fleet --from - ------------------------------------------------------------------------------------


def _fleet(args, stdin, limit_as=None, timeout=300):
    pre = None
    if limit_as:
        def pre():  # noqa: E306
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    return subprocess.run([sys.executable, "-m", "cudafix", "fleet"] + args, stdin=stdin, capture_output=True,
                          timeout=timeout, cwd=str(REPO), preexec_fn=pre,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_fleet_stdin_is_streamed_with_the_file_limit(tmp_path):
    """2 GiB on stdin under a 1 GiB address-space limit: 89c72a4 read it whole (MemoryError, exit 1)."""
    gen = subprocess.Popen(["head", "-c", str(2 << 30), "/dev/zero"], stdout=subprocess.PIPE)
    try:
        p = _fleet(["--from", "-"], gen.stdout, limit_as=1 << 30)
    finally:
        gen.kill()
        gen.wait()
    err = p.stderr.decode(errors="replace")
    assert "MemoryError" not in err, err[-400:]
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1, err[-400:]
    assert "larger than 64 MiB" in err, err


def test_fleet_file_takes_a_multi_node_stream_over_64_mib_as_stdin_does(tmp_path):
    """Low: `--from FILE` refused a multi-node stream over 64 MiB that stdin accepted."""
    from cudafix.fleet import inputs
    from tests import fleet_gen

    doc = json.dumps(fleet_gen.base())
    n = (65 << 20) // len(doc) + 1
    f = tmp_path / "nodes.json"
    with open(str(f), "w") as fh:
        for _ in range(n):
            fh.write(doc + "\n")
    assert f.stat().st_size > 64 << 20
    got = 0
    for item in inputs.iter_path(str(f)):
        assert isinstance(item, inputs.Document), item
        got += 1
    assert got == n
