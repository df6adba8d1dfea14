"""Issue 8: the yolov9 image, end to end, on the transcribed snapshots of tests/fixtures/yolov9/.

Expected outcomes are the issue's, written before running the rules:
- A100 / RTX 4090 (both builds): cuda-home-mismatch (CUDA_HOME or /usr/local/cuda -> 12.1 vs torch's
  11.3: a major mismatch, error) whose safe fix sets CUDA_HOME=/usr/local/cuda-11.3; nothing else at
  warning or error level (sm_89 runs the sm_86 SASS; no invented cause for the stall).
- H100 / H200 + conda build: arch-ptx-jit (compute_37 PTX JIT), how big the cache must be, the cache
  raised on activation (CUDA_CACHE_MAXSIZE), and the exact command of a torch build with native
  sm_90 for driver R530 (CUDA 12.1) and Python 3.8: torch 2.4.1 (last release for Python 3.8,
  RELEASE.md compatibility matrix) cu121 (the newest 2.4 variant <= CUDA 12.1), torchvision 0.19.1.
- H100 / H200 + pip cu113 wheel: arch-unsupported ("no kernel image is available ..."), same command.
- LD_LIBRARY_PATH=/usr/local/cuda-12.1/lib64: lib-shadowed only if it really shadows something
  torch loads -- it does not (conda: DT_RPATH wins; pip: hash-renamed bundled copies).
"""

from __future__ import annotations

import copy
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from cudafix import rules
from cudafix.model.findings import OK
from cudafix.model.snapshot import Snapshot
from tests.conftest import require

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXDIR = os.path.join(ROOT, "tests", "fixtures", "yolov9")
sys.path.insert(0, FIXDIR)

import make_snapshots  # noqa: E402

GPUS = ("a100", "rtx4090", "h100", "h200")
BUILDS = ("conda", "pip")
HOMES = ("nocudahome", "cudahome")
VARIANTS = [(g, b, h) for g in GPUS for b in BUILDS for h in HOMES]

# The one plan (cudafix.plans.planner) for Hopper + driver 530 (CUDA 12.1) + Python 3.8: the nearest
# release with sm_90 SASS that runs natively is 2.0.1 (cu118 carries sm_90; docs/remedies.md, arch lists), with the
# torchvision paired to it, through the manager that owns torch, on the env's own prefix/interpreter.
PIP_CMD = ("/opt/conda/envs/yolov9/bin/python -m pip install torch==2.0.1+cu118 torchvision==0.15.2+cu118 "
           "--index-url https://download.pytorch.org/whl/cu118")
CONDA_CMD = "conda install -p /opt/conda/envs/yolov9 pytorch==2.0.1 torchvision==0.15.2 pytorch-cuda=11.8 -c pytorch -c nvidia"
POINTER = ("cudafix fix --python /opt/conda/envs/yolov9/bin/python",)


def plan_install(snap):
    from cudafix.plans.planner import INSTALL, make_plan

    return [s.text for s in make_plan(snap).steps if s.kind == INSTALL]
CACHE_MAX = "4294967296"


def path_of(g, b, h):
    return os.path.join(FIXDIR, "yolov9-%s-%s-%s.json" % (g, b, h))


def findings_of(g, b, h):
    snap = Snapshot.load(path_of(g, b, h))
    runs = rules.run(snap)
    return snap, runs, rules.findings(runs)


def loud(found):
    return sorted({f.rule for f in found if f.severity in ("error", "warning")})


def by_rule(found, rule):
    return [f for f in found if f.rule == rule]


def env_ops(f):
    return [(op.op, op.name, op.value) for op in f.fix.env.ops] if f.fix else []


# -- the fixtures themselves ---------------------------------------------------------------------


def test_fixtures_are_the_generator_output():
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(FIXDIR, "yolov9-*.json")))
    assert files == sorted(os.path.basename(path_of(*v)) for v in VARIANTS)
    assert make_snapshots.main(["--check"]) == 0, "run tests/fixtures/yolov9/make_snapshots.py"


# TORCH_CUDA_ARCH_LIST of the two 1.10 builds, as pytorch/builder release/1.10 sets it (the primary
# fact the generator transcribes into SASS/PTX lists by hand):
#   conda/pytorch-nightly/build.sh, CUDA 11.x:  https://github.com/pytorch/builder/blob/release/1.10/conda/pytorch-nightly/build.sh
#   manywheel/build.sh, CUDA 11.x:              https://github.com/pytorch/builder/blob/release/1.10/manywheel/build.sh
BUILDER_ARCH_LIST = {"conda": "3.7+PTX;5.0;6.0;6.1;7.0;7.5;8.0;8.6", "pip": "3.7;5.0;6.0;7.0;7.5;8.0;8.6"}


@pytest.fixture(scope="module")
def torch_gencode(torch_cpu_python):
    """What torch's own parser (cpp_extension._get_cuda_arch_flags, no GPU needed) makes of each list."""
    code = ("import json, os, sys\n"
            "from torch.utils.cpp_extension import _get_cuda_arch_flags\n"
            "out = {}\n"
            "for build, arch in json.loads(sys.argv[1]).items():\n"
            "    os.environ['TORCH_CUDA_ARCH_LIST'] = arch\n"
            "    out[build] = _get_cuda_arch_flags()\n"
            "print(json.dumps(out))\n")
    p = subprocess.run([str(torch_cpu_python), "-c", code, json.dumps(BUILDER_ARCH_LIST)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    flags = json.loads(p.stdout.strip().splitlines()[-1])
    out = {}
    for build, fl in flags.items():
        codes = [f.rsplit(",code=", 1)[1] for f in fl]
        out[build] = (sorted({c for c in codes if c.startswith("sm_")}), sorted({c for c in codes if c.startswith("compute_")}))
    return out


def _by_num(archs):
    return sorted(archs, key=lambda a: int(a.split("_")[1]))


@pytest.mark.parametrize("variant", VARIANTS, ids=["-".join(v) for v in VARIANTS])
def test_fixture_says_what_it_is(variant):
    with open(path_of(*variant), encoding="utf-8") as fh:
        doc = json.load(fh)
    assert doc["source"].startswith("transcribed, not recorded:")
    for cited in ("issue 8", "pytorch/builder release/1.10", "WongKinYiu/yolov9 #129", "make_snapshots.py"):
        assert cited in doc["source"]
    assert doc["_fixture"]["kind"] == "synthetic"
    assert doc["_fixture"]["generator"] == "tests/fixtures/yolov9/make_snapshots.py"


@pytest.mark.parametrize("variant", VARIANTS, ids=["-".join(v) for v in VARIANTS])
def test_fixture_arch_lists_match_torchs_parser(variant, torch_gencode):
    """The hand-written SASS/PTX lists are what torch itself compiles for the builder's arch list."""
    g, b, h = variant
    cov = Snapshot.load(path_of(*variant)).primary_torch.arch[0]
    sass, ptx = torch_gencode[b]
    assert (_by_num(cov.sass), _by_num(cov.ptx)) == (_by_num(sass), _by_num(ptx))


@pytest.mark.parametrize("variant", VARIANTS, ids=["-".join(v) for v in VARIANTS])
def test_fixture_is_self_consistent(variant):
    """One CUDA line everywhere, read by independent parsers (packaging, the conda build string)."""
    from packaging.version import Version

    g, b, h = variant
    snap = Snapshot.load(path_of(*variant))
    t = snap.primary_torch
    cuda_tag = "cu" + t.cuda.replace(".", "")
    if b == "pip":
        assert Version(t.version).local == cuda_tag and Version(t.dist.version) == Version(t.version)
    else:
        assert Version(t.version).local is None  # conda builds carry no local version
        assert "_cuda%s_" % t.cuda in t.dist.conda_build
        # the same build string as the transcribed conda-meta record of tests/fixtures/probe/conda-yolov9
        with open(os.path.join(ROOT, "tests", "fixtures", "probe", "conda-yolov9",
                               "pytorch-%s-%s.json" % (t.version, t.dist.conda_build)), encoding="utf-8") as fh:
            rec = json.load(fh)
        assert (rec["name"], rec["version"], rec["build"]) == ("pytorch", t.version, t.dist.conda_build)
        assert "cudatoolkit >=%s,<%s" % (t.cuda, t.cuda[:-1] + str(int(t.cuda[-1]) + 1)) in rec["depends"]
    # the PTX size is an estimate, and says so; the measured H200 module it scales from is in docs/gpu-raw
    if t.arch[0].ptx:
        assert "ESTIMATE" in t.arch[0].found_via


# -- what cudafix must say, per GPU x build x CUDA_HOME -------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS, ids=["-".join(v) for v in VARIANTS])
def test_cuda_home_mismatch_fixed_to_11_3(variant):
    _snap, _runs, found = findings_of(*variant)
    (f,) = by_rule(found, "cuda-home-mismatch")
    # major mismatch 12 vs 11: extension builds fail, but these snapshots show no extension built
    # in the env (no extension scan): a warning (rules/toolkit.py severity_why)
    assert f.severity == "warning"
    assert "12.1" in f.message and "11.3" in f.message
    assert f.fix.auto and env_ops(f) == [("set", "CUDA_HOME", "/usr/local/cuda-11.3")]


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[0] in ("a100", "rtx4090")],
                         ids=lambda v: "-".join(v))
def test_ampere_ada_nothing_else_alarming(variant):
    _snap, runs, found = findings_of(*variant)
    assert loud(found) == ["cuda-home-mismatch"]
    verdicts = {r.rule.id: r.verdict for r in runs}
    for rid in ("arch-unsupported", "arch-ptx-jit", "jit-cache-too-small", "lib-shadowed"):
        assert verdicts[rid] == OK, rid
    # sm_89 runs the sm_86 SASS, sm_80 its own: no JIT, no invented cause for the stall
    assert not any("JIT" in f.message or "stall" in f.message for f in found)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[0] in ("h100", "h200") and v[1] == "conda"],
                         ids=lambda v: "-".join(v))
def test_hopper_conda_ptx_jit(variant):
    snap, _runs, found = findings_of(*variant)
    assert loud(found) == ["arch-ptx-jit", "cuda-home-mismatch"]
    (f,) = by_rule(found, "arch-ptx-jit")
    assert "compute_37" in f.message and "sm_90" in f.message
    need = snap.primary_torch.arch[0].ptx_bytes["compute_37"]
    mib = "%d MiB" % round(need / 2**20)
    assert any("cache must hold about " + mib in e for e in f.evidence), f.evidence
    assert f.fix.auto and ("set", "CUDA_CACHE_MAXSIZE", CACHE_MAX) in env_ops(f)
    assert f.fix.commands == POINTER
    assert plan_install(snap) == [CONDA_CMD]
    assert not by_rule(found, "arch-unsupported")


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[0] in ("h100", "h200") and v[1] == "pip"],
                         ids=lambda v: "-".join(v))
def test_hopper_pip_no_kernel_image(variant):
    snap, _runs, found = findings_of(*variant)
    assert loud(found) == ["arch-unsupported", "cuda-home-mismatch"]
    (f,) = by_rule(found, "arch-unsupported")
    assert f.severity == "error"
    assert "no kernel image is available for execution on the device" in f.message
    assert f.fix.commands == POINTER and not f.fix.auto
    assert plan_install(snap) == [PIP_CMD]
    assert not by_rule(found, "arch-ptx-jit")


@pytest.mark.parametrize("variant", VARIANTS, ids=["-".join(v) for v in VARIANTS])
def test_ld_library_path_shadows_nothing(variant):
    snap, runs, found = findings_of(*variant)
    assert not by_rule(found, "lib-shadowed")
    assert {r.rule.id: r.verdict for r in runs}["lib-shadowed"] == OK
    if variant[1] == "conda":
        # the same sonames DO exist in 12.1's lib64; DT_RPATH keeps torch on $CONDA_PREFIX/lib
        others = {r.soname: r.others for r in snap.libraries.resolutions}
        assert others["libcurand.so.10"] == ["/usr/local/cuda-12.1/lib64/libcurand.so.10"]
        assert others["libnvToolsExt.so.1"] == ["/usr/local/cuda-12.1/lib64/libnvToolsExt.so.1"]


def test_lib_shadowed_would_fire_if_ld_library_path_won():
    """Counterfactual (torch libs with DT_RUNPATH instead of conda's DT_RPATH): 12.1's cuRAND wins."""
    snap = Snapshot.load(path_of("a100", "conda", "nocudahome"))
    snap = copy.deepcopy(snap)
    r = next(r for r in snap.libraries.resolutions if r.soname == "libcurand.so.10")
    r.resolved, r.resolved_via, r.resolved_version = "/usr/local/cuda-12.1/lib64/libcurand.so.10.3.2.106", "LD_LIBRARY_PATH", "10.3.2.106"
    found = rules.findings(rules.run(snap, rules.select(only=["lib-shadowed"])))
    (f,) = found
    assert ("remove-path", "LD_LIBRARY_PATH", "/usr/local/cuda-12.1/lib64") in env_ops(f)


# -- activation: the real command, evaluated in a real shell ----------------------------------------

BASH = shutil.which("bash")


def _activate(variant, deactivate_too=False):
    snap = Snapshot.load(path_of(*variant))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": ROOT, "HOME": os.environ.get("HOME", "/root")}
    env.update(snap.env)
    py = sys.executable
    script = 'eval "$("%s" -m cudafix shell --shell bash --activate --from "$1")"; ' % py
    script += 'printf "CUDA_HOME=%s\\nCUDA_CACHE_MAXSIZE=%s\\nLD_LIBRARY_PATH=%s\\n" "${CUDA_HOME-<unset>}" "${CUDA_CACHE_MAXSIZE-<unset>}" "${LD_LIBRARY_PATH-<unset>}"; '
    if deactivate_too:
        script += 'eval "$("%s" -m cudafix shell --shell bash --deactivate)"; ' % py
        script += 'printf "after:CUDA_HOME=%s\\nafter:CUDA_CACHE_MAXSIZE=%s\\n" "${CUDA_HOME-<unset>}" "${CUDA_CACHE_MAXSIZE-<unset>}"; '
    p = subprocess.run([BASH, "-c", script, "bash", path_of(*variant)], env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    values = dict(line.split("=", 1) for line in p.stdout.splitlines())
    return values, p.stderr.strip()


@pytest.mark.parametrize("variant", [("a100", "pip", "cudahome"), ("rtx4090", "conda", "nocudahome"),
                                     ("h100", "conda", "nocudahome"), ("h200", "pip", "cudahome")],
                         ids=lambda v: "-".join(v))
def test_activation_applies_and_restores(variant):
    require(BASH, "bash not installed")
    values, line = _activate(variant, deactivate_too=True)
    assert values["CUDA_HOME"] == "/usr/local/cuda-11.3"
    assert values["LD_LIBRARY_PATH"] == "/usr/local/cuda-12.1/lib64"  # not shadowing: left alone
    assert line.startswith("cudafix: set ") and line.endswith("\u2014 cudafix status")
    assert "set CUDA_HOME to /usr/local/cuda-11.3 (" in line
    ptx = variant[0] in ("h100", "h200") and variant[1] == "conda"
    assert values["CUDA_CACHE_MAXSIZE"] == (CACHE_MAX if ptx else "<unset>")
    assert ("set CUDA_CACHE_MAXSIZE to " + CACHE_MAX in line) == ptx
    if variant[0] in ("h100", "h200") and variant[1] == "pip":
        # arch-unsupported has no safe fix: the user must reinstall; the line names it
        assert "; arch-unsupported: GPU0 " in line and "no kernel image is available" in line
    before_home = "/usr/local/cuda" if variant[2] == "cudahome" else "<unset>"
    assert values["after:CUDA_HOME"] == before_home
    assert values["after:CUDA_CACHE_MAXSIZE"] == "<unset>"


# -- the doc --------------------------------------------------------------------------------------


def test_doc_outputs_are_what_the_commands_print():
    from tools import doc_outputs

    stale = doc_outputs.check(["docs/yolov9.md"])
    assert not stale, "docs/yolov9.md is stale (run python -m tools.doc_outputs): %s" % stale


def test_doc_names_the_myths():
    with open(os.path.join(ROOT, "docs", "yolov9.md"), encoding="utf-8") as fh:
        text = fh.read()
    for myth in ("CUDA_MEMORY_POOL_THRESHOLD", "--no-cuda-graph", "/usr/local/cuda"):
        assert myth in text
    # the measured H200 numbers, as recorded by bench/gpu/experiments.py on the device machine
    with open(os.path.join(ROOT, "docs", "gpu-raw", "ptx-jit.json"), encoding="utf-8") as fh:
        raw = json.load(fh)
    assert "%.2f MB" % (raw["cache_default_size"]["cache_bytes"] / 1e6) in text
    assert "%d-kernel module" % raw["kernels"] in text
