"""`verify --first-run -- CMD` (issue 38): repeats, interleaving, minima and measured noise, the
per-module split by warming one module at a time, and what the command uses ("not used").

Real programs in real interpreters.  Where the JIT cannot happen here (no GPU), the program pays a
known sleep for each "kernel file" missing from CUDA_CACHE_PATH and writes it, as the driver's JIT
does; the warm units stand in for cudafix warm's child (which needs a GPU) by writing the file of
their module alone into the JIT cache they are given — so every expected second is the program's
own.  What the command uses is seen in a real torch 2.13.0 (CPU) process: torch.backends.cudnn's
real flag setter, a real import of torch without torch.compile.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from cudafix.verify import attribution, cmdrun
from tests.conftest import FIXTURES, run_dev_cudafix

# the program's "kernel files": the two modules warm covers, and one it does not (cuDNN's, say)
COSTS = {"modA.bin": 1.2, "modB.bin": 0.8, "rest.bin": 1.0}
TOL_S = 0.45  # two cores shared by several jobs: process start varies by a few tenths of a second

PROGRAM = textwrap.dedent('''
    import json, os, pathlib, sys, time
    jit = pathlib.Path(os.environ["CUDA_CACHE_PATH"])
    log = pathlib.Path(sys.argv[1])
    costs = json.loads(sys.argv[2])
    missing = sorted(n for n in costs if not (jit / n).exists())
    with log.open("a") as fh:
        fh.write(json.dumps({"jit": str(jit), "missing": missing,
                             "inductor": os.environ["TORCHINDUCTOR_CACHE_DIR"]}) + "\\n")
    for n in missing:                       # an empty JIT cache: "compile" and fill it
        time.sleep(costs[n])
        (jit / n).write_bytes(b"x" * 4096)
    print("done")
''')


def _write(tmp_path: pathlib.Path, name: str, text: str) -> pathlib.Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _unit(name: str) -> cmdrun.WarmUnit:
    def warm(cache_dir: str):
        pathlib.Path(cache_dir, name).write_bytes(b"w" * 4096)
    return cmdrun.WarmUnit(name, warm)


def test_each_module_share_is_measured_and_the_rest_named(tmp_path):
    """Two units warmed one at a time, then together: cold - warm:<m> is m's share, warm-all -
    jit-warm the rest; the runs go round by round (every case once per round), as announced."""
    prog, log = _write(tmp_path, "prog.py", PROGRAM), tmp_path / "log"
    lines = []
    rep = cmdrun.run_command([sys.executable, str(prog), str(log), json.dumps(COSTS)], repeat=2, progress=lines.append,
                             env=dict(os.environ), units=[_unit("modA.bin"), _unit("modB.bin")])
    names = ["cold", "jit-warm", "inductor-kept", "warm:modA.bin", "warm:modB.bin", "warm-all"]
    assert "will run" in lines[0] and " 12 times: 2 rounds of 6 cases" in lines[0], lines[0]
    assert [r["run"] for r in rep["runs"]] == names * 2  # interleaved: round 1, then round 2
    seen = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(seen) == 12
    # what each case found in its JIT cache: cold nothing, warm:<m> only m, warm-all both modules
    assert [s["missing"] for s in seen[:6]] == [sorted(COSTS), [], [], ["modB.bin", "rest.bin"],
                                                ["modA.bin", "rest.bin"], ["rest.bin"]]
    jit = {c["id"]: c for c in rep["causes"]}["ptx-jit"]
    assert abs(jit["seconds"] - sum(COSTS.values())) < TOL_S and jit["significant"]
    parts = {p.get("module") or p["id"]: p for p in jit["parts"]}
    for m in ("modA.bin", "modB.bin"):
        assert abs(parts[m]["seconds"] - COSTS[m]) < TOL_S and parts[m]["significant"], parts[m]
    assert abs(parts["rest"]["seconds"] - COSTS["rest.bin"]) < TOL_S and parts["rest"]["significant"]
    # no torch in this program: the rest is not said to be cuDNN's
    assert not any("cuDNN" in s["what"] for s in parts["rest"]["sources"])
    text = cmdrun.render_text(rep)
    assert "modA.bin" in text and "not a module cudafix warm covers" in text


def test_cost_is_the_difference_of_minima_and_noise_is_measured():
    """A stalled run (one slow outlier) changes neither the cost nor its noise; runs that do not
    agree on their minimum make the same difference 'within noise'."""
    from cudafix.verify import cmdattr

    c = cmdattr.compare({"cold": [5.0, 9.0, 5.1], "warm": [4.0, 4.05, 7.5]}, "cold", "warm")
    assert c["seconds"] == pytest.approx(1.0) and c["noise_s"] == pytest.approx(0.1) and c["significant"]
    assert c["spread_s"] == pytest.approx(4.0)
    c = cmdattr.compare({"cold": [5.0, 5.9, 6.0], "warm": [4.5, 4.6, 4.7]}, "cold", "warm")
    assert c["seconds"] == pytest.approx(0.5) and c["noise_s"] == pytest.approx(0.9) and not c["significant"]
    assert c["status"] == cmdattr.NOISE
    # the same 0.5 s with agreeing runs is a cost: no fixed threshold decides it
    c = cmdattr.compare({"cold": [5.0, 5.02, 5.1], "warm": [4.5, 4.51, 4.6]}, "cold", "warm")
    assert c["significant"] and c["status"] == cmdattr.COST
    c = cmdattr.compare({"cold": [5.0], "warm": [4.0]}, "cold", "warm")
    assert not c["significant"] and c["status"] == cmdattr.UNKNOWN


def test_default_is_three_interleaved_rounds_with_an_estimate(tmp_path):
    prog = _write(tmp_path, "ok.py", "import os, pathlib; pathlib.Path(os.environ['CUDA_CACHE_PATH'], 'k').write_text('x')\n")
    env = dict(os.environ)
    env.pop("CUDA_MODULE_LOADING", None)
    proc = run_dev_cudafix("verify", "--first-run", "--json", "--", sys.executable, str(prog), env=env, timeout=300)
    err = proc.stderr.splitlines()
    assert "will run" in err[0] and " 9 times: 3 rounds of 3 cases" in err[0], err
    assert "[1/9] cold" in err[1] and err[2].startswith("  estimate: at most about") and "[2/9] jit-warm" in err[3]
    rep = json.loads(proc.stdout)
    assert [r["run"] for r in rep["runs"]] == ["cold", "jit-warm", "inductor-kept"] * 3
    assert rep["case_stats"]["cold"]["n"] == 3


def test_one_repeat_is_refused_for_a_command(tmp_path):
    proc = run_dev_cudafix("verify", "--first-run", "--repeat", "1", "--", sys.executable, "-c", "pass")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--repeat must be at least 2 with -- CMD" in proc.stderr


TORCH_PROG = textwrap.dedent('''
    import torch
    x = torch.nn.Conv2d(3, 8, 3)(torch.randn(1, 3, 16, 16))
    if len(__import__("sys").argv) > 1:
        torch.backends.cudnn.benchmark = True
    print(float(x.sum()) != 0.0)
''')


def test_causes_a_torch_program_cannot_have_are_not_used(tmp_path, torch_cpu_python):
    """A real torch program that never calls torch.compile nor sets cudnn.benchmark, on the CPU:
    each such cause says "not used" (no number), and so does the JIT (nothing written)."""

    prog = _write(tmp_path, "net.py", TORCH_PROG)
    env = dict(os.environ)
    env.pop("CUDA_MODULE_LOADING", None)
    proc = run_dev_cudafix("verify", "--first-run", "--json", "--repeat", "2", "--", str(torch_cpu_python), str(prog),
                           env=env, timeout=400)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    got = {c["id"]: c for c in rep["causes"]}
    for cid in ("ptx-jit", "inductor-cache", "cudnn-benchmark", "cuda-module-loading"):
        assert got[cid]["seconds"] is None and got[cid]["status"] == "not used", got[cid]
    assert rep["uses"]["torch"] and not rep["uses"]["cudnn_benchmark"]
    assert rep["verdict"] == attribution.HEALTHY


def _probe_run(where: pathlib.Path, python: str, args, extra_pythonpath: str = "") -> dict:
    """One process of the command with the probe installed as cmdrun does it; what it used."""
    from cudafix.verify import cmdprobe

    import tempfile

    where.mkdir()
    site = cmdprobe.install(tempfile.mkdtemp(dir=str(where)))
    record = str(where / "rec.jsonl")
    env = cmdprobe.child_env(dict(os.environ), site, record)
    env.pop("CUDA_MODULE_LOADING", None)
    if extra_pythonpath:
        env["PYTHONPATH"] += os.pathsep + extra_pythonpath
    proc = subprocess.run([python] + list(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return cmdprobe.summarize(cmdprobe.read(record))


def test_cudnn_benchmark_set_by_the_program_is_seen(tmp_path, torch_cpu_python):
    """torch.backends.cudnn.benchmark = True in a real torch process: the probe sees the set (the
    real flag still takes the value); the same program without the line: not set."""
    from cudafix.verify import cmdattr

    prog = _write(tmp_path, "net.py", TORCH_PROG + "assert __import__('torch').backends.cudnn.benchmark == "
                                                  "(len(__import__('sys').argv) > 1)\n")
    on = _probe_run(tmp_path / "on", str(torch_cpu_python), [str(prog), "bench"])
    off = _probe_run(tmp_path / "off", str(torch_cpu_python), [str(prog)])
    assert on["cudnn_benchmark"] and on["torch"] and not off["cudnn_benchmark"] and off["torch"]
    # set for a block only (torch.backends.cudnn.flags, which calls torch._C's setter itself)
    block = _write(tmp_path, "block.py", "import torch\nwith torch.backends.cudnn.flags(enabled=True, benchmark=True):\n"
                                         "    pass\nassert not torch.backends.cudnn.benchmark\n")
    assert _probe_run(tmp_path / "block", str(torch_cpu_python), [str(block)])["cudnn_benchmark"]
    assert cmdattr.benchmark_cause(on)["status"] == cmdattr.USED
    assert cmdattr.benchmark_cause(off)["status"] == cmdattr.NOT_USED
    # the rest of a JIT cost is named for it when the program sets it
    srcs = cmdattr.remainder_sources(on, [])
    assert srcs[0]["what"].startswith("cuDNN's tuning kernels") and "CUDA_CACHE_PATH" in srcs[0]["fix"]


def test_module_loading_set_by_the_program_and_the_envs_sitecustomize_still_runs(tmp_path):
    from cudafix.verify import cmdattr

    other = tmp_path / "envsite"
    other.mkdir()
    mark = tmp_path / "mark"
    (other / "sitecustomize.py").write_text("open(%r, 'w').write('ran')\n" % str(mark))
    code = "import os; os.environ['CUDA_MODULE_LOADING'] = 'EAGER'"
    got = _probe_run(tmp_path / "p", sys.executable, ["-c", code], extra_pythonpath=str(other))
    assert mark.read_text() == "ran"  # the env's own sitecustomize, shadowed by the probe's, still ran
    assert got["python"] and got["module_loading_set_by_program"]
    assert cmdattr.loading_cause({}, {}, got, "x", "fix")["status"] == cmdattr.USED
    assert cmdattr.loading_cause({}, {}, {"python": False}, "x", "fix")["status"] == cmdattr.UNKNOWN


def test_units_are_cudafix_warms_own_targets():
    """The recorded H200 snapshot (tests/fixtures/snapshots/h200_ext_ptx_jit.json): of its modules
    only the test extension cfx_ptx75 lacks sm_90 SASS (sm_75 + compute_75 PTX); the others (torchvision,
    torchaudio, jax, nvjpeg) carry sm_90 SASS.  It is the check's one unit, torch none (sm_90 SASS)."""
    from cudafix.cli.verify import units_from
    from cudafix.model.snapshot import Snapshot

    snap = Snapshot.load(str(FIXTURES / "snapshots" / "h200_ext_ptx_jit.json"))
    units, unwarmable = units_from(snap)
    label = "cfx_ptx75.cpython-312-x86_64-linux-gnu.so"
    assert [u.label for u in units] == [label] and unwarmable == []
    assert cmdrun.case_names({}, [u.label for u in units]) == ["cold", "jit-warm", "inductor-kept", "warm:" + label]


def test_a_warm_child_that_fails_stops_the_check_naming_the_module(tmp_path):
    """The real path from `cudafix warm`'s targets to its child: a PTX-only module (compute_75, shared
    libcudart, built by nvcc) on an H200 of a snapshot; here the child really runs, dlopens the module
    and calls cudaFree(0), which fails without a GPU: the check stops at that case with exit 2 naming
    the module and warm's error, not a share measured on an unwarmed cache."""
    from tests import extbuild
    from tests.conftest import require

    from cudafix.cli.verify import units_from
    from cudafix.model.snapshot import GPU, ExtensionModule, Snapshot

    require(extbuild.nvcc_path() is not None, "nvcc (/usr/local/cuda-13.0)")
    lib = extbuild.build_kernels("cfx_ptx75", ["-gencode=arch=compute_75,code=compute_75"], cudart="shared")
    snap = Snapshot()
    snap.gpus.gpus = [GPU(index=0, name="NVIDIA H200", compute_capability="9.0", uuid="GPU-x")]
    snap.python.executable = sys.executable
    snap.extensions.scanned = True
    snap.extensions.modules = [ExtensionModule(path=lib, ptx=["compute_75"], ptx_bytes={"compute_75": 1000},
                                               cudart="13", cudart_linkage="shared")]
    units, _ = units_from(snap)
    assert [u.label for u in units] == ["libcfx_ptx75.so"]
    prog = _write(tmp_path, "p.py", "print('ok')\n")
    with pytest.raises(cmdrun.CommandFailed) as exc:
        cmdrun.run_command([sys.executable, str(prog)], repeat=2, env=dict(os.environ), units=units)
    e = exc.value
    assert (e.index, e.total, e.rc) == (4, 8, 2) and e.label == "cudafix warm's child for libcfx_ptx75.so"
    assert e.tail[0].startswith("cudaFree(0) through libcudart.so.13 returned ")  # a CUDA error code, no GPU here
