"""`cudafix fleet` through real engines started by the test, on this machine only (loopback).

- Slurm: Debian's slurmctld + three slurmd (`slurmd -N nodeN`, a port each: Debian's build
  supports several slurmd on one host) + munge.  node3 is made to differ the way sites do it: a
  TaskProlog exports NCCL_SOCKET_IFNAME=ens-absent0 into its tasks' environment.  The drain
  prolog (deploy/slurm/cudafix-prolog.sh) runs from slurm.conf's Prolog= and drains node3 once
  its site settings make `cudafix check` fail there (a what-if R470 driver + H100).
- Ray: a head and two worker raylets from the ray venv (tests/make_venvs.sh); one worker is
  started with NCCL_SOCKET_IFNAME=ens-absent0 in its environment, which its workers inherit.
- NHC: deploy/nhc/cudafix.nhc through NHC's documented check interface (its README, "Writing
  Checks"): neither Debian nor PyPI carries NHC, so a bash harness defines `die` as documented.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from tests.conftest import REPO, VENVS

CI = os.environ.get("CI") == "true"
SLURM_BINS = ("slurmctld", "slurmd", "srun", "scontrol", "munged")


def _need(cond: bool, why: str) -> None:
    if not cond:
        (pytest.fail if CI else pytest.skip)(why)


def _free_ports(n: int):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _which(name: str):
    return shutil.which(name) or next((p for p in ("/usr/sbin/" + name, "/usr/bin/" + name) if os.path.exists(p)), None)


# -- Slurm -----------------------------------------------------------------------------------

SLURM_CONF = """ClusterName=cudafixtest
SlurmctldHost=localhost
SlurmctldPort={ctld}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
TaskProlog={d}/taskprolog.sh
Prolog={d}/prolog.sh
{nodes}
PartitionName=debug Nodes=node[1-3] Default=YES MaxTime=INFINITE State=UP
"""


_WORLD = []


def _world_torch_cu() -> pathlib.Path:
    """An env with torch 2.14.1+cu130's metadata (a stub torch) that an unprivileged user can run:
    the prolog and NHC run the env's python as one since issue 36, and /root's venvs are 0700."""
    if not _WORLD:
        from tests import worldenv

        root = worldenv.world_dir("cfxengines-")
        _WORLD.append(worldenv.world_venv(root / "cu", torch="2.14.1+cu130", cuda="13.0"))
    return _WORLD[0]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [b for b in SLURM_BINS if _which(b) is None]
    _need(not missing, "Slurm/munge not installed (%s): ./run test installs slurmd slurmctld slurm-client munge" % ", ".join(missing))
    _need(os.geteuid() == 0, "a local Slurm cluster needs root (slurmd runs jobs as their user)")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    ports = _free_ports(4)
    nodes = "\n".join("NodeName=node%d NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=1 State=UNKNOWN" % (i + 1, ports[i + 1])
                      for i in range(3))
    conf = d / "slurm.conf"
    conf.write_text(SLURM_CONF.format(ctld=ports[0], d=d, nodes=nodes))
    (d / "taskprolog.sh").write_text('#!/bin/sh\n[ "$SLURMD_NODENAME" = node3 ] && echo "export NCCL_SOCKET_IFNAME=ens-absent0"\nexit 0\n')
    # the site's prolog settings (root-owned shell fragment); node3 breaks once "break-node3" exists
    (d / "prolog.env").write_text(
        "CUDAFIX_PYTHON=%s\nPYTHONPATH=%s\nHOME=%s\n"
        'if [ "$SLURMD_NODENAME" = node3 ] && [ -e %s/break-node3 ]; then\n'
        "  CUDAFIX_ASSUME_DRIVER=470.57.02\n  CUDAFIX_ASSUME_GPU='NVIDIA H100'\nfi\n"
        % (_world_torch_cu(), REPO, d, d))
    (d / "prolog.sh").write_text("#!/bin/sh\nCUDAFIX_PROLOG_ENV=%s/prolog.env exec %s\n" % (d, REPO / "deploy" / "slurm" / "cudafix-prolog.sh"))
    for f in ("taskprolog.sh", "prolog.sh"):
        os.chmod(d / f, 0o755)
    env = dict(os.environ, SLURM_CONF=str(conf))
    procs = []
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode != 0:
        os.makedirs("/run/munge", exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", _which("munged")], check=True, timeout=30)
    subprocess.run([_which("slurmctld"), "-f", str(conf)], check=True, env=env, timeout=30)
    for i in range(3):
        subprocess.run([_which("slurmd"), "-f", str(conf), "-N", "node%d" % (i + 1)], check=True, env=env, timeout=30)
    deadline = time.time() + 60
    while time.time() < deadline:
        out = subprocess.run(["sinfo", "-h", "-o", "%T %D"], capture_output=True, text=True, env=env).stdout
        if out.strip() == "idle 3":
            break
        time.sleep(1)
    else:
        pytest.fail("the local Slurm cluster did not come up: sinfo says %r; see %s" % (out, d))
    try:
        yield d, env
    finally:
        for pidfile in sorted(d.glob("*.pid")):
            try:
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        del procs


def test_slurm_fleet_names_the_node_whose_tasks_differ(slurm):
    d, env = slurm
    env = dict(env, PYTHONPATH=str(REPO))
    py = VENVS / "torch-cpu" / "bin" / "python"
    out = subprocess.run([str(py), "-m", "cudafix", "fleet", "--slurm", "--python", str(py), "--json", "--", "-N", "3"],
                         capture_output=True, text=True, env=env, timeout=300, cwd=str(d))
    assert out.returncode == 1, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert sorted(n["name"] for n in doc["nodes"]) == ["node1", "node2", "node3"]
    assert {n["engine"] for n in doc["nodes"]} == {"slurm"}
    assert doc["groups"][0]["nodes"] == ["node1", "node2"]
    [o] = doc["outliers"]
    assert o["node"] == "node3" and o["differs"] == {"env NCCL_SOCKET_IFNAME": {"node": "ens-absent0", "majority": "(unset)"}}
    # torch-cpu is a CPU build: it has no NCCL, so NCCL_SOCKET_IFNAME changes nothing there (issue 21);
    # the differing variable is still reported, as an outlier
    assert "nccl-interface-missing" not in {f["rule"] for f in doc["findings"]}


def test_slurm_fleet_never_imports_from_the_current_directory(slurm, tmp_path):
    """srun starts `python -m cudafix snapshot` on every node in srun's working directory, which
    `-m` puts first on sys.path: a cudafix/ planted there must not run (issue 21 item 1).  The
    parent is started with -P so that only the nodes' children are under test."""
    d, env = slurm
    env = dict(env, PYTHONPATH=str(REPO))
    hostile = tmp_path / "shared-project"
    (hostile / "cudafix").mkdir(parents=True)
    mark = tmp_path / "planted-code-ran"
    (hostile / "cudafix" / "__init__.py").write_text("open(%r, 'w').write('ran')\n" % str(mark))
    (hostile / "cudafix" / "__main__.py").write_text("")
    os.chmod(str(tmp_path), 0o755)
    py = VENVS / "torch-cpu" / "bin" / "python"
    out = subprocess.run([str(py), "-P", "-m", "cudafix", "fleet", "--slurm", "--python", str(py), "--json", "--", "-N", "3"],
                         capture_output=True, text=True, env=env, timeout=300, cwd=str(hostile))
    assert not mark.exists(), "a node's snapshot imported the cudafix/ of srun's working directory"
    assert sorted(n["name"] for n in json.loads(out.stdout)["nodes"]) == ["node1", "node2", "node3"], out.stderr


def test_slurm_prolog_drains_a_node_that_fails_the_check(slurm):
    d, env = slurm
    (d / "break-node3").write_text("")
    try:
        subprocess.run(["srun", "-N", "3", "--ntasks-per-node=1", "true"], capture_output=True, text=True, env=env, timeout=300, cwd=str(d))
        node3 = subprocess.run(["scontrol", "show", "node", "node3"], capture_output=True, text=True, env=env).stdout
        node1 = subprocess.run(["scontrol", "show", "node", "node1"], capture_output=True, text=True, env=env).stdout
        assert "DRAIN" in node3 and "Reason=cudafix driver-too-old: driver 470.57.02" in node3, node3
        assert "DRAIN" not in node1
    finally:
        (d / "break-node3").unlink()
        subprocess.run(["scontrol", "update", "nodename=node3", "state=resume"], env=env, timeout=30)


# -- Ray -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    ray = VENVS / "ray" / "bin" / "ray"
    _need(ray.exists(), "the ray test venv is missing: tests/make_venvs.sh builds it (CI does)")
    # Ray's session sockets live under --temp-dir, and an AF_UNIX path holds at most 107 bytes: under
    # xdist, pytest's temp paths (/tmp/pytest-of-root/pytest-N/popen-gwK/ray0/session_<date>_<pid>/
    # sockets/plasma) run over it, so the session gets a short private dir of its own.
    tmp = tempfile.mkdtemp(prefix="cfray-", dir="/tmp")
    [port] = _free_ports(1)
    env = dict(os.environ, PYTHONPATH=str(REPO), RAY_USAGE_STATS_ENABLED="0")
    common = ["--num-cpus=1", "--disable-usage-stats", "--node-ip-address=127.0.0.1"]  # loopback only
    subprocess.run([str(ray), "start", "--head", "--port=%d" % port, "--include-dashboard=false", "--temp-dir=%s" % tmp] + common,
                   check=True, env=env, capture_output=True, timeout=180)
    def join(node_env):
        # A worker joins once the head's GCS answers; on a loaded machine (the suite's other workers)
        # the first try can come too early: a few tries, then fail with what ray said.
        for attempt in range(4):
            p = subprocess.run([str(ray), "start", "--address=127.0.0.1:%d" % port] + common, env=node_env,
                               capture_output=True, text=True, timeout=180)
            if p.returncode == 0:
                return
            time.sleep(5 * (attempt + 1))
        pytest.fail("ray start --address failed 4 times: %s" % (p.stdout + p.stderr)[-2000:])

    try:
        join(env)
        join(dict(env, NCCL_SOCKET_IFNAME="ens-absent0"))
        yield "127.0.0.1:%d" % port, env
    finally:
        subprocess.run([str(ray), "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)


def test_ray_fleet_names_the_node_started_with_another_environment(ray_cluster):
    address, env = ray_cluster
    py = VENVS / "ray" / "bin" / "python"
    out = subprocess.run([str(py), "-m", "cudafix", "fleet", "--ray", address, "--json"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert len(doc["nodes"]) == 3 and {n["engine"] for n in doc["nodes"]} == {"ray"}
    assert len(doc["groups"][0]["nodes"]) == 2
    [o] = doc["outliers"]
    assert o["differs"] == {"env NCCL_SOCKET_IFNAME": {"node": "ens-absent0", "majority": "(unset)"}}
    [odd] = [n for n in doc["nodes"] if n["name"] == o["node"]]
    assert len(odd["node_id"]) == 56  # Ray's own node id, as ray.nodes() lists it


def test_ray_without_a_cluster_is_one_line_and_exit_2():
    py = VENVS / "ray" / "bin" / "python"
    _need(py.exists(), "the ray test venv is missing")
    [port] = _free_ports(1)
    out = subprocess.run([str(py), "-m", "cudafix", "fleet", "--ray", "127.0.0.1:%d" % port], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO), RAY_USAGE_STATS_ENABLED="0"), timeout=300)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("cudafix fleet: cannot connect to a Ray cluster") and out.stderr.count("\n") == 1, out.stderr


# -- NHC -------------------------------------------------------------------------------------

# NHC's documented check contract (README "Writing Checks"): a check function returns 0 when the
# node is healthy; otherwise it calls `die 1 "message"` (NHC records the message, marks the node
# and stops) and returns 1.  nhc.conf lines have the form "* || check_name args".
NHC_HARNESS = r"""
set -u
DIED=""
function die() { DIED="$2"; return "$1"; }
source "$1"
shift
check_cudafix "$@"
rc=$?
printf 'rc=%s\ndie=%s\n' "$rc" "$DIED"
"""


@pytest.mark.parametrize("what_if, want_rc, want_die", [
    ({}, "0", ""),
    ({"CUDAFIX_ASSUME_DRIVER": "470.57.02", "CUDAFIX_ASSUME_GPU": "NVIDIA H100"}, "1", "cudafix driver-too-old: driver 470.57.02"),
])
def test_nhc_check_module(tmp_path, what_if, want_rc, want_die):
    py = _world_torch_cu()
    env = dict(os.environ, PYTHONPATH=str(REPO), **what_if)
    out = subprocess.run(["bash", "-c", NHC_HARNESS, "nhc", str(REPO / "deploy" / "nhc" / "cudafix.nhc"), str(py),
                          "--skip", "nccl-debug-verbose"], capture_output=True, text=True, env=env, timeout=300)
    lines = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    assert lines.get("rc") == want_rc, out.stdout + out.stderr
    assert lines.get("die", "").startswith(want_die), out.stdout


def test_nhc_module_when_cudafix_cannot_run(tmp_path):
    out = subprocess.run(["bash", "-c", NHC_HARNESS, "nhc", str(REPO / "deploy" / "nhc" / "cudafix.nhc"), "/nonexistent/python"],
                         capture_output=True, text=True, timeout=60)
    assert "rc=1" in out.stdout and "die=cudafix check could not run (exit 127)" in out.stdout, out.stdout
