"""Issue 27 (the planner half): one plan that is right on whole real envs.

Inputs: the H200 image's rich env recorded today (tests/fixtures/h200rich: torch 2.11.0+cu130,
torchvision 0.26.0, torchaudio 2.11.0, cupy-cuda13x, jax's cuda13 plugin), the yolov9 story
(tests/fixtures/yolov9 base with the REAL scans of PyPI's torchvision 0.11.1 wheel and torch
1.10 cu102 libraries, tests/fixtures/plan), and the real torch-cpu venv.  Expected answers come
from tables outside cudafix, cited where used:
- PyTorch RELEASE.md release compatibility matrix (https://github.com/pytorch/pytorch/blob/main/RELEASE.md):
  2.11 ships CUDA 12.6 / 12.8 / 13.0 wheels, pairs torchvision 0.26 and torchaudio 2.11; 2.13 ships
  CUDA 12.6 / 13.0 / 13.2; 1.10 pip wheels cu102 / cu111 / cu113 (previous-versions page, public
  install scripts pair torch==1.10.0+cu113 with torchvision==0.11.1+cu113), Python 3.6-3.9.
- pytorch/builder release/1.10 manywheel/build.sh: CUDA 11.x wheels TORCH_CUDA_ARCH_LIST
  "3.7;5.0;6.0;7.0;7.5;8.0;8.6" (sm_80 SASS); the real 1.10 cu102 libtorch_cuda.so has none (scan).
- NVIDIA: driver 530 = CUDA 12.1, 550 = CUDA 12.4 (CUDA Toolkit release notes, Table 3); minor-version
  compatibility floors CUDA 12.x >= 525, 13.x >= 580, no PTX JIT under it
  (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html); A100 = 8.0,
  RTX 4090 = 8.9, H200 = 9.0 (https://developer.nvidia.com/cuda-gpus); SASS sm_86 runs on 8.9 (same
  major, higher minor: CUDA binary compatibility).
- cupy: one wheel per CUDA major, cupy-cuda12x for CUDA 12.x (https://docs.cupy.dev/en/stable/install.html).
"""

from __future__ import annotations

import copy
import json
import os

import pytest

from cudafix import rules
from cudafix.knowledge import torch_builds as tb
from cudafix.model.findings import ERROR, INFO, WARNING
from cudafix.model.snapshot import Snapshot
from cudafix.plans import planner, simulate
from cudafix.probes.machine import assume
from cudafix.render.plan import plan_lines
from cudafix.render.report import render_check, render_status

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")


def _load(*parts) -> Snapshot:
    with open(os.path.join(FIX, *parts)) as fh:
        return Snapshot.from_dict(json.load(fh))


def h200_rich() -> Snapshot:
    return _load("h200rich", "h200-rich-snapshot.json")


def yolov9_cu102() -> Snapshot:
    """The yolov9 A100 pip env with the torch and torchvision of the story: torch 1.10.0+cu102
    (PyPI's default build) and torchvision 0.11.1 (PyPI, cu102), their device code from real scans."""
    with open(os.path.join(FIX, "yolov9", "yolov9-a100-pip-cudahome.json")) as fh:
        base = json.load(fh)
    with open(os.path.join(FIX, "plan", "yolov9-cu102-scans.json")) as fh:
        scans = json.load(fh)
    t = base["torch"][0]
    t.update(version="1.10.0+cu102", cuda="10.2", arch=scans["torch_1_10_cu102_arch"])
    t["dist"]["version"] = "1.10.0+cu102"
    tv = base["torchvision"][0]
    tv.update(version="0.11.1+cu102", cuda="10.2")
    tv["dist"]["version"] = "0.11.1"
    base["extensions"].update(modules=scans["torchvision_0_11_1_modules"], scanned=True)
    return Snapshot.from_dict(base)


def _serious(runs, ids=None):
    return [(f.rule, f.subject, f.message) for f in rules.findings(runs)
            if f.severity in (ERROR, WARNING) and (ids is None or f.rule in ids)]


def _applied(s: Snapshot, plan) -> Snapshot:
    """The snapshot with the plan's changes applied (versions from the plan's own change lines)."""
    torch_v, variant = plan.target.split()[1].split("+")
    comps = {c.name: c.after.split("+")[0] for c in plan.changes if c.name in ("torchvision", "torchaudio")}
    gone = [c.name for c in plan.changes if c.after == "(removed)"]
    moved = [c.name for c in plan.changes if c.name not in ("torch",) and c.after != "(removed)"]
    return simulate.apply_target(s, torch_v, variant, comps, gone, replaced=moved)


# -- 1a. the H200 rich env on an R550 driver ---------------------------------------------------


def test_h200_rich_env_on_r550_is_one_plan_not_blocked():
    s = assume.apply(h200_rich(), "550.54.14", [])
    runs = rules.run(s)
    plan = planner.make_plan(s, runs)
    assert not plan.blockers, plan_lines(plan)
    torch_v, variant = plan.target.split()[1].split("+")
    # smallest change: the installed release, in a CUDA 12 variant RELEASE.md lists for 2.11
    assert torch_v == "2.11.0" and variant in ("cu126", "cu128"), plan.target
    installs = [st for st in plan.steps if st.kind == planner.INSTALL]
    torch_step = installs[0].argv
    assert set(torch_step[4:7]) == {"torch==2.11.0+%s" % variant, "torchvision==0.26.0+%s" % variant,
                                    "torchaudio==2.11.0+%s" % variant}, torch_step
    assert torch_step[7:] == ("--index-url", tb.INDEX_BASE + variant)
    # cupy moves to its CUDA 12 wheel of the same release, in the same plan
    texts = [st.text for st in plan.steps]
    assert "%s -m pip uninstall -y cupy-cuda13x" % s.python.executable in texts
    assert "%s -m pip install cupy-cuda12x==14.2.0" % s.python.executable in texts
    # jax's CUDA 12 plugin of that release is not known: open, with the reason and the command
    jax = [u for u in plan.unresolved if u.startswith("jax-cuda13-plugin")]
    assert jax and "jax-cuda12-plugin==0.11.2" in jax[0] and "525" in jax[0]
    # the plan relies on minor-version compatibility and says so, with its limits
    assert "minor-version compatibility" in plan.why[0] and "PTX JIT" in plan.why[0]
    # the re-check: the env as the plan leaves it has no torch error or warning; minor compat is a note
    after = rules.run(_applied(s, plan))
    assert _serious(after, planner.TORCH_RULES) == []
    assert _serious(after, ("ext-cuda-major", "ext-arch-unsupported", "ext-ptx-jit")) == []
    mc = [f for f in rules.findings(after) if f.rule == "driver-minor-compat"]
    assert [f.severity for f in mc] == [INFO], mc


# -- 1b. the yolov9 story ------------------------------------------------------------------------


def test_yolov9_cu102_on_a100_r530_is_one_command():
    s = assume.apply(yolov9_cu102(), "530.30.02", ["NVIDIA A100-SXM4-40GB"])
    runs = rules.run(s)
    # the problem is real before: no sm_80 code in torch 1.10.0+cu102
    assert "arch-unsupported" in {f.rule for f in rules.findings(runs) if f.severity == ERROR}
    plan = planner.make_plan(s, runs)
    assert not plan.blockers and not plan.unresolved, plan_lines(plan)
    runnable = [st.argv for st in plan.steps if st.argv]
    assert runnable == [(s.python.executable, "-m", "pip", "install", "torch==1.10.0+cu113", "torchvision==0.11.1+cu113",
                         "-f", tb.INDEX_BASE + "torch_stable.html")], plan_lines(plan)
    assert not any("warm" in st.text or "--no-binary" in st.text for st in plan.steps)
    after = rules.run(_applied(s, plan))
    assert _serious(after, planner.TORCH_RULES + ("ext-cuda-major", "ext-ptx-jit", "ext-arch-unsupported")) == []


# -- 2. minor-version compatibility is a candidate ---------------------------------------------


def test_rtx4090_r550_torch_2_13_gets_its_cuda12_build(torch_cpu_python):
    from tests.test_plan_matrix import _snap

    s = assume.apply(_snap(torch_cpu_python), "550.54.14", ["NVIDIA GeForce RTX 4090"])
    plan = planner.make_plan(s)
    assert plan.target == "torch 2.13.0+cu126", plan_lines(plan)
    assert "cudaErrorCallRequiresNewerDriver" in plan.why[0] and "525" in plan.why[0]
    mc = [f for f in rules.findings(rules.run(_applied(s, plan))) if f.rule == "driver-minor-compat"]
    assert [f.severity for f in mc] == [INFO]


def test_minor_compat_warns_when_a_module_needs_the_jit():
    """torch 1.10.0+cu113 (sm_80 SASS) on an A100 with a CUDA 11.2 driver (460.27.04 >= 450.80.02):
    minor compatibility, but torchvision 0.11.1's _C.so has only compute_50 PTX for sm_80: a JIT
    minor compatibility cannot do.  With torch's own code only (no module), a note."""
    s = yolov9_cu102()
    t = s.primary_torch
    t.version, t.cuda, t.arch = "1.10.0+cu113", "11.3", []
    t.dist.version = t.version
    s = assume.apply(s, "460.27.04", ["NVIDIA A100-SXM4-40GB"])
    sev = [f.severity for f in rules.findings(rules.run(s)) if f.rule == "driver-minor-compat"]
    assert sev == [WARNING]
    bare = copy.deepcopy(s)
    bare.extensions.modules = []
    sev = [f.severity for f in rules.findings(rules.run(bare)) if f.rule == "driver-minor-compat"]
    assert sev == [INFO]


# -- 3. one plan, the one source of commands -----------------------------------------------------


def test_findings_point_to_the_plan_step_that_answers_them():
    s = assume.apply(yolov9_cu102(), "530.30.02", ["NVIDIA A100-SXM4-40GB"])
    runs = rules.run(s)
    plan = planner.make_plan(s, runs)
    text = render_status(s, runs, plan=plan)
    check = render_check(runs, snap=s, plan=plan)
    for out in (text, check):
        # the torchvision module's own rebuild/warm advice contradicts the plan: never printed
        assert "rebuild torchvision" not in out and "cudafix warm" not in out, out
        assert "\u2192 step 1: " in out  # issue 35: on the finding's one line (-v: "fix: -> plan step 1")
        assert "1. $ %s -m pip install torch==1.10.0+cu113" % s.python.executable in out
    for f in rules.findings(runs):
        if f.severity in (ERROR, WARNING) and f.rule in planner.TORCH_RULES + ("ext-ptx-jit",):
            assert plan.step_for(f.rule, f.subject) == 1, f


def test_a_healthy_plan_says_healthy():
    s = assume.apply(h200_rich(), None, [])
    plan = planner.make_plan(s)
    assert plan.nothing_to_do
    assert plan_lines(plan)[0] == "  nothing to do"  # issue 35: "healthy" is the verdict's word (cli/fix.py _answer)


@pytest.mark.parametrize("stray", ["nvidia-cuda-runtime-cu12"])
def test_a_stray_cuda_wheel_is_a_plan_step(stray):
    from cudafix.model.snapshot import PythonDist

    s = h200_rich()
    s.toolkits.nvidia_wheels.append(PythonDist(stray, "12.8.90", origin="pip"))
    runs = rules.run(s)
    assert any(f.rule == "mixed-cuda-sources" for f in rules.findings(runs))
    plan = planner.make_plan(s, runs)
    assert [st.text for st in plan.steps] == ["%s -m pip uninstall -y %s" % (s.python.executable, stray)]
    f = next(f for f in rules.findings(runs) if f.rule == "mixed-cuda-sources")
    assert plan.step_for(f.rule, f.subject) == 1
    s.toolkits.nvidia_wheels.pop()
    assert not [f for f in rules.findings(rules.run(s)) if f.rule == "mixed-cuda-sources" and f.severity != INFO]


def test_conda_doctor_gives_the_same_answer():
    from cudafix.plugins.conda import _advice_lines, render_health

    s = assume.apply(yolov9_cu102(), "530.30.02", ["NVIDIA A100-SXM4-40GB"])
    runs = rules.run(s)
    plan = planner.make_plan(s, runs)
    install = [st.text for st in plan.steps if st.kind == planner.INSTALL][0]
    doctor = render_health(runs, plan=plan) + "\n".join(_advice_lines(rules.findings(runs), plan))
    assert "\u2192 plan step 1 (cudafix fix): %s" % install in doctor
    assert "rebuild torchvision" not in doctor and "$ cudafix warm" not in doctor and "$ cudafix fix" not in doctor


def test_check_prints_the_shell_line_status_prints():
    """Recorded on the dev box: CUDA_HOME at a deleted toolkit.  `status` and `check` give the same
    `export CUDA_HOME=...` (check printed none at 51656f0)."""
    s = _load("snapshots", "real_cuda_home_missing.json")
    runs = rules.run(s)
    plan = planner.make_plan(s, runs)
    shell = [st.text for st in plan.steps if st.kind == planner.SHELL]
    assert shell and shell[0].startswith("export CUDA_HOME=")
    for out in (render_status(s, runs, plan=plan), render_check(runs, snap=s, plan=plan)):
        assert "1.   %s" % shell[0] in out
        assert "\u2192 step 1: " in out


def test_json_findings_carry_the_step_that_answers_them():
    from cudafix.render.report import status_document

    s = assume.apply(yolov9_cu102(), "530.30.02", ["NVIDIA A100-SXM4-40GB"])
    runs = rules.run(s)
    plan = planner.make_plan(s, runs)
    doc = json.loads(json.dumps(status_document(s, runs, plan=plan)))
    by_rule = {f["rule"]: f["answered_by"] for f in doc["findings"] if f["severity"] in (ERROR, WARNING)}
    # torchvision 0.11.1's PTX-only code for sm_80 is the same cause (torch's build): one finding (issue 34)
    assert by_rule["arch-unsupported"] == 1 and "ext-ptx-jit" not in by_rule
    assert doc["plan"]["steps"][0]["argv"][4] == "torch==1.10.0+cu113"


def test_a_companion_cudafix_knows_no_release_of_never_blocks_torch():
    """A package whose extension module links torch (an xformers-like add-on: synthetic module,
    the shape of the recorded torchaudio ones) has no release table in cudafix: torch's plan goes
    through, that package is listed open with the reason and what to install."""
    from cudafix.model.snapshot import ExtensionModule

    s = h200_rich()
    ta = next(m for m in s.extensions.modules if m.package == "torchaudio" and m.cudart_linkage == "shared")
    s.extensions.modules.append(ExtensionModule(
        path=ta.path.replace("torchaudio/lib/", "xformers/").rsplit("/", 1)[0] + "/_C.so", package="xformers",
        package_version="0.0.33", owner_via="RECORD of xformers-0.0.33.dist-info", location=ta.location,
        sass=list(ta.sass), ptx=list(ta.ptx), cudart="13", cudart_linkage="shared", cudart_via=ta.cudart_via, torch_linked=True))
    s = assume.apply(s, "550.54.14", [])
    plan = planner.make_plan(s)
    assert not plan.blockers and plan.target.startswith("torch 2.11.0+cu12"), plan_lines(plan)
    opens = [u for u in plan.unresolved if u.startswith("xformers 0.0.33")]
    assert opens and "torch 2.11.0" in opens[0] and "release notes" in opens[0], plan.unresolved
    assert not any(k.startswith(plan.target + ":") for k in plan.skipped)


def test_unreadable_compute_capability_is_an_open_finding_not_a_crash():
    """A recorded snapshot whose GPU's compute capability is not X.Y (here the rich H200 recording
    with '9.0' spoiled; before, `fix --from` crashed with `ValueError: not a compute capability`):
    no torch build can be judged against that GPU, so none is chosen and the findings stay open,
    naming the unreadable value."""
    d = json.loads(open(os.path.join(FIX, "h200rich", "h200-rich-snapshot.json")).read())
    for g in d["gpus"]["gpus"] if isinstance(d["gpus"], dict) else d["gpus"]:
        g["compute_capability"] = "9.0;rm"
    s = assume.apply(Snapshot.from_dict(d), "550.54.14", [])
    plan = planner.make_plan(s, rules.run(s))
    assert plan.target is None and not plan.steps
    assert any(u.startswith("driver-too-old: ") and "GPU0's compute capability '9.0;rm' cannot be read as X.Y" in u
               for u in plan.unresolved), plan.unresolved
