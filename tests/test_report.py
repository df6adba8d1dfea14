"""Rendering (cudafix.render.report) on Snapshots and rule runs built here: every section, unknowns,
findings with evidence and fixes, colour on/off, the JSON document, and `explain`."""

from __future__ import annotations

import json
import os
import re

from cudafix import rules
from cudafix.plans.planner import make_plan
from cudafix.render import report
from cudafix.cli.report import write_atomic
from cudafix.model.findings import OK, PROBLEM, UNKNOWN, Outcome, Rule
from cudafix.model.fixes import EnvOp, EnvPatch, Fix, Preload
from cudafix.model.snapshot import (
    GPU,
    ArchCoverage,
    DriverInfo,
    GPUInfo,
    JitCache,
    LibraryInfo,
    LibraryResolution,
    PythonDist,
    PythonInfo,
    Snapshot,
    TorchBuild,
    Toolkit,
    ToolkitInfo,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SITE = "/opt/env/lib/python3.8/site-packages"
OWN_JITLINK = SITE + "/nvidia/nvjitlink/lib/libnvJitLink.so.12"
SYS_JITLINK = "/usr/local/cuda-12.1/lib64/libnvJitLink.so.12.1.105"


def _with_plan(snap, runs, **kw):
    """render_status as `cudafix status` calls it: with the plan the CLI made (cudafix/cli/report.py)."""
    return report.render_status(snap, runs, plan=make_plan(snap, runs), **kw)


def healthy_h200() -> Snapshot:
    """A GPU machine: H200 + driver 580 + torch cu124 with one shadowed library."""
    return Snapshot(
        created="2026-11-30T10:00:00Z",
        source="probed",
        python=PythonInfo(executable="/opt/env/bin/python", version="3.8.18", prefix="/opt/env"),
        driver=DriverInfo(
            kernel_version="580.159.04",
            libcuda_path="/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
            libcuda_version="580.159.04",
            cuda_version=13000,
            found_via={"kernel_version": "/sys/module/nvidia/version", "cuda_version": "cuDriverGetVersion"},
        ),
        gpus=GPUInfo(
            gpus=[
                GPU(index=0, name="NVIDIA H200", compute_capability="9.0", memory_mib=143771,
                    uuid="GPU-8f6284fb-6446-e1dc-1efd-0d08141350d4", mig_mode=False, found_via="NVML"),
                GPU(index=1, name="NVIDIA GeForce GTX 1080 Ti", compute_capability="6.1", found_via="NVML"),
            ],
            visible=[1],
        ),
        torch=[
            TorchBuild(
                dist=PythonDist(name="torch", version="2.6.0+cu124", location=SITE, origin="pip"),
                package_dir=SITE + "/torch", version="2.6.0+cu124", cuda="12.4",
                arch=[ArchCoverage(library=SITE + "/torch/lib/libtorch_cuda.so",
                                   sass=["sm_50", "sm_80", "sm_90"], ptx=["compute_90"])],
            )
        ],
        toolkits=ToolkitInfo(
            toolkits=[Toolkit(path="/usr/local/cuda-12.1", version="12.1.105",
                              nvcc="/usr/local/cuda-12.1/bin/nvcc", sources=["CUDA_HOME", "/usr/local/cuda*"])],
            cuda_home="/usr/local/cuda-12.1", cuda_home_via="CUDA_HOME",
            nvidia_wheels=[PythonDist(name="nvidia-nvjitlink-cu12", version="12.4.127")],
        ),
        libraries=LibraryInfo(
            resolutions=[
                LibraryResolution(soname="libnvJitLink.so.12", requested_by=SITE + "/nvidia/cusparse/lib/libcusparse.so.12",
                                  resolved=SYS_JITLINK, resolved_via="LD_LIBRARY_PATH", resolved_version="12.1.105",
                                  expected=OWN_JITLINK, expected_version="12.4.127"),
                LibraryResolution(soname="libcudart.so.12", requested_by=SITE + "/torch/lib/libtorch_cuda.so",
                                  resolved=SITE + "/nvidia/cuda_runtime/lib/libcudart.so.12", resolved_via="DT_RPATH",
                                  expected=SITE + "/nvidia/cuda_runtime/lib/libcudart.so.12"),
            ],
            ld_library_path=["/usr/local/cuda-12.1/lib64"],
        ),
        jit_cache=JitCache(path="/root/.nv/ComputeCache", maxsize=256 << 20, maxsize_via="driver default", writable=True),
        env={"LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib64", "CUDA_VISIBLE_DEVICES": ""},
    )


def no_driver() -> Snapshot:
    """This machine's kind of state: no driver, NVML missing, CPU torch."""
    return Snapshot(
        python=PythonInfo(executable="/venv/bin/python", version="3.11.7"),
        driver=DriverInfo(unknown={"kernel_version": "no NVIDIA kernel module: /sys/module/nvidia/version absent",
                                   "cuda_version": "libcuda.so.1 not found by the loader"}),
        gpus=GPUInfo(unknown={"gpus": "NVML not available: libnvidia-ml.so.1: cannot open shared object file"}),
        torch=[TorchBuild(dist=PythonDist(name="torch", version="2.13.0", origin="pip"), version="2.13.0+cpu")],
    )


SHADOW_FIX = Fix(
    summary="drop /usr/local/cuda-12.1/lib64 from LD_LIBRARY_PATH and preload torch's own libnvJitLink",
    auto=True,
    applies_in="both",
    env=EnvPatch((EnvOp("remove-path", "LD_LIBRARY_PATH", "/usr/local/cuda-12.1/lib64"),)),
    preload=(Preload("libnvJitLink.so.12", OWN_JITLINK),),
)
DRIVER_FIX = Fix(summary="install a torch build for CUDA 12.8 or older",
                 commands=("pip install torch==2.6.0 --index-url https://example.invalid/whl/cu126",))


def _rule(rid, severity, outcomes, **kw):
    return Rule(id=rid, severity=severity, title="title of " + rid, check=lambda snap: outcomes, **kw)


def sample_runs():
    shadow = _rule("lib-shadowed", "error", [Outcome(
        PROBLEM, "libnvJitLink.so.12 resolves to 12.1.105, torch needs 12.4.127",
        evidence=("LD_LIBRARY_PATH is searched before libcusparse's DT_RUNPATH",
                  "%s is 12.1.105; torch's own %s is 12.4.127" % (SYS_JITLINK, OWN_JITLINK)),
        fix=SHADOW_FIX, subject="libnvJitLink.so.12")])
    warn = _rule("launch-blocking", "warning", [Outcome(PROBLEM, "CUDA_LAUNCH_BLOCKING=1 serialises every kernel",
                                                        fix=Fix(summary="unset it", env=EnvPatch((EnvOp("unset", "CUDA_LAUNCH_BLOCKING"),))))])
    unk = _rule("arch-unsupported", "error", [Outcome(UNKNOWN, "no GPU list: NVML not available")])
    fine = _rule("driver-too-old", "error", [Outcome(OK, "driver 580 runs CUDA 13.0")])

    def boom(snap):
        raise KeyError("gpus")

    crash = Rule(id="device-order", severity="warning", title="t", check=boom)
    return rules.run(healthy_h200(), (shadow, warn, unk, fine, crash))


def test_sections_in_order_and_facts_shown():
    text = _with_plan(healthy_h200(), sample_runs())
    heads = [ln for ln in text.splitlines() if ln and not ln.startswith(" ")]
    titles = [h.split(":")[0] for h in heads[1:]]
    # issue 35: the verdict (line 1), the findings and the plan first; the facts after them
    assert heads[0].startswith("2 problems \u2014 the first: lib-shadowed")
    assert titles[:2] == ["Findings", "Plan (cudafix fix)"]
    assert titles[3:] == ["Driver", "GPUs", "PyTorch", "Toolkits", "Libraries", "Environment"]
    assert titles[2].startswith("cudafix ")  # the header of the facts: which interpreter, which snapshot
    assert "580.159.04" in text and "13.0" in text  # kernel module, driver CUDA from 13000
    assert "NVIDIA H200  sm_90  143771 MiB" in text
    # visible=[1]: the GTX is cuda:0, the H200 is hidden
    h200 = next(ln for ln in text.splitlines() if "NVIDIA H200" in ln)
    gtx = next(ln for ln in text.splitlines() if "GTX 1080 Ti" in ln)
    assert "hidden" in h200 and "-> cuda:0" in gtx
    assert "torch 2.6.0+cu124  CUDA 12.4  pip" in text
    assert "libtorch_cuda.so: SASS sm_50 sm_80 sm_90; PTX compute_90" in text
    assert "use /usr/local/cuda-12.1" in text and "(CUDA_HOME)" in text
    assert "nvidia-nvjitlink-cu12 12.4.127" in text
    assert "CUDA_VISIBLE_DEVICES=''" in text  # empty, not unset: it must stay visible
    # issue 35: the hedge on the default size is the same on every machine: -v only
    assert "max: driver default (-v: its size)" in text
    assert "max: driver default, size unknown: 1 GiB per NVIDIA's current docs (desktop/server), 256 MiB per older ones" in \
        " ".join(report.render_status(healthy_h200(), [], verbose=True).split())
    assert "maxsize default" not in text  # issue 16: no 'unknown' line on every machine for it


def test_libraries_show_only_odd_ones_unless_verbose():
    snap = healthy_h200()
    text = report.render_status(snap, [])
    assert "libnvJitLink.so.12 -> %s 12.1.105  (LD_LIBRARY_PATH)" % SYS_JITLINK in text
    assert "torch's own copy: %s 12.4.127" % OWN_JITLINK in text
    assert "libcudart.so.12 ->" not in text
    assert "1 of 2 sonames resolve to torch's own copies (-v lists them)" in text
    verbose = report.render_status(snap, [], verbose=True)
    assert "libcudart.so.12 -> %s/nvidia/cuda_runtime/lib/libcudart.so.12" % SITE in verbose


def test_findings_one_line_each_on_the_first_screen():
    snap, runs = healthy_h200(), sample_runs()
    text = _with_plan(snap, runs)
    lines = text.splitlines()
    assert lines[0].startswith("2 problems \u2014 the first: lib-shadowed: libnvJitLink.so.12 resolves to 12.1.105")
    i = lines.index("Findings: 1 error, 1 warning, 0 notes, 2 unknown (5 rules checked, 1 ok)")
    rows = [r for r in lines[i + 1:lines.index("", i)] if not r.startswith("  more:")]
    assert [r.split()[:2] for r in rows] == [["error", "lib-shadowed"], ["warning", "launch-blocking"],
                                            ["unknown", "arch-unsupported:"], ["unknown", "device-order:"]]
    assert "[auto-fix]" in rows[0] and "\u2192 step 1" in rows[1]
    assert "- LD_LIBRARY_PATH is searched" not in text  # the evidence: under -v


def test_findings_evidence_fix_auto_and_unknowns():
    text = _with_plan(healthy_h200(), sample_runs(), verbose=True)
    findings = text[text.index("\nEvidence"):]
    assert findings.splitlines()[1].startswith("Evidence: 1 error, 1 warning, 0 notes, 2 unknown (5 rules checked, 1 ok)")
    lines = findings.splitlines()
    i = next(n for n, ln in enumerate(lines) if "lib-shadowed" in ln)
    assert lines[i].split() [:3] == ["error", "lib-shadowed", "[libnvJitLink.so.12]:"]
    assert "[auto-fix]" in lines[i]
    block = "\n".join(lines[i:i + 8])
    assert "- LD_LIBRARY_PATH is searched before libcusparse's DT_RUNPATH" in block
    assert "remove /usr/local/cuda-12.1/lib64 from LD_LIBRARY_PATH" in block
    assert "preload %s (for libnvJitLink.so.12)" % OWN_JITLINK in block
    assert "auto-fix: cudafix applies this on `conda activate` and at `import torch`" in block
    # errors before warnings; the warning is not marked auto
    j = next(n for n, ln in enumerate(lines) if "launch-blocking" in ln)
    assert j > i and "[auto-fix]" not in lines[j]
    assert "unset CUDA_LAUNCH_BLOCKING" not in lines[j + 2]  # advice lives in the Plan, once
    plan = text[text.index("\nPlan (cudafix fix)"):].splitlines()
    assert sum(ln.endswith("   unset CUDA_LAUNCH_BLOCKING") for ln in plan) == 1 and "  shell (sh, bash, zsh):" in plan
    # unknown verdicts and a crashed rule are shown, never as ok
    assert any(ln.split()[:2] == ["unknown", "arch-unsupported:"] and "NVML not available" in ln for ln in lines)
    assert any("device-order: rule could not run: KeyError" in ln for ln in lines)
    assert "no problems found" not in text


def test_advice_commands_are_exact_and_printed_once_in_the_plan():
    cmd = "conda install -c nvidia cuda-nvcc=12.4"
    fix = Fix(summary="install a CUDA 12.4 toolkit", commands=(cmd, 'export CUDA_HOME="$CONDA_PREFIX"'))
    r1 = _rule("cuda-home-mismatch", "error", [Outcome(PROBLEM, "CUDA_HOME toolkit does not match", fix=fix)])
    r2 = _rule("launch-blocking", "warning", [Outcome(PROBLEM, "set twice", fix=fix)])
    text = _with_plan(Snapshot(), rules.run(Snapshot(), (r1, r2)))
    findings, plan = text.split("\nPlan (cudafix fix)\n")
    assert cmd not in findings
    assert plan.count(". $ %s\n" % cmd) == 1
    assert plan.count('export CUDA_HOME="$CONDA_PREFIX"') == 1
    assert "set CUDA_HOME" not in text  # `set X=...` in bash sets $1, not X


def test_unknowns_are_honest_on_a_machine_without_driver():
    text = report.render_status(no_driver(), [], verbose=True)
    flat = " ".join(text.split())
    assert "GPUs GPUs unknown \u2014 NVML not available: libnvidia-ml.so.1: cannot open shared object file" in flat
    assert "kernel module unknown \u2014 no NVIDIA kernel module: /sys/module/nvidia/version absent" in flat
    assert "driver CUDA unknown \u2014 libcuda.so.1 not found by the loader" in flat
    assert "torch 2.13.0+cpu  CPU-only build" in text
    assert "none of the CUDA/torch variables is set" in text
    assert "no rules were run" in text
    assert "compatible" not in text


def test_no_problems_line():
    r = _rule("driver-too-old", "error", [Outcome(OK, "fine")])
    text = report.render_check(rules.run(Snapshot(), (r,)))
    assert "0 errors, 0 warnings, 0 notes, 0 unknown (1 rule checked, 1 ok)" in text
    assert "no problems found" in text


def test_colour_only_when_asked():
    plain = report.render_status(healthy_h200(), sample_runs(), color=False)
    assert not ANSI.search(plain)
    coloured = report.render_status(healthy_h200(), sample_runs(), color=True)
    assert "\x1b[31m" in coloured  # errors in red
    assert ANSI.sub("", coloured) == plain


def test_what_if_and_probe_errors_in_header():
    snap = healthy_h200()
    snap.assumed = {"driver": "580.95.05", "gpus": ["NVIDIA H200"]}
    snap.probe_errors = {"libraries": "OSError: [Errno 40] Too many levels of symbolic links"}
    head = report.render_status(snap, []).split("\nFindings")[0]
    assert "what-if: assumed driver=580.95.05; gpus=NVIDIA H200" in head
    assert "probe libraries failed: OSError: [Errno 40] Too many levels of symbolic links" in head


def test_several_torch_installs_are_marked():
    snap = healthy_h200()
    snap.torch.append(TorchBuild(dist=PythonDist(name="torch", version="1.10.0", location="/usr/lib/python3/dist-packages",
                                                 origin="conda", conda_build="py3.8_cuda11.3_cudnn8.2.0_0"),
                                 version="1.10.0", cuda="11.3"))
    text = report.render_status(snap, [])
    assert "[imported first]" in text.split("torch 2.6.0")[1].splitlines()[0]
    assert "conda py3.8_cuda11.3_cudnn8.2.0_0  /usr/lib/python3/dist-packages  [shadowed]" in text


def test_json_document_round_trips():
    snap = healthy_h200()
    doc = json.loads(json.dumps(report.status_document(snap, sample_runs(), plan=make_plan(snap, sample_runs()))))
    assert doc["schema"] == "cudafix.status/1"
    assert Snapshot.from_dict(doc["snapshot"]) == snap
    assert [f["rule"] for f in doc["findings"]] == ["lib-shadowed", "launch-blocking"]
    f = doc["findings"][0]
    assert set(f) >= {"rule", "severity", "message", "evidence", "fix", "auto"}
    assert f["auto"] is True and f["severity"] == "error"
    assert f["fix"]["preload"] == [{"soname": "libnvJitLink.so.12", "path": OWN_JITLINK}]
    assert doc["findings"][1]["auto"] is False
    assert doc["verdicts"] == {"lib-shadowed": "problem", "launch-blocking": "problem",
                               "arch-unsupported": "unknown", "driver-too-old": "ok", "device-order": "unknown"}
    assert {u["rule"] for u in doc["unknown"]} == {"arch-unsupported", "device-order"}


def test_explain_sections_keep_error_texts_verbatim():
    long_symptom = ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update "
                    "your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx")
    rule = Rule(id="driver-too-old", severity="error", title="the driver cannot run this torch build's CUDA",
                check=lambda s: [], cause="Each CUDA release needs a minimum driver.\n\nSecond paragraph.",
                symptoms=(long_symptom, "CUDA driver version is insufficient for CUDA runtime version"),
                evidence_used="driver.cuda_version, torch.cuda", fix_text="Install a matching build.",
                sources=("CUDA release notes, Table 3",))
    text = report.render_explain(rule)
    order = [text.index(t) for t in ("\nCause\n", "\nHow it shows up\n", "\nEvidence used\n", "\nFix\n", "\nSources\n")]
    assert order == sorted(order)
    assert "  " + long_symptom + "\n" in text
    assert "  - CUDA release notes, Table 3" in text
    assert "driver-too-old  (error; you run the fix: cudafix fix)" in text
    empty = report.render_explain(Rule(id="x", severity="info", title="t", check=lambda s: []))
    assert empty.count("(not documented)") == 5


def test_write_atomic_replaces_and_respects_umask(tmp_path):
    target = tmp_path / "snap.json"
    target.write_text("old")
    old_umask = os.umask(0o027)
    try:
        write_atomic(str(target), "new\n")
    finally:
        os.umask(old_umask)
    assert target.read_text() == "new\n"
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)
    assert os.listdir(tmp_path) == ["snap.json"]


def test_what_if_as_cudafix_assume_records_it():
    snap = Snapshot(assumed={"driver": {"value": "535.104.05", "cuda_version": 12020, "replaced": {"kernel_version": None}},
                             "gpus": {"values": ["NVIDIA A100", "sm_61"], "replaced": []}})
    line = "what-if: assumed driver=535.104.05; gpus=NVIDIA A100,sm_61"
    assert "  " + line + "\n" in report.render_status(snap, [])
    assert "\n  " + line + "\n" in report.render_check([], snap=snap)
