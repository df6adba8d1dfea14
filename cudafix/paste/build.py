"""Facts read from a report -> a partial Snapshot the rules and the planner can judge.

Only what the text states is filled in, each value's ``found_via`` naming the report line; every
section the text cannot show (the loader's view of libraries, the extension modules, the
environment variables, the JIT cache, the toolkit CUDA_HOME would pick, WSL's mapped driver) is
a failed probe in ``probe_errors``, so every rule that needs it answers "unknown" -- never ok.  A
torch whose CUDA build the text does not state makes the torch section unknown too: a torch
without ``version.cuda`` would read as a CPU build.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

from cudafix.knowledge import gpus as kgpus
from cudafix.model import cuda as cudaver
from cudafix.model import versions
from cudafix.model.snapshot import (
    REPORT_SOURCE, GPU, DriverInfo, GPUInfo, Hardware, PythonDist, PythonInfo, Snapshot, Toolkit, ToolkitInfo, TorchBuild, TorchvisionBuild,
)
from cudafix.paste import facts as F
from cudafix.paste.facts import Fact, Report

NEEDS_ENV = "run `cudafix status` in that env to decide"
# The sections a paste never shows, and why (the rules' `needs` names: cudafix/model/findings.py)
NEVER_IN_TEXT = {
    "toolkits": "the toolkit extension builds would use (CUDA_HOME, CUDA_PATH, nvcc) is not in the report",
    "libraries": "which copy of each CUDA library the loader picks is not in the report",
    "extensions": "the env's extension modules are not in the report",
    "env": "the environment variables are not in the report",
    "jit_cache": "the PTX JIT cache is not in the report",
    "node": "the node's network interfaces are not in the report",
    "wsl": "WSL's mapped driver files are not in the report",
    "windows": "the DLLs torch loads on Windows are not in the report",
    "python": "the interpreter's path is not in the report",
}


def _via(f: Fact) -> str:
    return "report line %d (%s): %s" % (f.line, f.source, f.text)


def _packages(report: Report) -> Dict[str, Tuple[str, str, str, str, Fact]]:
    """name -> (version, origin, build, channel, fact): the first line per name; for torch, the
    line whose version is the one the report's torch version states (collect_env of an env with
    a pip torch and a conda pytorch lists both: `import torch` gave the stated one)."""
    out: Dict[str, Tuple[str, str, str, str, Fact]] = {}
    stated = report.first(F.TORCH_VERSION)
    for f in report.all(F.PACKAGE):
        name, version, origin, build, channel = (f.value.split("|") + ["", "", "", ""])[:5]
        if name == "pytorch":
            name = "torch"  # conda's name for it
        row = (version, origin, build, channel, f)
        if name not in out:
            out[name] = row
        elif name == "torch" and stated is not None and versions.public(out[name][0]) != versions.public(stated.value) \
                and versions.public(version) == versions.public(stated.value):
            out[name] = row
    return out


def _torch_cuda(report: Report, version: Optional[str], build: str) -> Tuple[Optional[str], Optional[Fact], str]:
    """(cuda, fact, how): "12.1"; "" for a CPU build; None when the text does not say."""
    f = report.first(F.TORCH_CUDA)
    if f is not None:
        return ("" if f.value == "none" else f.value), f, _via(f)
    tag = (versions.local(version) or "").lower() if version else ""
    if tag == "cpu":
        return "", None, "its local version +cpu"
    m = re.match(r"^cu(\d+)(\d)$", tag)
    if m:
        return "%s.%s" % (m.group(1), m.group(2)), None, "its local version +%s" % tag
    m = re.search(r"cuda(\d+\.\d+)", build)
    if m:
        return m.group(1), None, "its conda build string %s" % build
    if re.search(r"(^|_)cpu(_|$)", build):
        return "", None, "its conda build string %s" % build
    return None, None, ""


def _torch(report: Report, pkgs: Dict[str, Tuple[str, str, str, str, Fact]], errors: Dict[str, str]) -> List[TorchBuild]:
    fv = report.first(F.TORCH_VERSION)
    pk = pkgs.get("torch")
    if fv is None and pk is None:
        errors["torch"] = "no torch version in the report"
        return []
    version = fv.value if fv is not None else pk[0]
    if pk is not None and versions.local(pk[0]) and not versions.local(version) and versions.public(pk[0]) == versions.public(version):
        version = pk[0]  # pip list's 2.1.0+cu121 says more than collect_env's 2.1.0
    origin, build, channel = (pk[1], pk[2], pk[3]) if pk is not None else ("unknown", "", "")
    cuda, cf, how = _torch_cuda(report, version, build)
    dist = PythonDist(name="torch", version=versions.public(version) or version, origin=origin,
                      conda_build=build or None, conda_channel=channel or None,
                      found_via=_via(fv if fv is not None else pk[4]))
    t = TorchBuild(dist=dist, version=version)
    t.found_via["version"] = dist.found_via
    hip = report.first(F.TORCH_HIP)
    if hip is not None:
        t.hip = hip.value
    if cuda is None:
        t.version = None  # no version.py facts: a torch without a CUDA build reads as CPU-only
        t.unknown["cuda"] = "the report does not say which CUDA torch was built for"
        errors["torch"] = "the report does not say which CUDA torch %s was built for (CUDA used to build PyTorch)" % version
    else:
        t.cuda = cuda or None
        t.found_via["cuda"] = how
    return [t]


def _torchvision(pkgs: Dict[str, Tuple[str, str, str, str, Fact]], errors: Dict[str, str]) -> List[TorchvisionBuild]:
    pk = pkgs.get("torchvision")
    if pk is None:
        errors["torchvision"] = "no torchvision version in the report"
        return []
    version, origin, build, channel, f = pk
    dist = PythonDist(name="torchvision", version=versions.public(version) or version, origin=origin,
                      conda_build=build or None, conda_channel=channel or None, found_via=_via(f))
    tv = TorchvisionBuild(dist=dist, version=version)
    tv.found_via["version"] = _via(f)
    return [tv]


def _driver(report: Report, errors: Dict[str, str]) -> DriverInfo:
    d = DriverInfo()
    f = report.first(F.DRIVER_VERSION)
    c = report.first(F.DRIVER_CUDA)
    if f is None and c is None:
        errors["driver"] = "no driver version in the report (collect_env's Nvidia driver version, nvidia-smi)"
        return d
    if f is not None:
        d.kernel_version = d.libcuda_version = f.value
        d.found_via["kernel_version"] = d.found_via["libcuda_version"] = _via(f)
    if c is not None:
        try:
            d.cuda_version = cudaver.version_int(c.value)
            d.found_via["cuda_version"] = _via(c)
        except ValueError:
            pass
    # nvidia-smi talks to the kernel module through NVML; which libcuda.so.1 a process loads is
    # another file the text cannot show
    d.unknown["libcuda_path"] = "not searched: a pasted report (%s)" % NEEDS_ENV
    if f is None:
        d.unknown["kernel_version"] = "not in the report (only nvidia-smi's CUDA Version)"
    return d


def _gpus(report: Report, errors: Dict[str, str]) -> Tuple[GPUInfo, Optional[Hardware]]:
    info = GPUInfo()
    seen: Dict[str, Fact] = {}
    for f in report.all(F.GPU):
        index, _, name = f.value.partition("|")
        key = index or name
        if key in seen:
            continue
        seen[key] = f
    if not seen:
        errors["gpus"] = "no GPU listed in the report (nvidia-smi, collect_env's GPU models)"
        errors["hardware"] = "the report does not show the machine's GPUs"
        return info, None
    for i, f in enumerate(seen.values()):
        index, _, name = f.value.partition("|")
        name = name.strip()
        # the GPU table's compute capability (the rules look it up the same way)
        info.gpus.append(GPU(index=int(index) if index.isdigit() else i, name=name, compute_capability=kgpus.compute_capability(name),
                             found_via=_via(f)))
    info.found_via["gpus"] = "the report (%d GPU%s)" % (len(info.gpus), "" if len(info.gpus) == 1 else "s")
    info.unknown["visible"] = "CUDA_VISIBLE_DEVICES is not in the report"
    return info, None  # the PCI bus was not read; the listed GPUs are hardware enough for the rules


def _python(report: Report) -> PythonInfo:
    p = PythonInfo()
    v = report.first(F.PYTHON_VERSION)
    if v is not None:
        p.version = v.value
    plat = report.first(F.PLATFORM)
    if plat is not None:
        p.platform = plat.value if plat.value != "linux" else ""
    return p


def _toolkits(report: Report, pkgs: Dict[str, Tuple[str, str, str, str, Fact]], errors: Dict[str, str]) -> ToolkitInfo:
    info = ToolkitInfo()
    nv = report.first(F.NVCC)
    home = report.first(F.CUDA_HOME)
    if home is not None and nv is not None and home.value.startswith(("/", "C:", "c:", "D:")):
        # detectron2's / mmcv's collect_env print torch.utils.cpp_extension.CUDA_HOME and the nvcc
        # of that toolkit: the one extension builds use, stated
        info.toolkits.append(Toolkit(path=home.value, version=nv.value, nvcc=home.value.rstrip("/") + "/bin/nvcc",
                                     sources=["CUDA_HOME"], found_via="%s; %s" % (_via(home), _via(nv))))
        info.cuda_home = home.value
        info.cuda_home_via = "torch.utils.cpp_extension.CUDA_HOME (report line %d)" % home.line
    else:
        errors["toolkits"] = NEVER_IN_TEXT["toolkits"]
        info.unknown["cuda_home"] = NEVER_IN_TEXT["toolkits"]
        if nv is not None:
            info.toolkits.append(Toolkit(path="(nvcc on PATH)", version=nv.value, nvcc="nvcc", sources=["PATH nvcc"], found_via=_via(nv)))
    for name, (version, origin, build, channel, f) in sorted(pkgs.items()):
        if (name.startswith("nvidia-") or name.startswith("cuda-")) and origin == "pip":
            info.nvidia_wheels.append(PythonDist(name=name, version=version, origin="pip", found_via=_via(f)))
    return info


def snapshot(report: Report) -> Snapshot:
    """The partial snapshot of what ``report`` states (probe_errors: what it cannot)."""
    errors: Dict[str, str] = {}
    pkgs = _packages(report)
    snap = Snapshot(source=REPORT_SOURCE)
    snap.python = _python(report)
    snap.torch = _torch(report, pkgs, errors)
    snap.torchvision = _torchvision(pkgs, errors)
    snap.driver = _driver(report, errors)
    snap.gpus, snap.hardware = _gpus(report, errors)
    snap.toolkits = _toolkits(report, pkgs, errors)
    if report.first(F.WSL) is not None:
        snap.host["os"] = "linux (WSL 2)"
        snap.driver.wsl = True
    elif snap.python.platform.startswith("win"):
        snap.host["os"] = "windows"
    for need, why in NEVER_IN_TEXT.items():
        if need != "toolkits":  # stated by detectron2's / mmcv's collect_env (_toolkits)
            errors.setdefault(need, why)
    snap.probe_errors = {k: "%s: %s" % (v, NEEDS_ENV) for k, v in sorted(errors.items())}
    return snap
