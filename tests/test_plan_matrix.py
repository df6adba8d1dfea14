"""The planner over a matrix of drivers x GPUs x installed sets x Python (what-if, on the REAL
venvs' snapshots): one coherent plan, minimal, with the env's own python, and the re-check
invariant — the plan's target applied to the snapshot gives no torch error or warning.

Installed sets: the real snapshots of the torch-cpu (2.13.0+cpu), torch-cu (2.14.1, cu130) and
torch-251 (2.5.1+cu124) venvs (`cudafix snapshot --python`), plus two synthetic additions built
from real wheel metadata: a torchvision 0.29.1 (METADATA of PyPI's torchvision-0.29.1
manylinux_2_28_x86_64 wheel: version.py 0.29.1+cu130, Requires-Dist torch (>=2.14.0)) beside the
CPU torch, and a torchaudio 2.5.1 pinning torch==2.5.1 beside torch 2.5.1.  Python 3.8 rows
replace the snapshot's Python version (synthetic what-if).  The expectations are checked against
the knowledge tables and the arch rules of cudafix.knowledge.arch, not against the planner.
"""

from __future__ import annotations

import copy
import itertools
import json
import os

import pytest

from cudafix import rules
from cudafix.knowledge import arch, cuda_driver, version_tuple
from cudafix.knowledge import gpus as kgpus
from cudafix.knowledge import torch_builds as tb
from cudafix.model.snapshot import PythonDist, Snapshot, TorchvisionBuild
from cudafix.plans import planner, simulate
from cudafix.plans.remedy import driver_gap
from cudafix.probes.machine import assume
from cudafix.model import cuda as cudaver
from tests.conftest import run_dev_cudafix

DRIVERS = ("418.87.01", "470.82.01", "535.104.05", "550.54.14", "570.86.10", "580.95.05")
GPUS = (("Tesla V100-SXM2-16GB",), ("NVIDIA A100",), ("NVIDIA H200",), ("NVIDIA GeForce GTX 1080",),
        ("NVIDIA GeForce RTX 5090",), ("NVIDIA A100", "NVIDIA GeForce GTX 1080"))


def _snap(python) -> Snapshot:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "LD_LIBRARY_PATH", "PYTORCH"))}
    proc = run_dev_cudafix("snapshot", "--python", str(python), env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return Snapshot.from_dict(json.loads(proc.stdout))


@pytest.fixture(scope="module")
def installed_sets(torch_cpu_python, torch_cu_python):
    from tests.conftest import _venv_python

    cpu, cu, old = _snap(torch_cpu_python), _snap(torch_cu_python), _snap(_venv_python("torch-251"))
    cpu_tv = copy.deepcopy(cpu)
    cpu_tv.torchvision = [TorchvisionBuild(
        dist=PythonDist("torchvision", "0.29.1", origin="pip", requires=["torch (>=2.14.0)"]),
        version="0.29.1+cu130", cuda="13.0", requires_torch="torch (>=2.14.0)")]
    old_audio = copy.deepcopy(old)
    old_audio.torch_pinned = [PythonDist("torchaudio", "2.5.1", origin="pip", requires=["torch==2.5.1"])]
    from tests.test_plan_whole_env import h200_rich

    return {"cpu": cpu, "cpu+tv": cpu_tv, "cu130": cu, "cu124": old, "cu124+audio": old_audio, "h200-rich": h200_rich()}


def _py38(s: Snapshot) -> Snapshot:
    s = copy.deepcopy(s)
    s.python.version = "3.8.18"
    return s


def _installed_names(s: Snapshot):
    from cudafix.knowledge.cuda_packages import normalize

    return ({"torch"} | {"torchvision" for _ in s.torchvision[:1]} | {d.name for d in s.torch_pinned}
            | {d.name for d in s.toolkits.nvidia_wheels} | {normalize(m.package or "") for m in s.extensions.modules})


# NVIDIA's minor-version compatibility floors (Table 1 of
# https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html, the 11.x
# point release from its note): a CUDA X.y build runs on a driver of the same major at or above it.
MINOR_FLOOR = {11: (450, 80, 2), 12: (525, 0, 0), 13: (580, 0, 0)}


def _fits(torch_v, variant, drv, ccs, python):
    """Independent of the planner: knowledge says this build runs on the driver, natively or under
    minor-version compatibility (same major, driver >= NVIDIA's floor), with SASS for every GPU
    (minor compatibility cannot JIT PTX; native runs never need to either: SASS is the bar)."""
    rel = tb.release(torch_v)
    if rel is None or not tb.python_supported(rel, python) or not tb.variant_exists(torch_v, variant) or variant == "cpu":
        return False
    need, have = cudaver.version_int(tb.variant_cuda(variant)), cuda_driver.cuda_for_driver(drv)
    if need > have and not (need // 1000 == have // 1000 and version_tuple(drv)[:3] >= MINOR_FLOOR.get(need // 1000, (999,))):
        return False
    sass, _ = tb.wheel_arch_list(torch_v, variant)
    return all(arch.fit(sass, [], cc).kind == "sass" for cc in ccs)


def _check(snap: Snapshot, drv, gpu_names):
    s = assume.apply(snap, drv, list(gpu_names))
    runs = rules.run(s)
    plan = planner.make_plan(s, runs)
    ccs = [kgpus.compute_capability(n) for n in gpu_names]
    torch_problems = [f for f in rules.findings(runs) if f.rule in planner.TORCH_RULES and f.severity in ("error", "warning")]
    texts = [st.text for st in plan.steps]
    assert len(texts) == len(set(texts)), texts  # every line once
    assert not any(t.startswith("set ") for t in texts)
    if not torch_problems:
        assert plan.target is None and not [st for st in plan.steps if st.kind == planner.INSTALL]
        return "clean"
    installs = [st for st in plan.steps if st.kind == planner.INSTALL]
    if plan.target is None:
        assert not installs and plan.blockers, plan
        # blocked only where no official build fits (knowledge), i.e. never where one exists
        assert "driver" in plan.blockers[0], plan.blockers
        # a GPU newer than the driver (H200 on R470: sm_90 first in CUDA 11.8) runs no build at all
        for rel in tb.RELEASES if not driver_gap(cuda_driver.cuda_for_driver(drv), ccs) else ():
            for var in rel.variants:
                assert not _fits(rel.latest, var, drv, ccs, s.python.version), ("blocked, but fits:", rel.latest, var, drv, ccs)
        return "blocked"
    # one install moves torch and its companions; a CUDA package outside torch has its own
    assert all("torch" not in a for st in installs[1:] for a in st.argv[4:]), [st.text for st in installs]
    argv = installs[0].argv
    assert argv[:4] == (s.python.executable, "-m", "pip", "install"), argv
    torch_v, variant = plan.target.split()[1].split("+")
    py = s.python.version
    assert _fits(torch_v, variant, drv, ccs, py), (plan.target, drv, ccs, py)
    assert {c.name for c in plan.changes} <= _installed_names(s)  # never adds a package (cupy-cuda13x -> 12x replaces one)
    comps = {}
    for c in plan.changes:
        if c.name in ("torchvision", "torchaudio"):
            comps[c.name] = c.after.split("+")[0]
            assert comps[c.name] == tb.companion_for(c.name, torch_v)
    if s.torchvision and "torchvision" not in comps:  # kept: must already be the paired one
        assert (s.torchvision[0].version or "").split("+")[0] == tb.torchvision_for(torch_v)
    # the re-check invariant
    comps_all = {n: tb.companion_for(n, torch_v) for n in ("torchvision",) if s.torchvision}
    comps_all.update({d.name: tb.companion_for(d.name, torch_v) for d in s.torch_pinned})
    comps_all.update({c.name: c.after.split("+")[0] for c in plan.changes if c.name == "torchaudio"})
    gone = [c.name for c in plan.changes if c.after == "(removed)"]
    moved = [c.name for c in plan.changes if c.after != "(removed)"]
    after = rules.run(simulate.apply_target(s, torch_v, variant, comps_all, gone, replaced=moved))
    had = {(f.rule, f.subject) for f in rules.findings(runs)}  # another package's own problem stays its own
    bad = [(f.rule, f.message) for f in rules.findings(after) if f.severity in ("error", "warning") and (
        f.rule in planner.TORCH_RULES or (f.rule.startswith("ext-") and (f.rule, f.subject) not in had))]
    assert bad == [], (plan.target, bad)
    # minimal: no strictly nearer release has a build that fits (knowledge) and pairs every companion
    cur = (s.primary_torch.version or "").split("+")[0]
    order = sorted(tb.RELEASES, key=lambda r: version_tuple(r.version))
    idx = {r.version: i for i, r in enumerate(order)}
    cur_i = idx["%d.%d" % version_tuple(cur)[:2]]
    dist = abs(idx["%d.%d" % version_tuple(torch_v)[:2]] - cur_i)
    for rel in order:
        if abs(idx[rel.version] - cur_i) >= dist:
            continue
        v = cur if idx[rel.version] == cur_i else rel.latest
        for var in rel.variants:
            pairs = all(tb.companion_for(n, v) for n in comps_all if n != "torchaudio" or "torchaudio" in [c.name for c in plan.changes])
            assert not (_fits(v, var, drv, ccs, py) and pairs), ("nearer build skipped", v, var, plan.target, plan.skipped)
    return "planned"


def test_matrix(installed_sets):
    seen = {"clean": 0, "blocked": 0, "planned": 0}
    for (name, snap), drv, gpus_, py38 in itertools.product(installed_sets.items(), DRIVERS, GPUS, (False, True)):
        s = _py38(snap) if py38 else snap
        seen[_check(s, drv, gpus_)] += 1
    # the matrix exercises every outcome
    assert all(seen.values()), seen


def test_named_cases_from_the_issue(installed_sets):
    def plan(name, drv, gpu, py38=False):
        s = installed_sets[name]
        s = _py38(s) if py38 else s
        return planner.make_plan(assume.apply(s, drv, [gpu]))

    # CPU 2.13.0 on an H200 + 580: the same version's cu130 build, torch only, local pin (PEP 440)
    p = plan("cpu", "580.95.05", "NVIDIA H200")
    assert p.target == "torch 2.13.0+cu130" and [c.name for c in p.changes] == ["torch"]
    assert p.steps[0].argv[4:] == ("torch==2.13.0+cu130", "--index-url", tb.index_url("cu130"))
    # ... with a mismatched torchvision: ONE command moving both, never two that undo each other
    p = plan("cpu+tv", "580.95.05", "NVIDIA H200")
    assert [st.kind for st in p.steps] == [planner.INSTALL]
    assert p.steps[0].argv[4:] == ("torch==2.13.0+cu130", "torchvision==0.28.0+cu130", "--index-url", tb.index_url("cu130"))
    # H200 + 550 (CUDA 12.4): the installed 2.14.1 in its CUDA 12 build (cu126: RELEASE.md's 2.14
    # matrix), under minor-version compatibility (sm_90 SASS: no JIT needed), saying so
    p = plan("cu130", "550.54.14", "NVIDIA H200")
    assert p.target == "torch 2.14.1+cu126", p.target
    assert "minor-version compatibility" in p.why[0] and "cudaErrorCallRequiresNewerDriver" in p.why[0]
    # RTX 4090 + 550 with torch 2.13.0: 2.13.0+cu126, not a downgrade to 2.7.1+cu118 (issue 27)
    assert plan("cpu", "550.54.14", "NVIDIA GeForce RTX 4090").target == "torch 2.13.0+cu126"
    # A100 + 470 (CUDA 11.4), Python 3.8: the nearest release for 3.8 is 2.4 (RELEASE.md: 3.8-3.12);
    # its cu118 build runs under minor-version compatibility (470 >= 450.80.02) with sm_80 SASS
    p = plan("cu130", "470.82.01", "NVIDIA A100", py38=True)
    assert p.target == "torch 2.4.1+cu118" and "minor-version compatibility" in p.why[0]
    # V100 + 418, Python 3.8: 1.8.1+cu101 is published and fits
    p = plan("cu130", "418.87.01", "Tesla V100-SXM2-16GB", py38=True)
    assert p.target == "torch 1.8.1+cu101"
    assert p.steps[0].argv[4:] == ("torch==1.8.1+cu101", "-f", tb.INDEX_BASE + "torch_stable.html")
    # torchaudio installed: it moves with torch; torch 2.12+ has no torchaudio, so never proposed then
    p = plan("cu124+audio", "580.95.05", "NVIDIA GeForce RTX 5090")
    assert "torchaudio" in [c.name for c in p.changes]
    assert version_tuple(p.target.split()[1]) <= (2, 11, 1)
    # GTX 1080 Ti (sm_61) + a CUDA 12.8 driver: not the cu128 build uv's --torch-backend=auto picks
    # (astral-sh/uv#14742: no sm_61 code), a build with sm_60 SASS
    p = plan("cu130", "570.86.10", "NVIDIA GeForce GTX 1080 Ti")
    variant = p.target.split("+")[1]
    assert arch.fit(tb.wheel_arch_list(p.target.split()[1].split("+")[0], variant)[0], [], "6.1") == ("sass", "sm_60")
    assert variant == "cu126"
    # an RTX 5090 on a CUDA 12.4 driver: no torch helps, the driver must be upgraded first
    p = plan("cu124", "550.54.14", "NVIDIA GeForce RTX 5090")
    assert p.target is None and driver_gap(12040, ["12.0"]) and p.blockers[0].startswith("upgrade the NVIDIA driver to >= ")


def test_knowledge_arch_rows_match_the_real_wheels(installed_sets):
    """The planner's arch lists (knowledge) against the device code really in the wheels here
    (cudafix's fatbin scan, itself checked against cuobjdump in tests/test_fatbin.py; the
    cuobjdump listing of both libraries is recorded in docs/remedies.md)."""
    for name, extra_ok in (("cu130", {"sm_89"}), ("cu124", set())):
        t = installed_sets[name].primary_torch
        main = next(a for a in t.arch if a.library.endswith("/libtorch_cuda.so"))
        variant = "cu" + t.cuda.replace(".", "")
        sass, ptx = tb.wheel_arch_list(t.version, variant)
        assert set(sass) <= set(main.sass), (t.version, sass, main.sass)
        assert ptx == main.ptx == []
        plain = {s for s in main.sass if s[-1].isdigit()}  # sm_90a / sm_103f: arch-specific, run on that GPU only
        assert plain - set(sass) <= extra_ok, (t.version, sorted(plain - set(sass)))


HOSTILE = "/opt/cu da/'\";&&$(x) `y`\\\n\u00e9"  # quote, semicolon, $(), backticks, backslash, newline, non-ASCII


@pytest.mark.parametrize("shell", ["sh", "bash", "dash", "zsh"])
def test_plan_shell_lines_run_in_the_shells_they_name(shell, tmp_path):
    """The plan's env lines (labelled sh, bash, zsh) set exactly the value, even a hostile one."""
    import shutil
    import subprocess

    from cudafix.model.fixes import PREPEND_PATH, SET, UNSET, EnvOp
    from cudafix.plans.commands import env_line

    exe = shutil.which(shell)
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("%s missing (./run test installs it)" % shell)
        pytest.skip("%s not installed" % shell)
    lines = [env_line(EnvOp(SET, "CUDA_HOME", HOSTILE)), env_line(EnvOp(UNSET, "CUDA_LAUNCH_BLOCKING")),
             env_line(EnvOp(PREPEND_PATH, "LD_LIBRARY_PATH", HOSTILE))]
    script = "\n".join(lines) + '\nprintf "%s|%s|%s" "$CUDA_HOME" "${CUDA_LAUNCH_BLOCKING-unset}" "$LD_LIBRARY_PATH"\n'
    env = {"PATH": os.environ["PATH"], "CUDA_LAUNCH_BLOCKING": "1", "LD_LIBRARY_PATH": "/a:/b"}
    out = subprocess.run([exe, "-c", script], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "%s|unset|%s:/a:/b" % (HOSTILE, HOSTILE)
    # and with the variable unset before: no stray ':' entry
    env.pop("LD_LIBRARY_PATH")
    out = subprocess.run([exe, "-c", script], capture_output=True, text=True, env=env, timeout=30)
    assert out.stdout.endswith("|" + HOSTILE)


def test_conda_owned_torch_gets_conda_commands_of_its_era():
    """A conda env whose torch is a pytorch-channel package (recorded yolov9 fixture): up to 2.5 the
    pytorch/nvidia channels; a Python only 2.6+ supports (what-if 3.13) moves it to conda-forge."""
    from tests.conftest import FIXTURES

    snap = Snapshot.load(str(FIXTURES / "yolov9" / "yolov9-h100-conda-cudahome.json"))
    old = planner.make_plan(assume.apply(snap, "580.95.05", ["NVIDIA H200"]))
    assert [s.argv for s in old.steps if s.kind == planner.INSTALL] == [(
        "conda", "install", "-p", "/opt/conda/envs/yolov9", "pytorch==2.0.1", "torchvision==0.15.2", "pytorch-cuda=11.8",
        "-c", "pytorch", "-c", "nvidia")]
    new_py = copy.deepcopy(snap)
    new_py.python.version = "3.13.1"
    plan = planner.make_plan(assume.apply(new_py, "580.95.05", ["NVIDIA H200"]))
    (step,) = [s for s in plan.steps if s.kind == planner.INSTALL]
    assert step.argv == ("conda", "install", "-p", "/opt/conda/envs/yolov9", "-c", "conda-forge", "pytorch=2.6.0=cuda*",
                         "torchvision==0.21.0", "cuda-version=12.6")
    assert "'pytorch=2.6.0=cuda*'" in step.text  # quoted: the shell must not glob it
    assert any("conda-forge" in n and "unconfirmed" in n for n in plan.notes)
