"""`cudafix verify --first-run`: the CLI, the attribution of a real program's first run, the no-GPU paths.

What can run here runs for real: `-- CMD` drives a real Python program whose first run really is
slower while its caches are empty (it sleeps a known time and writes into CUDA_CACHE_PATH /
TORCHINDUCTOR_CACHE_DIR, as the JIT and inductor do), so the expected seconds are the program's
own, not cudafix's.  The built-in detector's attribution is checked on child outputs recorded on
this project's CPU machine (tests/fixtures/verify/SOURCES.md); the GPU measurements were not
recorded (no device machine was lent: docs/gpu.md says what is left).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys
import textwrap

import pytest

from cudafix.verify import attribution, cmdrun
from tests.conftest import REPO, run_dev_cudafix, run_cudafix

FIX = REPO / "tests" / "fixtures" / "verify"

PROGRAM = textwrap.dedent('''
    import os, pathlib, sys, time
    jit = pathlib.Path(os.environ["CUDA_CACHE_PATH"])
    ind = pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    count = pathlib.Path(sys.argv[1])
    n = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(n))
    if n == int(sys.argv[2]):
        print("boom: run %d failed" % n)
        sys.exit(3)
    if not (jit / "kernels.bin").exists():      # an empty JIT cache: "compile" and fill it
        time.sleep(JIT_S)
        (jit / "kernels.bin").write_bytes(b"x" * 65536)
    if not (ind / "graph.bin").exists():        # an empty inductor cache
        time.sleep(IND_S)
        (ind / "graph.bin").write_bytes(b"y")
    if os.environ.get("CUDA_MODULE_LOADING") == "EAGER":
        time.sleep(EAGER_S)
    print("done")
''')
JIT_S, IND_S, EAGER_S = 1.6, 1.0, 0.8
TOL_S = 0.4  # two cores shared by many jobs: process start varies by a few tenths of a second


def _program(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "prog.py"
    p.write_text(PROGRAM.replace("JIT_S", str(JIT_S)).replace("IND_S", str(IND_S)).replace("EAGER_S", str(EAGER_S)))
    return p


def test_command_mode_attributes_each_cost_and_runs_as_announced(tmp_path):
    prog, count = _program(tmp_path), tmp_path / "count"
    env = dict(os.environ, CUDA_MODULE_LOADING="EAGER")
    proc = run_dev_cudafix("verify", "--first-run", "--json", "--repeat", "2", "--", sys.executable, str(prog),
                           str(count), "0", env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr  # a cost set in the env (EAGER) and an empty-cache JIT: degraded
    announced = proc.stderr.splitlines()[0]
    assert "will run" in announced and " 8 times" in announced, announced
    assert count.read_text() == "8"  # exactly as many runs as announced
    rep = json.loads(proc.stdout)
    got = {c["id"]: c for c in rep["causes"]}
    assert abs(got["ptx-jit"]["seconds"] - JIT_S) < TOL_S and got["ptx-jit"]["significant"]
    assert got["ptx-jit"]["jit_cache_growth_bytes"] == 65536
    assert abs(got["inductor-cache"]["seconds"] - IND_S) < TOL_S and got["inductor-cache"]["significant"]
    assert abs(got["cuda-module-loading"]["seconds"] - EAGER_S) < TOL_S and got["cuda-module-loading"]["in_env"]
    assert abs(rep["first_run_s"] - rep["rest_s"] - (JIT_S + IND_S)) < 2 * TOL_S
    assert set(rep["env_causes"]) == {"ptx-jit", "cuda-module-loading"}


def test_command_mode_healthy_program_reports_no_cost(tmp_path):
    prog = tmp_path / "ok.py"
    prog.write_text("print('hello')\n")
    env = dict(os.environ)
    env.pop("CUDA_MODULE_LOADING", None)
    proc = run_dev_cudafix("verify", "--first-run", "--", sys.executable, str(prog), env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert " 9 times" in proc.stderr.splitlines()[0]  # 3 rounds by default (issue 38)
    # nothing written into either cache: the JIT and torch.compile are "not used", not a number
    assert "no first-run cost" in proc.stdout and "ptx-jit              not used" in proc.stdout
    assert "inductor-cache       not used" in proc.stdout


def test_command_mode_stops_on_first_failure(tmp_path):
    prog, count = _program(tmp_path), tmp_path / "count"
    proc = run_dev_cudafix("verify", "--first-run", "--", sys.executable, str(prog), str(count), "2", timeout=300)
    assert proc.returncode == 2
    assert "run 2/9 (jit-warm) exited with 3; stopped" in proc.stderr
    assert "boom: run 2 failed" in proc.stderr
    assert count.read_text() == "2"  # the third run never started
    assert proc.stdout == ""


def test_command_that_cannot_start_is_exit_2(tmp_path):
    proc = run_dev_cudafix("verify", "--first-run", "--", str(tmp_path / "no-such-program"))
    assert proc.returncode == 2 and "run 1/9 (cold) exited with 127" in proc.stderr


@pytest.mark.parametrize("args, msg", [
    (["--first-run", "--batch", "0"], "--batch must be 1..1024"),
    (["--first-run", "--imgsz", "100"], "--imgsz must be a multiple of 32"),
    (["--first-run", "--repeat", "0"], None),
    (["--first-run", "--quick"], "cannot be combined with --quick"),
    (["--first-run", "--nccl"], "cannot be combined with --nccl"),
    (["--batch", "4"], "need --first-run"),
    (["--", "true"], "only taken with --first-run"),
    (["--first-run", "--imgsz", "320", "--", "true"], "do not apply to -- CMD"),
])
def test_bad_arguments_are_one_line_exit_2(args, msg, tmp_path):
    proc = run_dev_cudafix("verify", *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    if msg:
        assert proc.stderr.count("\n") == 1 and msg in proc.stderr
    assert not (tmp_path / "x").exists()


def test_cpu_only_torch_says_what_it_could_not_check(torch_cpu_python):
    proc = run_cudafix(torch_cpu_python, "verify", "--first-run", "--json", timeout=300)
    assert proc.returncode == 3, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["verdict"] == "CPU fallback" and "2.13.0" in rep["reasons"][0]
    assert "no first-run cost could be measured on a GPU" in rep["reasons"][0]


def test_cuda_torch_without_driver_is_cpu_fallback(torch_cu_python):
    proc = run_cudafix(torch_cu_python, "verify", "--first-run", timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "torch.cuda.is_available() is False" in proc.stdout


def test_env_without_torch_is_exit_4(no_torch_python):
    proc = run_dev_cudafix("verify", "--first-run", "--python", str(no_torch_python), timeout=120)
    assert proc.returncode == 4 and "No module named 'torch'" in proc.stdout


def test_built_in_detector_runs_for_real_on_the_cpu(torch_cpu_python, monkeypatch):
    """The whole runner with real children (CPU device, torch 2.13.0+cpu): every planned case ran in
    its own process, none wrote JIT output, and nothing of the env costs: healthy."""
    from cudafix.verify import firstrun

    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    lines = []
    rep = firstrun.first_run(python=str(torch_cpu_python), batch=1, imgsz=32, iters=2, with_compile=False,
                             device="cpu", progress=lines.append)
    assert lines[0] == "cudafix verify --first-run: 5 runs of the built-in detector, each a fresh process"
    assert sorted(rep["runs"]) == ["benchmark", "benchmark-warm", "cold", "loading", "warm"]
    assert all(r[0]["torch"] == "2.13.0+cpu" and r[0]["first_iter_s"] > 0 for r in rep["runs"].values())
    assert rep["runs"]["loading"][0]["env"]["CUDA_MODULE_LOADING"] == "EAGER"
    assert rep["runs"]["benchmark"][0]["benchmark"] is True and rep["runs"]["benchmark-warm"][0]["benchmark"] is True
    # the second tuning run shares the first one's JIT cache: that is what separates tuning from JIT
    assert rep["runs"]["benchmark-warm"][0]["env"]["CUDA_CACHE_PATH"] == rep["runs"]["benchmark"][0]["env"]["CUDA_CACHE_PATH"]
    assert rep["verdict"] == attribution.HEALTHY and rep["exit_code"] == 0


def _recorded(name: str, where: pathlib.Path = FIX) -> dict:
    path = where / name
    if not path.exists():
        pytest.fail("missing recorded fixture %s" % path)
    return json.loads(path.read_text())


def test_attribution_of_recorded_cpu_runs():
    """The child outputs of a real run (CPU device, torch 2.13.0+cpu: torch.compile is a real cost there,
    JIT is not); every expected figure is recomputed here from the raw child fields."""
    rec = _recorded("cpu-first-run.json")
    runs = rec["runs"]

    def tf(r):
        return r["context_s"] + r["setup_s"] + r["first_iter_s"] + (r.get("load_s") or 0)

    rep = attribution.attribute(runs, rec["config"]["env_module_loading"] or "")
    got = {c["id"]: c for c in rep["causes"]}
    warm = min(tf(r) for r in runs["warm"])
    assert got["ptx-jit"]["seconds"] == pytest.approx(min(tf(r) for r in runs["cold"]) - warm, abs=1e-3)
    assert got["ptx-jit"]["jit_cache_growth_bytes"] == 0 and not got["ptx-jit"]["significant"]
    assert got["torch-compile"]["seconds"] == pytest.approx(min(tf(r) for r in runs["compile-fresh"]) - warm, abs=1e-3)
    assert got["torch-compile"]["significant"] and got["torch-compile"]["in_env"] is None
    assert got["torch-compile"]["kept_cache_seconds"] == pytest.approx(min(tf(r) for r in runs["compile-kept"]) - warm, abs=1e-3)
    assert got["cudnn-benchmark"]["seconds"] == pytest.approx(
        min(r["first_iter_s"] for r in runs["benchmark"]) - min(r["first_iter_s"] for r in runs["warm"]), abs=1e-3)
    # torch.compile and cudnn.benchmark are the program's choices, not the env's: the env is healthy
    assert rep["verdict"] == attribution.HEALTHY and rep["env_causes"] == []
    text = attribution.render(dict(rep, config=rec["config"]))
    assert text[0] == "cudafix verify --first-run: no first-run cost beyond context creation (%.2f s)" % rep["context_s"]


def test_eager_env_is_an_env_cause():
    """The module-loading cause is the env's when CUDA_MODULE_LOADING=EAGER is set: then the 'loading'
    variant is the LAZY run, and the cost is the reference (EAGER) minus it."""
    rec = _recorded("cpu-first-run.json")
    runs = json.loads(json.dumps(rec["runs"]))
    for r in runs["warm"]:  # a reference run that took 2.5 s more at context creation, as EAGER does on the H200
        r["context_s"] += 2.5
    rep = attribution.attribute(runs, "EAGER")
    c = {c["id"]: c for c in rep["causes"]}["module-loading-eager"]
    assert c["in_env"] and c["significant"] and c["seconds"] > 2.0
    assert rep["verdict"] == attribution.DEGRADED and "module-loading-eager" in rep["env_causes"]


def test_significance_needs_noise_margin():
    # the H200 runs: the default first iteration alone varies 0.38-0.69 s between fresh processes
    assert not attribution.significant(0.2, 0.4)
    assert attribution.significant(0.3, 0.4)
    assert not attribution.significant(1.0, 10.0)  # under 15% of a 10 s reference
    assert not attribution.significant(None, 1.0)


def test_flips_only_costly_values():
    assert cmdrun.flips({"CUDA_MODULE_LOADING": "eager", "CUDA_LAUNCH_BLOCKING": "0"}) == ["CUDA_MODULE_LOADING"]
    assert len(cmdrun.plan_runs({"CUDA_LAUNCH_BLOCKING": "1"}, 3)) == 12


@pytest.mark.gpu
def test_first_run_on_a_real_gpu():
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA GPU here")
    proc = run_dev_cudafix("verify", "--first-run", "--imgsz", "64", "--batch", "1", "--no-compile", "--json", timeout=600)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["context_s"] > 0


RAW = REPO / "docs" / "gpu-raw"  # recorded on the H200: docs/gpu.md ("verify --first-run") names each file


# (verify's recording, the direct bench's recording, cause, the direct bench's key).  Recorded on
# the H200 (driver 580.159.04, torch 2.11.0+cu130), 2026-12-01, bench/gpu/first_run.sh; the direct
# costs are bench/gpu/first_run_direct.py's (its own program and timers, fresh processes, cause
# present minus absent, min over the repeats).  docs/gpu.md ("Same-call comparison") names the calls.
H200_PAIRS = [
    # one device call (23:06), verify --repeat 3 and the direct bench's 3 repeats minutes apart
    ("first-run-640-same.json", "first-run-direct-same.json", "cudnn-benchmark", "cudnn-benchmark@640"),
    ("first-run-640-same.json", "first-run-direct-same.json", "cudnn-benchmark-jit", "cudnn-benchmark-jit@640"),
    ("first-run-640-same.json", "first-run-direct-same.json", "module-loading-eager", "module-loading-eager@640"),
    # one call (23:31): the direct program runs the child's exact workload (DIRECT_CHILD_WORKLOAD=1)
    ("first-run-320-r3-2331.json", "first-run-direct-320-child-workload.json", "cudnn-benchmark", "cudnn-benchmark@320"),
    ("first-run-320-r3-2331.json", "first-run-direct-320-child-workload.json", "cudnn-benchmark-jit",
     "cudnn-benchmark-jit@320"),
    # one call (23:23), 5 repeats each
    ("first-run-320-r5.json", "first-run-direct-320-r5.json", "module-loading-eager", "module-loading-eager@320"),
    # torch.compile and the PTX-only module: verify at 22:57, the direct bench in the previous session's call
    ("first-run-640-init.json", "first-run-direct.json", "torch-compile", "torch-compile@640"),
    ("first-run-320-ext.json", "first-run-direct.json", "ext-jit", "ext-jit"),
]


def _reattributed(name: str) -> dict:
    """verify's causes recomputed here from the recording's raw child outputs (not its own causes)."""
    rec = _recorded(name, RAW)
    return attribution.attribute(rec["runs"], rec["config"].get("env_module_loading") or "",
                                 [os.path.basename(m) for m in rec.get("modules") or ()])


@pytest.mark.parametrize("rec,direct,cause,key", H200_PAIRS, ids=["%s@%s" % (p[2], p[0]) for p in H200_PAIRS])
def test_h200_each_cause_is_within_20_percent_of_its_direct_cost(rec, direct, cause, key):
    got = {c["id"]: c for c in _reattributed(rec)["causes"]}[cause]
    want = _recorded(direct, RAW)["direct_s"][key]
    assert abs(got["seconds"] - want) <= 0.2 * want, (cause, got["seconds"], want)
    assert got["significant"]


def test_h200_kept_inductor_cache_is_within_20_percent():
    got = {c["id"]: c for c in _reattributed("first-run-640-init.json")["causes"]}["torch-compile"]
    want = _recorded("first-run-direct.json", RAW)["direct_s"]["torch-compile-kept@640"]
    assert abs(got["kept_cache_seconds"] - want) <= 0.2 * want


@pytest.mark.parametrize("rec", ["first-run-640-init.json", "first-run-640-same.json", "first-run-320-r5.json"])
def test_h200_healthy_env_says_no_cost_beyond_context(rec):
    """The image's env (nothing on PYTHONPATH: no JIT for the model, 4 KB written; lazy loading) is
    healthy whatever the program's own choices (cudnn.benchmark, torch.compile) cost."""
    rep = _reattributed(rec)
    got = {c["id"]: c for c in rep["causes"]}
    assert not got["ptx-jit"]["significant"] and rep["verdict"] == attribution.HEALTHY and rep["env_causes"] == []
    text = attribution.render(dict(rep, config=_recorded(rec, RAW)["config"]))
    assert text[0] == "cudafix verify --first-run: no first-run cost beyond context creation (%.2f s)" % rep["context_s"]


def test_h200_ptx_only_module_on_the_path_is_the_envs_cost():
    """With the PTX-only module on PYTHONPATH the env is not healthy: its JIT is an env cause (exit 1)."""
    rep = _reattributed("first-run-320-ext.json")
    assert rep["verdict"] == attribution.DEGRADED and "ext-jit" in rep["env_causes"]
    assert attribution.EXIT_CODES[rep["verdict"]] == 1 == _recorded("first-run-320-ext.json", RAW)["exit_code"]


def test_h200_command_mode_matches_the_programs_own_timer():
    """`verify --first-run -- python3 program.py` on the H200 (the PTX-only module's 300 kernels): the
    whole-command JIT cost against the first-call time the program itself printed in the same runs,
    and against the direct bench's ext-jit cost."""
    rec = _recorded("first-run-cmd.json", RAW)
    runs = {r["run"]: json.loads(r["last_line"]) for r in rec["runs"]}
    own = runs["cold"]["first_call_s"] - runs["jit-warm"]["first_call_s"]
    jit = {c["id"]: c for c in rec["causes"]}["ptx-jit"]
    assert abs(jit["seconds"] - own) <= 0.2 * own and jit["significant"] and jit["in_env"]
    direct = _recorded("first-run-direct.json", RAW)["direct_s"]["ext-jit"]
    assert abs(jit["seconds"] - direct) <= 0.2 * direct
    walls = {r["run"]: [r["wall_s"]] for r in rec["runs"]}
    again = cmdrun.attribute(walls, rec["runs"][0]["jit_cache_added_bytes"], [])
    assert {c["id"]: c["seconds"] for c in again["causes"]}["ptx-jit"] == pytest.approx(jit["seconds"], abs=1e-3)
