"""cudafix.probes.ahead: a snapshot's sections (cudafix/probes/sections.py) in child processes.

The truth every test here compares with is the serial path: the same snapshot taken with no
child (CUDAFIX_SERIAL=1 for the CLI, ``started=None`` for take_snapshot, ``workers=1`` for the
scan), in the same real env a moment apart.  The envs are real: the torchvision-cu test venv
(torchvision 0.29.1 over torch 2.14.1+cu130: torchvision's CUDA extension modules are what the
extension scan reports), and a tree laid out under CUDAFIX_ROOT whose /proc/driver/nvidia/gpus
holds the H200's recorded ``information`` file, so that the GPU probe has a GPU to report
(tests/fixtures/probe/h200_gpu_information.txt, recorded on the device machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, REPO, _venv_python, require
from tests.test_startup_versions import INTERPRETERS

INFORMATION = (FIXTURES / "probe" / "h200_gpu_information.txt").read_text()
BUS = INFORMATION.split("Bus Location:")[1].split()[0]  # the recorded GPU's own bus id


@pytest.fixture(scope="module")
def tv_python():
    return _venv_python("torchvision-cu")


def _tree(tmp_path):
    root = tmp_path / "root"
    d = root / "proc" / "driver" / "nvidia" / "gpus" / BUS
    d.mkdir(parents=True)
    (d / "information").write_text(INFORMATION)
    return root


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDAFIX_")}
    env.update(PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(tmp_path / "cache"), CUDAFIX_DISABLE="1")
    env.update(extra)
    return env


def _doc(text):
    doc = json.loads(text)
    doc["snapshot"].pop("created", None)
    doc["snapshot"]["env"].pop("CUDAFIX_SERIAL", None)  # the one difference the serial run makes
    return doc


# The CLI's own path with every section forked wherever it would not pay as well (the tree's GPU
# has no NVML to ask; the test venv's scan is small); with "killed", every child is killed before
# it can answer (each child waits first), so the parent runs every section itself.  The file
# named by $ANSWER_FILE gets the children that answered.
CLI_ALWAYS = r"""
import functools, json, os, signal, sys, time
from cudafix.probes import ahead
start = functools.partial(ahead.start, always=True)
started = []
def start_all(*a, **k):
    st = start(*a, **k)
    started.append(st)
    if sys.argv[1] == "killed":  # every child the CLI forked: each section is run in the parent
        for child in st.children.values():
            os.kill(child.pid, signal.SIGKILL)
    return st
ahead.start = start_all
if sys.argv[1] == "killed":
    os.register_at_fork(after_in_child=lambda: time.sleep(60))
from cudafix.cli import fast
try:
    rc = fast.fast_main(sys.argv[2:])
finally:
    with open(os.environ["ANSWER_FILE"], "w") as fh:
        json.dump([None if st is None else sorted(n for n, c in st.children.items() if c._answer is not None and c._answer[0])
                   for st in started], fh)
sys.exit(rc)
"""
MODES = {"serial": ["-m", "cudafix"], "ahead, every section": ["-c", CLI_ALWAYS, "plain"],
         "ahead, killed": ["-c", CLI_ALWAYS, "killed"], "ahead where it pays": ["-m", "cudafix"]}


@pytest.mark.parametrize("where", ["this machine", "a tree with the H200's GPU"])
@pytest.mark.parametrize("command", ["status", "check"])
def test_cli_answer_is_the_serial_one(tv_python, tmp_path, where, command):
    extra = {"CUDAFIX_ROOT": str(_tree(tmp_path))} if where != "this machine" else {}
    runs = {}
    # each mode with its own cache, run twice: cold (every scan done) and then warm (from the caches)
    for i, (mode, how) in enumerate(MODES.items()):
        for state in ("cold", "warm"):
            env = _env(tmp_path / str(i), ANSWER_FILE=str(tmp_path / "answer.json"), **extra)
            if mode == "serial":
                env["CUDAFIX_SERIAL"] = "1"
            p = subprocess.run([str(tv_python)] + how + [command, "--json"], capture_output=True, text=True,
                               env=env, timeout=300, cwd=str(tmp_path))
            assert p.returncode in (0, 1) and not p.stderr, p.stderr
            runs[mode, state] = (p.returncode, _doc(p.stdout))
            if "-c" in how:
                answered = json.loads((tmp_path / "answer.json").read_text())
                want = [] if mode.endswith("killed") else ["extensions", "gpus", "rest", "torch_import"]
                assert answered == [want], (mode, answered)
    for mode in MODES:
        for state in ("cold", "warm"):
            assert runs[mode, state] == runs["serial", state], (mode, state)
    assert runs["serial", "warm"] != runs["serial", "cold"], "no cache in use: the warm runs compare nothing new"
    snap = runs["serial", "warm"][1]["snapshot"]
    assert snap["extensions"]["modules"], "the scan found nothing to compare"
    if extra:
        assert [g["pci_bus_id"] for g in snap["gpus"]["gpus"]] == [BUS]


# Runs in the env under test: a head start and a snapshot, then the same snapshot serially.
SCRIPT = r"""
import json, os, signal, sys
from cudafix import forks, probes
from cudafix.probes import ahead, sections
mode, cache = sys.argv[1], sys.argv[2]
if mode == "gpus-raise":
    from cudafix.probes.machine import gpus
    from cudafix.probes.pyenv import environment
    def boom(*a, **k): raise RuntimeError("no GPU probe today")
    gpus.probe_gpus = boom
    environment.probe_jit_cache = boom  # a later probe fails too: probe_errors keeps the serial order
if mode == "killed":  # each child waits, so that it dies before it can answer
    import time
    os.register_at_fork(after_in_child=lambda: time.sleep(60))
if mode == "other-torch":  # the children (forked before the env section) find no torch: inputs unlike the env section's
    from cudafix.probes.pyenv import torch_build
    real_probe_torch = torch_build.probe_torch
    torch_build.probe_torch = lambda *a, **k: [] if os.getpid() != PARENT else real_probe_torch(*a, **k)
PARENT = os.getpid()
start_env = dict(os.environ, CUDA_VISIBLE_DEVICES="1") if mode == "other-inputs" else os.environ
started = ahead.start(sections.request(env=start_env, cache_dir=cache), always=True)
jobs = dict(started.children) if started else {}
if mode == "killed":
    for child in jobs.values():
        os.kill(child.pid, signal.SIGKILL)
snap = probes.take_snapshot(cache_dir=cache, started=started)
answered = {n: (None if c._answer is None else c._answer[0]) for n, c in jobs.items()}
pending = sorted(n for n, c in jobs.items() if c.pid in forks._PENDING)  # answered, not yet exited
ahead.reap_all()  # what the process's exit does (atexit)
reaped = []
for n, c in jobs.items():
    try:
        os.waitpid(c.pid, os.WNOHANG)
    except ChildProcessError:
        reaped.append(n)
serial = probes.take_snapshot(cache_dir=cache + "-serial")  # its own cache: cold as the first was
def doc(s):
    d = json.loads(s.to_json())
    d.pop("created", None)
    return d
print(json.dumps({"started": sorted(jobs), "pending": pending, "answered": answered, "reaped": sorted(reaped), "same": doc(snap) == doc(serial),
                  "errors": list(snap.probe_errors.items()), "serial_errors": list(serial.probe_errors.items()),
                  "gpus": [g.pci_bus_id for g in snap.gpus.gpus], "visible": snap.gpus.visible,
                  "torch_import_probed": "import" in serial.torch_import.found_via}))
"""


def _script(python, tmp_path, mode, root=None, flags=()):
    extra = {"CUDAFIX_ROOT": str(root)} if root else {}
    p = subprocess.run([str(python)] + list(flags) + ["-c", SCRIPT, mode, str(tmp_path / "cache" / "env")],
                       capture_output=True, text=True, env=_env(tmp_path, **extra), timeout=300, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def test_both_children_answer_and_are_reaped(tv_python, tmp_path):
    got = _script(tv_python, tmp_path, "plain", _tree(tmp_path))
    assert got["started"] == ["extensions", "gpus", "torch_import"]
    assert got["answered"] == {"extensions": True, "gpus": True, "torch_import": True}
    assert got["reaped"] == ["extensions", "gpus", "torch_import"]
    assert got["same"] and got["gpus"] == [BUS]


def test_a_killed_child_is_probed_for_in_the_parent(tv_python, tmp_path):
    got = _script(tv_python, tmp_path, "killed", _tree(tmp_path))
    assert got["answered"] == {"extensions": None, "gpus": None, "torch_import": None}
    assert got["same"] and got["gpus"] == [BUS]


def test_an_answer_for_other_inputs_is_not_used(tv_python, tmp_path):
    # started with CUDA_VISIBLE_DEVICES=1, which the snapshot's own environment does not set
    got = _script(tv_python, tmp_path, "other-inputs", _tree(tmp_path))
    assert got["same"]
    assert got["visible"] == [0], "the child's answer (GPU 1 visible: none) was used"


def test_a_section_probed_for_other_inputs_is_probed_again(tv_python, tmp_path):
    """The import-simulation and extension children work out the env's torch for themselves; where
    it is not the one the env section found (here: none), their answers are not used."""
    got = _script(tv_python, tmp_path, "other-torch", _tree(tmp_path))
    assert got["answered"]["torch_import"] is True and got["answered"]["extensions"] is True
    assert got["same"], "an answer for another torch was used"
    assert got["torch_import_probed"], "the serial snapshot has no torch import to compare"


def test_a_probe_that_raises_in_the_child_is_recorded_as_serially(tv_python, tmp_path):
    got = _script(tv_python, tmp_path, "gpus-raise", _tree(tmp_path))
    assert got["answered"]["gpus"] is True  # the section's answer: the probe's error, guarded as serially
    assert got["errors"] == got["serial_errors"]
    assert [k for k, _ in got["errors"]] == ["gpus", "jit_cache"]
    assert dict(got["errors"])["gpus"] == "RuntimeError: no GPU probe today"


@pytest.mark.parametrize("python", INTERPRETERS, ids=os.path.basename)
def test_every_python(python, tmp_path):
    got = _script(python, tmp_path, "plain", _tree(tmp_path), flags=["-S"])
    assert got["answered"] == {"extensions": True, "gpus": True, "torch_import": True}
    assert got["same"] and got["reaped"] == ["extensions", "gpus", "torch_import"]


NOT_STARTED = r"""
import json, os, sys, threading, time
from cudafix.probes import ahead, sections
reasons = {"serial": ahead.can_fork(dict(os.environ, CUDAFIX_SERIAL="1"))}
reasons["serial off"] = ahead.can_fork(dict(os.environ, CUDAFIX_SERIAL="0"))
stop = threading.Event()
t = threading.Thread(target=stop.wait)
t.start()
reasons["thread"] = ahead.can_fork(dict(os.environ))
reasons["thread start"] = ahead.start(sections.request(), always=True) is None
stop.set()
t.join()
print(json.dumps(reasons))
"""


def test_not_started_where_unsafe_or_switched_off(tmp_path):
    p = subprocess.run([sys.executable, "-c", NOT_STARTED], capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got == {"serial": "CUDAFIX_SERIAL is set", "serial off": None, "thread": "2 threads in this process",
                   "thread start": True}


def test_bad_input_starts_nothing_and_writes_nothing(tmp_path):
    env = _env(tmp_path)
    p = subprocess.run([sys.executable, "-m", "cudafix", "status", "--only", "no-such-rule"], capture_output=True, text=True,
                       env=env, timeout=60, cwd=str(tmp_path))
    assert p.returncode == 2 and p.stderr.startswith("cudafix: error: unknown rule"), p.stderr
    assert not (tmp_path / "cache").exists()


def test_not_started_on_one_cpu(tmp_path):
    taskset = shutil.which("taskset")
    require(taskset, "taskset (util-linux) to run on one CPU")
    code = "import os, json; from cudafix.probes import ahead; print(json.dumps(ahead.can_fork(dict(os.environ))))"
    p = subprocess.run([taskset, "-c", "0", sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path),
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == "one CPU: nothing would run beside the parent"


def test_which_jobs_pay(tmp_path):
    """The documented rules (BIG_WALKS_BYTES, IMPORT_ANSWER): the scan runs ahead with no stored
    walks or big ones, the import simulation without its stored answer; NVML only where a driver is
    loaded and the probe root is the machine's own."""
    from cudafix.probes import ahead
    from cudafix.probes.pyenv.dirwalk import WALKS_FILE

    cache = tmp_path / "c"
    cache.mkdir()
    assert ahead._scan_work(None) and ahead._scan_work(str(cache))
    (cache / WALKS_FILE).write_bytes(b"x" * (ahead.BIG_WALKS_BYTES - 1))
    assert not ahead._scan_work(str(cache))
    (cache / WALKS_FILE).write_bytes(b"x" * ahead.BIG_WALKS_BYTES)
    assert ahead._scan_work(str(cache))
    # the import simulation runs ahead while its stored answer is missing (the probe's own file name)
    from cudafix.probes.loader.torchload import RESULT_CACHE

    assert ahead.IMPORT_ANSWER == RESULT_CACHE
    assert ahead._import_work(None) and ahead._import_work(str(cache))
    (cache / RESULT_CACHE).write_text("{}")
    assert not ahead._import_work(str(cache))
    root = _tree(tmp_path)  # /proc/driver/nvidia exists there, but a tree has no NVML to ask
    assert not ahead._nvml_work(str(root), use_nvml=False)
    assert ahead._nvml_work(str(root), use_nvml=True)
    assert not ahead._nvml_work(str(tmp_path / "empty"), use_nvml=True)


# Runs `cudafix status` as a child of a subreaper (PR_SET_CHILD_SUBREAPER): a descendant it left
# running or unreaped would be handed to this process when it exits, and waitpid(-1) would see it.
SUBREAPER = r"""
import ctypes, json, os, subprocess, sys
PR_SET_CHILD_SUBREAPER = 36
assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
# the GPU job's after-answer step (NVML's shutdown) made slow: its child has answered, not exited
code = "import functools, time; from cudafix.probes import ahead; from cudafix.probes.machine import nvml; ahead.start = functools.partial(ahead.start, always=True); " \
       "nvml.shutdown = lambda: time.sleep(0.5); from cudafix.cli import run; run(['status', '--json'])"
p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL)
left = []
while True:
    try:
        pid, _ = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    left.append(pid)
print(json.dumps({"rc": p.returncode, "left": left}))
"""


def test_no_child_outlives_the_command(tv_python, tmp_path):
    p = subprocess.run([str(tv_python), "-c", SUBREAPER], capture_output=True, text=True, env=_env(tmp_path), timeout=300,
                       cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"rc": 0, "left": []}


# The cold scan's examining split over processes (cudafix.probes.ahead.split_work): each
# file's facts (and owner) as one process finds them, and the work done by as many processes as
# asked (each item made to take 5 ms more: every process is free to take some before the queue
# is empty).
EXAMINE_ALL = r"""
import json, os, sys, time
from cudafix.probes import ahead
from cudafix.probes.pyenv import extensions as E
from cudafix.probes.pyenv.dirwalk import DirCache, walk
files = sorted({real for site in sys.argv[1:] for _p, real in walk(site, E.MAX_DEPTH, DirCache(None, E.is_shared_object_name))})
work = lambda share: time.sleep(0.005) or {p: (os.getpid(), E.examine(p)) for p in share}
got = ahead.split_work([(p, os.path.getsize(p)) for p in files], 4, work, E.PARALLEL_MIN_FILES)
truth = {p: E.examine(p) for p in files}
print(json.dumps({"files": len(files), "same": {p: v[1] for p, v in got.items()} == truth,
                  "processes": len({v[0] for v in got.values()}), "mine": os.getpid() in {v[0] for v in got.values()}}))
"""


def test_split_work_splits_the_cold_scan(tv_python, tmp_path):
    from tests.conftest import VENVS

    sites = [str(next((VENVS / v / "lib").glob("python3*/site-packages"))) for v in ("torchvision-cu", "torch-cu")]
    p = subprocess.run([str(tv_python), "-c", EXAMINE_ALL] + sites, capture_output=True, text=True, env=_env(tmp_path),
                       timeout=300)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["files"] >= 32  # enough for the split (extensions.PARALLEL_MIN_FILES)
    assert got == {"files": got["files"], "same": True, "processes": 4, "mine": True}


def test_cold_scan_with_workers_is_the_serial_scan(tv_python, tmp_path):
    code = ("import json, os, sys, dataclasses; from cudafix.probes.pyenv import extensions as E\n"
            "sites = sys.argv[2:]\n"
            "a = E.probe_extensions(sites, dict(os.environ), cache_dir=sys.argv[1] + '/a', workers=1)\n"
            "b = E.probe_extensions(sites, dict(os.environ), cache_dir=sys.argv[1] + '/b', workers=3)\n"
            "from cudafix.probes.pyenv.dirwalk import DIRS_FILE, WALKS_FILE\n"
            "c = [json.load(open(sys.argv[1] + d + '/' + E.CACHE_FILE)) for d in ('/a', '/b')]\n"
            "w = [[json.load(open(sys.argv[1] + d + '/' + f)) for f in (DIRS_FILE, WALKS_FILE)] for d in ('/a', '/b')]\n"
            "print(json.dumps([dataclasses.asdict(a) == dataclasses.asdict(b), c[0] == c[1] and w[0] == w[1],\n"
            "                  sum(1 for e in c[0]['entries'].values() if 'owner' in e), len(a.modules), a.files_seen]))\n")
    from tests.conftest import VENVS

    sites = [str(next((VENVS / v / "lib").glob("python3*/site-packages"))) for v in ("torchvision-cu", "torch-cu")]
    p = subprocess.run([str(tv_python), "-c", code, str(tmp_path)] + sites, capture_output=True, text=True,
                       env=_env(tmp_path), timeout=300)
    assert p.returncode == 0, p.stderr
    same, same_cache, owners, modules, seen = json.loads(p.stdout)
    assert same and modules > 0 and seen >= 32
    assert same_cache and owners == modules  # the stored entries too: facts, owners, their dependencies' stats, walks, listings


# split_work's two ways: a queue in a pipe (each process takes the next item when free), and
# fixed shares where the queue does not fit the pipe's buffer (20,000 items: 80,000 bytes of
# records, over Linux's default 64 KiB).  The same answers either way, and nothing left out.
SPLIT_BOTH = r"""
import json, os, sys, time
from cudafix.probes import ahead
n = int(sys.argv[1])
work = lambda share: time.sleep(0.002 * len(share) / max(1, n / 40)) or {str(i): (os.getpid(), i * i) for i in share}
from cudafix import forks
queued = forks._queue(list(range(n)))
if queued is not None:
    os.close(queued)
got = ahead.split_work([(i, i % 7) for i in range(n)], 3, work, 32)
print(json.dumps({"queue": queued is not None, "same": {k: v[1] for k, v in got.items()} == {str(i): i * i for i in range(n)},
                  "processes": len({v[0] for v in got.values()})}))
"""


@pytest.mark.parametrize("n, queue", [(100, True), (20000, False)])
def test_split_work_queue_and_fixed_shares(tv_python, tmp_path, n, queue):
    p = subprocess.run([str(tv_python), "-c", SPLIT_BOTH, str(n)], capture_output=True, text=True, env=_env(tmp_path),
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"queue": queue, "same": True, "processes": 3}
