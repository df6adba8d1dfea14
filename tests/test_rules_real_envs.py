"""Rules on the REAL torch venvs (tests/make_venvs.sh), through `cudafix snapshot --python`,
with --assume-* and real environment variables.  Healthy envs must give zero errors and zero
warnings; a real env var must give exactly the finding it causes."""

from __future__ import annotations

import json
import os

from cudafix import rules
from cudafix.model.snapshot import Snapshot
from tests.conftest import run_dev_cudafix

H200 = ("--assume-driver", "580.95.05", "--assume-gpu", "NVIDIA H200")
CUDA_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "CUDA_MODULE_DATA_LOADING",
             "CUDA_CACHE_DISABLE", "CUDA_CACHE_MAXSIZE", "CUDA_CACHE_PATH", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
             "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT",
             "CUDAFIX_ASSUME_DRIVER", "CUDAFIX_ASSUME_GPU")


def snapshot(python, *args, **env_over) -> Snapshot:
    env = {k: v for k, v in os.environ.items() if k not in CUDA_VARS}
    env.update(env_over)
    proc = run_dev_cudafix("snapshot", "--python", str(python), *args, env=env)
    assert proc.returncode == 0, proc.stderr
    return Snapshot.from_dict(json.loads(proc.stdout))


def serious(snap):
    return [(f.rule, f.severity, f.message) for f in rules.findings(rules.run(snap)) if f.severity in ("error", "warning")]


def test_torch_cpu_venv_no_gpu_is_clean(torch_cpu_python):
    snap = snapshot(torch_cpu_python)
    assert snap.primary_torch.cuda is None
    assert serious(snap) == []


def test_torch_cu_venv_on_assumed_h200_is_clean(torch_cu_python):
    snap = snapshot(torch_cu_python, *H200)
    assert snap.primary_torch.cuda == "13.0"
    runs = {r.rule.id: r for r in rules.run(snap)}
    assert serious(snap) == []
    # and the rules really looked: real fatbin SASS sm_90 for the H200, driver 13.0 >= torch 13.0
    assert runs["arch-unsupported"].verdict == "ok"
    assert runs["driver-too-old"].verdict == "ok"
    assert runs["no-driver"].verdict == "ok"


def test_torch_cu_venv_without_driver_says_no_driver(torch_cu_python):
    import pathlib

    snap = snapshot(torch_cu_python)
    got = {f.rule: f for f in rules.findings(rules.run(snap))}
    # ground truth without cudafix: does the PCI bus hold an NVIDIA (0x10de) function?
    nvidia = "0x10de" in [p.read_text().strip() for p in pathlib.Path("/sys/bus/pci/devices").glob("*/vendor")]
    if nvidia:
        assert got["no-driver"].severity == "error"  # NVIDIA hardware without a driver
    else:
        # issue 12: a CPU-only machine with PyPI's CUDA torch is healthy: a note, no warning
        assert got["no-driver"].severity == "info"
        assert serious(snap) == []


def test_empty_cuda_visible_devices_hides_the_assumed_h200(torch_cu_python):
    snap = snapshot(torch_cu_python, *H200, CUDA_VISIBLE_DEVICES="")
    got = serious(snap)
    assert [g[:2] for g in got] == [("cuda-visible-devices-hides-all", "error")], got


def test_launch_blocking_and_eager_loading_on_real_env(torch_cu_python):
    snap = snapshot(torch_cu_python, *H200, CUDA_LAUNCH_BLOCKING="1", CUDA_MODULE_LOADING="EAGER")
    got = sorted(g[:2] for g in serious(snap))
    assert got == [("launch-blocking", "warning"), ("module-loading-eager", "warning")], got


def test_old_driver_assumed_for_cu130_torch(torch_cu_python):
    snap = snapshot(torch_cu_python, "--assume-driver", "535.183.01", "--assume-gpu", "NVIDIA H200")
    got = {f.rule: f for f in rules.findings(rules.run(snap))}
    f = got["driver-too-old"]
    assert f.severity == "error"
    assert "535.183.01" in f.message and "13.0" in f.message
    # the plan's build must run on driver 535 (CUDA 12.2), through the env's own pip: natively, or
    # a CUDA 12.x build under minor-version compatibility (535 >= 525, NVIDIA's compatibility
    # guide, Table 1), which the plan then says it relies on
    from cudafix.plans.planner import INSTALL, make_plan
    plan = make_plan(snap)
    install = [s for s in plan.steps if s.kind == INSTALL]
    assert len(install) == 1 and install[0].argv[:4] == (str(torch_cu_python), "-m", "pip", "install")
    variant = install[0].argv[-1].rsplit("/", 1)[1]
    assert variant.startswith("cu"), install[0].text
    assert int(variant[2:]) <= 122 or (variant.startswith("cu12") and "minor-version compatibility (driver" in plan.why[0]), install[0].text


def test_unknown_allocator_key_on_real_cu_torch(torch_cu_python):
    snap = snapshot(torch_cu_python, *H200, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True,no_such_key:1")
    got = {f.rule: f for f in rules.findings(rules.run(snap))}
    f = got["alloc-conf-invalid"]
    assert "no_such_key" in f.message
    # the option names are read from torch 2.14.1's own libc10 / libc10_cuda (docs/alloc-conf.md):
    # torch rejects the key, so it is an error repaired by dropping exactly that key
    assert snap.primary_torch.alloc_conf.parser == "tokenizer"
    assert f.severity == "error" and f.auto
    assert [(op.op, op.name, op.value) for op in f.fix.env.ops] == [("set", "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")]


def test_assumed_old_gpu_on_real_cu130_fatbin(torch_cu_python):
    # sm_61 (GTX 1080 Ti): torch 2.14.1 cu130's real fatbin has SASS from sm_75 and no PTX
    snap = snapshot(torch_cu_python, "--assume-driver", "580.95.05", "--assume-gpu", "NVIDIA GeForce GTX 1080 Ti")
    got = {f.rule: f for f in rules.findings(rules.run(snap))}
    assert got["arch-unsupported"].severity == "error"
    assert "sm_61" in got["arch-unsupported"].message
