"""torch-build rules: CPU-only builds on GPU machines, torchvision pairing, mixed CUDA sources,
PYTORCH_CUDA_ALLOC_CONF (the reports and documents each rule rests on: its ``sources``, docs/rules.md)."""

from __future__ import annotations

import os
import re
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Iterable, List, Optional, Tuple

from cudafix.model.findings import ERROR, WARNING, Outcome, Rule
from cudafix.model.fixes import SET, UNSET, EnvOp, EnvPatch, Fix
from cudafix.knowledge import alloc_conf, alloc_syntax, cuda_packages
from cudafix.knowledge import torch_builds as tb
from cudafix.rules import _extload
from cudafix.rules._util import (
    base_version,
    driver_version,
    gpu_label,
    major_minor,
    nvidia_hardware,
    ok,
    problem,
    recommend_commands,
    torch_label,
    unknown,
    vtuple,
)
from cudafix.model import versions
from cudafix.model.snapshot import AllocConfKeys, Snapshot, TorchBuild, TorchvisionBuild
from cudafix.model import cuda as cudaver

ALLOC_DOC = "https://pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf"


def _driver_present(snap: Snapshot) -> bool:
    return bool(snap.driver.kernel_version or snap.driver.libcuda_path or "driver" in snap.assumed)


# -- cpu-only-torch ------------------------------------------------------------------------


def check_cpu_only(snap: Snapshot) -> Iterable[Outcome]:
    t = snap.primary_torch
    if t is None:
        return [ok("no torch installed", subject="torch")]
    if t.cuda:
        return [ok("%s is a CUDA %s build" % (torch_label(t), t.cuda), subject="torch")]
    if not t.version and not t.hip:
        why = t.unknown.get("version") or t.unknown.get("cuda") or "torch/version.py not read"
        return [unknown("whether %s is a CUDA build is unknown" % torch_label(t), why, subject="torch")]
    gpus = snap.gpus.gpus
    if not gpus and not _driver_present(snap):
        if nvidia_hardware(snap):
            return [ok("%s is a CPU build; the NVIDIA GPU on the PCI bus has no driver (see no-driver)" % torch_label(t), subject="torch")]
        return [ok("%s is a CPU build and there is no NVIDIA GPU or driver" % torch_label(t), subject="torch")]
    if not gpus:
        why = snap.gpus.unknown.get("gpus")
        return [unknown("%s is a CPU build; NVIDIA driver %s loaded but no GPU listed" % (torch_label(t), driver_version(snap) or "?"),
                        why or "GPU list empty", subject="torch")]
    if not _driver_present(snap):
        return [ok("%s is a CPU build; the NVIDIA GPU has no driver (see no-driver)" % torch_label(t), subject="torch")]
    kind = "ROCm (HIP %s)" % t.hip if t.hip else "CPU-only"
    ev = [
        "torch/version.py of %s: cuda = None%s" % (torch_label(t), ", hip = %s" % t.hip if t.hip else ""),
        "NVIDIA GPU(s) with driver %s: %s" % (driver_version(snap) or "(assumed)", ", ".join(gpu_label(g) for g in gpus)),
        "torch.cuda.is_available() returns False: every tensor stays on the CPU",
    ]
    if (snap.python.platform or "").startswith("win") and not t.hip:
        # https://pytorch.org/get-started/locally/: on Windows the CUDA builds come from the PyTorch index only
        ev.append("on Windows PyPI serves only CPU builds of torch: the CUDA build comes from the PyTorch index (--index-url)")
    cmds, notes = recommend_commands(snap, gpus)
    summary = "install a CUDA build of torch that fits the driver, every GPU and Python %s" % (snap.python.version or "?")
    if not cmds and notes:
        summary += "; " + notes[0]
    return [problem("%s is a %s build on a machine with a usable NVIDIA GPU" % (torch_label(t), kind), ev,
                    fix=Fix(summary=summary, commands=cmds), subject="torch")]


# -- torchvision-mismatch ------------------------------------------------------------------


def _variant(v: Optional[str]) -> Optional[str]:
    """Local version tag: "0.11.0+cu113" -> "cu113"; None when absent."""
    tag = versions.local(v)
    return tag.lower() if tag else None


def _tv_cuda(tv: TorchvisionBuild) -> Tuple[Optional[str], str]:
    """torchvision's CUDA ("11.3"), "cpu", or None (unknown), with how it was read."""
    if tv.cuda:
        return tv.cuda, "torchvision version.py"
    var = _variant(tv.version) or _variant(tv.dist.version)
    if var == "cpu":
        return "cpu", "local version +cpu"
    if var and re.match(r"^cu\d{3,}$", var):
        return tb.variant_cuda(var), "local version +%s" % var
    build = tv.dist.conda_build or ""
    m = re.search(r"cuda(\d+\.\d+)", build) or re.search(r"_cu(\d{3,})", build)
    if m:
        c = m.group(1)
        return (c if "." in c else tb.variant_cuda("cu" + c)), "conda build %s" % build
    if re.search(r"(^|_)cpu(_|$)", build):
        return "cpu", "conda build %s" % build
    return None, ""


def _tv_fix(snap: Snapshot, t: TorchBuild, want_tv: Optional[str], reinstall: bool) -> Fix:
    """What to do; the exact command (the env's own pip or conda, the index of torch's variant,
    every other package pinned to torch moved too) is the plan's: `cudafix fix`."""
    torch_v = base_version(t.full_version)
    variant = cudaver.tag(t.cuda)
    cmds, _ = recommend_commands(snap)
    if not want_tv:
        return Fix(summary="reinstall the torchvision release paired with torch %s" % torch_v, commands=cmds)
    return Fix(summary="install torchvision %s (%s), built for torch %s" % (want_tv, variant, torch_v), commands=cmds)


def check_torchvision(snap: Snapshot) -> Iterable[Outcome]:
    if not snap.torchvision:
        return [ok("torchvision not installed", subject="torchvision")]
    tv = snap.torchvision[0]
    t = snap.primary_torch
    tv_label = "torchvision %s" % tv.full_version
    if t is None:
        return [problem("%s is installed without torch" % tv_label, ["no torch distribution on sys.path"],
                        fix=Fix(summary="install torch (the release paired with %s) or remove torchvision" % tv_label), subject="torchvision")]
    torch_v = base_version(t.full_version)
    msgs: List[str] = []
    ev: List[str] = []
    notes: List[Outcome] = []
    # 1. version pairing: the wheel's Requires-Dist pin, else the pairing table (major.minor only)
    want_tv = tb.torchvision_for(torch_v)
    pinned = None
    if tv.requires_torch:
        m = re.search(r"torch\s*==\s*([0-9][0-9A-Za-z.+]*)", tv.requires_torch)
        pinned = m.group(1) if m else None
    have = base_version(tv.full_version)
    version_bad = False
    if pinned:
        if base_version(pinned) != torch_v:
            version_bad = True
            msgs.append("%s is built for torch %s, but torch %s is installed" % (tv_label, pinned, torch_v))
            ev.append("torchvision's Requires-Dist pins %s; installed %s" % (tv.requires_torch, torch_label(t)))
    elif want_tv:
        if vtuple(have)[:2] != vtuple(want_tv)[:2]:
            version_bad = True
            msgs.append("%s does not pair with torch %s (expects torchvision %s)" % (tv_label, torch_v, want_tv))
            ev.append("pytorch/vision compatibility table: torch %s pairs with torchvision %s; installed %s" % (torch_v, want_tv, have))
    else:
        notes.append(unknown("which torchvision pairs with torch %s is unknown (no Requires-Dist pin, not in cudafix's table)" % torch_v, subject="torchvision"))
    if version_bad:
        ev.append("torchvision's C++ ops are compiled against one torch release: with another they fail to load")
    # 2. CUDA variant
    tvc, how = _tv_cuda(tv)
    if tvc is None:
        if t.cuda:
            notes.append(unknown("%s: its CUDA variant is unknown (no local version or conda build string)" % tv_label, subject="torchvision"))
    else:
        t_c = t.cuda or "cpu"
        same = (tvc == "cpu" and t_c == "cpu") or (tvc != "cpu" and t_c != "cpu" and major_minor(tvc) == major_minor(t_c))
        if not same:
            msgs.append("%s is a %s build but torch is %s" % (tv_label, "CPU" if tvc == "cpu" else "CUDA %s" % tvc, "CPU-only" if t_c == "cpu" else "CUDA %s" % t_c))
            ev.append("%s: CUDA %s (torch/version.py); %s: %s (%s)" % (torch_label(t), t_c, tv_label, tvc, how))
            if tvc != "cpu" and t_c != "cpu":
                ev.append("torchvision raises at import: Detected that PyTorch and torchvision were compiled with different CUDA versions")
            elif tvc == "cpu":
                ev.append("a CPU torchvision has no CUDA kernels: its ops (nms, roi_align, ...) fail on CUDA tensors")
            else:
                ev.append("a CUDA torchvision needs a CUDA torch: its C++ ops fail to load")
    if msgs:
        target = want_tv or have
        fix = _tv_fix(snap, t, target, reinstall=(not version_bad) and vtuple(have)[:3] == vtuple(target)[:3])
        # the same cause as its modules' load failures (ext-torch-symbols defers to this finding):
        # every file it touches, and the first error the loader really reports
        broken = _extload.failing(snap, "torchvision")
        ev.extend(_extload.file_evidence(m) for m in broken)
        msg = "; ".join(msgs)
        if broken:
            msg += ": loading %s fails with '%s'" % (os.path.basename(broken[0].path), _extload.load_error(broken[0]))
        return [problem(msg, ev, fix=fix, subject="torchvision")] + notes
    if notes:
        return notes
    return [ok("%s pairs with %s (version and CUDA variant)" % (tv_label, torch_label(t)), subject="torchvision")]


# -- mixed-cuda-sources --------------------------------------------------------------------

def _norm(name: str) -> str:
    return cuda_packages.normalize(name)


def _pip_families(snap: Snapshot) -> Tuple[Dict[int, List[str]], Dict[str, List[str]]]:
    majors: Dict[int, List[str]] = {}
    by_lib: Dict[str, List[str]] = {}
    for d in snap.toolkits.nvidia_wheels:
        n = _norm(d.name)
        fam = cuda_packages.pip_cuda_family(n)
        if fam:
            major = fam[1]
            by_lib.setdefault(fam[0], []).append("%s %s" % (d.name, d.version))
        elif n in cuda_packages.PIP_CUDA_VERSIONED and vtuple(d.version):
            major = vtuple(d.version)[0]
        else:
            continue
        majors.setdefault(major, []).append("%s %s" % (d.name, d.version))
    return majors, {k: v for k, v in by_lib.items() if len(v) > 1}


def _conda_majors(snap: Snapshot) -> Dict[int, List[str]]:
    majors: Dict[int, List[str]] = {}
    for p in snap.toolkits.conda_packages:
        if _norm(p.name) in cuda_packages.CONDA_CUDA_RUNTIME and vtuple(p.version):
            majors.setdefault(vtuple(p.version)[0], []).append("%s %s" % (p.name, p.version))
    return majors


def check_mixed_sources(snap: Snapshot) -> Iterable[Outcome]:
    out: List[Outcome] = []
    if len(snap.torch) > 1:
        first = snap.torch[0]
        ev = ["%s at %s (%s) is imported: first on sys.path" % (torch_label(first), first.package_dir or first.dist.location, first.dist.origin)]
        for other in snap.torch[1:]:
            ev.append("%s at %s (%s) is shadowed" % (torch_label(other), other.package_dir or other.dist.location, other.dist.origin))
        same_dir = len({(t.package_dir or t.dist.location) for t in snap.torch}) < len(snap.torch)
        if same_dir:
            ev.append("two installs recorded for one directory: their files are mixed")
        out.append(problem(
            "%d torch installs in this environment; `import torch` uses %s" % (len(snap.torch), torch_label(first)), ev,
            fix=Fix(summary="uninstall the torch that is not wanted (pip uninstall torch / conda remove pytorch), then reinstall the one to keep"),
            severity=ERROR if same_dir else WARNING, subject="torch",
        ))
    pip_majors, clashes = _pip_families(snap)
    conda_majors = _conda_majors(snap)
    for lib, dists in sorted(clashes.items()):
        out.append(problem(
            "%s wheels for several CUDA majors overwrite each other: %s" % (lib, ", ".join(dists)),
            ["%s: both install into site-packages/nvidia/%s; the last one installed wins, and torch may load the wrong one" % (", ".join(dists), lib.replace("nvidia-", "").replace("-", "_")),
             "e.g. ImportError: .../torch/lib/libtorch_cuda.so: undefined symbol: ncclMemFree"],
            fix=Fix(summary="uninstall the family torch does not use, then reinstall torch's pins",
                    commands=tuple("pip uninstall -y %s" % d.split(" ")[0] for d in dists if not _uses_major(snap, d))),
            severity=ERROR, subject=lib,
        ))
    all_majors: Dict[int, List[str]] = {}
    for src in (pip_majors, conda_majors):
        for k, v in src.items():
            all_majors.setdefault(k, []).extend(v)
    if len(all_majors) > 1 and not clashes:
        t = snap.primary_torch
        tmaj = major_minor(t.cuda)[0] if (t is not None and t.cuda and major_minor(t.cuda)) else None
        ev = ["CUDA %d: %s" % (k, ", ".join(v)) for k, v in sorted(all_majors.items())]
        if tmaj is not None:
            ev.append("%s uses CUDA %d" % (torch_label(t), tmaj))
        foreign = [d for k, v in sorted(all_majors.items()) if k != tmaj for d in v]
        out.append(problem(
            "CUDA runtimes of %d majors in one environment (%s)" % (len(all_majors), ", ".join("CUDA %d" % k for k in sorted(all_majors))),
            ev, fix=Fix(summary="remove the CUDA packages torch does not use%s" % (": " + ", ".join(foreign) if foreign else "")),
            severity=WARNING, subject="cuda-runtimes",
        ))
    if not out:
        majors = sorted(all_majors)
        what = "CUDA packages of one major (CUDA %d)" % majors[0] if majors else "no separate CUDA runtime packages"
        return [ok("%d torch install(s); %s" % (len(snap.torch), what), subject="cuda-runtimes")]
    return out


def _uses_major(snap: Snapshot, dist_label: str) -> bool:
    t = snap.primary_torch
    if t is None or not t.cuda:
        return False
    fam = cuda_packages.pip_cuda_family(dist_label.split(" ")[0])
    mm = major_minor(t.cuda)
    return bool(fam and mm and fam[1] == mm[0])


# -- alloc-conf-invalid --------------------------------------------------------------------


def check_alloc_conf(snap: Snapshot) -> Iterable[Outcome]:
    out: List[Outcome] = []
    t = snap.primary_torch
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        value = snap.env.get(name)
        if value is None:
            continue
        if t is None:
            out.append(ok("%s is set but there is no torch" % name, subject=name))
            continue
        if not t.cuda:
            out.append(ok("%s is never read: %s is not a CUDA build" % (name, torch_label(t)), subject=name))
            continue
        tv = base_version(t.full_version)
        if name == "PYTORCH_ALLOC_CONF" and vtuple(tv)[:2] < (2, 9):
            out.append(unknown("%s: whether %s reads the device-generic name is not confirmed" % (name, torch_label(t)), subject=name))
            continue
        info = t.alloc_conf
        if info is not None and info.unknown is None and info.parser:
            out.append(_alloc_from_torch(name, value, tv, info))
            continue
        fallback = ("the option names were not read from torch's libraries (%s); cudafix's table of keys per release was used"
                    % (info.unknown if info is not None else "not in this snapshot"))
        probs = alloc_conf.check_alloc_conf(value, tv)
        if not probs:
            out.append(ok("%s=%r is valid for torch %s" % (name, value, tv), fallback, subject=name))
            continue
        certain = [p for p in probs if p.certain]
        ev = [p.reason for p in probs] + [fallback]
        repaired = alloc_conf.repair(value, tv)
        bad_values = [p for p in certain if p.kind in (alloc_conf.BAD_VALUE, alloc_conf.MALFORMED)]
        if repaired is not None and not bad_values:
            # Safe: only keys this torch certainly rejects are dropped; with them torch raises at
            # its first CUDA allocation, so the repaired value cannot be worse than the original.
            op = EnvOp(UNSET, name) if repaired == "" else EnvOp(SET, name, repaired)
            shown = "unset %s" % name if repaired == "" else "export %s=%s" % (name, shlex.quote(repaired))
            fix = Fix(summary="`%s` (keys torch %s rejects dropped)" % (shown, tv), auto=True, env=EnvPatch((op,)), applies_in="both")
        else:
            drop = {p.key for p in certain}
            kept = [(k, v) for k, v in alloc_conf.split_conf(value, tv) if k not in drop]
            text = ",".join(k if v is None else "%s:%s" % (k, v) for k, v in kept)
            cmd = "unset %s" % name if not text else "export %s=%s" % (name, shlex.quote(text))
            fix = Fix(summary="fix or remove: %s" % ", ".join(p.key for p in (certain or probs)), commands=(cmd,) if certain else ())
        keys = ", ".join(p.key for p in (certain or probs))
        out.append(problem(
            "%s=%r: %s %s for torch %s" % (name, value, keys, "is rejected" if certain else "may be rejected", tv), ev,
            fix=fix, severity=ERROR if certain else WARNING, subject=name,
        ))
    if not out:
        out.append(ok("PYTORCH_CUDA_ALLOC_CONF is unset", subject="PYTORCH_CUDA_ALLOC_CONF"))
    return out


def _alloc_from_torch(name: str, value: str, tv: str, info: AllocConfKeys) -> Outcome:
    """The verdict from the option names read from this torch's own libraries (docs/alloc-conf.md)."""
    via = "option names: %s" % info.found_via
    issues = alloc_syntax.check(value, info.parser, info.accepted, info.rejected, info.uncertain, info.max_split_check)
    if not issues:
        return ok("%s=%r is valid for torch %s" % (name, value, tv), via, subject=name)
    ev = ["%s: %s" % (i.key, i.reason) for i in issues] + [via]
    certain = [i for i in issues if i.kind != alloc_syntax.UNCERTAIN]
    rejected = [i.key for i in certain if i.kind == alloc_syntax.REJECTED]
    keys = ", ".join(i.key for i in (certain or issues))
    if rejected and len(rejected) == len(issues):
        # Safe: exactly the keys this torch's parser does not know are dropped (with them torch
        # raises at its first CUDA allocation); the user's other items keep their spelling and order.
        repaired = alloc_syntax.without(value, info.parser, rejected)
        op = EnvOp(UNSET, name) if repaired == "" else EnvOp(SET, name, repaired)
        shown = "unset %s" % name if repaired == "" else "export %s=%s" % (name, shlex.quote(repaired))
        fix = Fix(summary="`%s` (keys torch %s rejects dropped)" % (shown, tv), auto=True, env=EnvPatch((op,)), applies_in="both")
    elif certain:
        kept = alloc_syntax.without(value, info.parser, [i.key for i in certain])
        cmd = "unset %s" % name if not kept else "export %s=%s" % (name, shlex.quote(kept))
        fix = Fix(summary="fix or remove: %s" % keys, commands=(cmd,))
    else:
        fix = Fix(summary="check %s against torch %s's allocator options" % (keys, tv))
    # A key a letter or two off an option this torch's libc10 spells out is a typo of it: name the
    # real option and give the value with it spelled right.
    guesses = [(i.key, alloc_syntax.nearest(i.key, info.accepted)) for i in issues if i.kind in (alloc_syntax.UNCERTAIN, alloc_syntax.REJECTED)]
    guesses = [(k, g) for k, g in guesses if g]
    said = ""
    if guesses:
        said = "; " + "; ".join("did you mean `%s`?" % g for _k, g in guesses)
        fixed = value
        for k, g in guesses:
            fixed = alloc_syntax.renamed(fixed, info.parser, k, g)
        ev.append("nearest option names read from torch's libraries: %s" % ", ".join("%s -> %s" % kg for kg in guesses))
        ask = "did you mean %s? spell %s as torch %s does" % (
            ", ".join("`%s`" % g for _k, g in guesses), "them" if len(guesses) > 1 else "it", tv)
        cmd = ("export %s=%s" % (name, shlex.quote(fixed)),)
        # an automatic drop stays (safe: torch rejects the key); the spelling is the user's to choose
        fix = Fix(summary="%s; %s" % (fix.summary, ask), auto=True, env=fix.env, applies_in=fix.applies_in, commands=cmd) if fix.auto \
            else Fix(summary=ask, commands=cmd)
    return problem("%s=%r: %s %s for torch %s%s" % (name, value, keys, "is rejected" if certain else "may be rejected", tv, said), ev,
                   fix=fix, severity=ERROR if certain else WARNING, subject=name)


RULES = (
    Rule(
        id="cpu-only-torch",
        severity=ERROR,
        title="CPU-only (or ROCm) torch on a machine with a usable NVIDIA GPU",
        check=check_cpu_only,
        needs=("torch", "driver", "gpus", "hardware"),
        cause="The default PyPI wheel is CPU-only on Windows/macOS, and dependency upgrades (pip install -U ultralytics ...) can re-pull a CPU torch over a +cuXXX one. torch/version.py then has cuda = None.",
        symptoms=(
            "AssertionError: Torch not compiled with CUDA enabled",
            "Ultralytics YOLOv8.1.3 Python-3.10.11 torch-2.1.0+cpu ... Invalid CUDA 'device=0' requested",
            "torch.cuda.is_available() returns False; GPU utilisation 0 %, CPU busy",
        ),
        evidence_used="torch/version.py (cuda, hip) read without importing torch, the GPU list, the driver",
        fix_text="install a CUDA build that fits the driver, every GPU's compute capability and the env's Python: `cudafix fix` prints the one plan (exact command of the env's own pip, or conda in a conda env) and applies it with --apply.",
        sources=("pytorch/pytorch#28111", "facebookresearch/detectron2#460", "ultralytics/ultralytics#1495", "ultralytics/ultralytics#8869",
                 "WongKinYiu/yolov9#235", "X-PLUG/MobileAgent#60"),
    ),
    Rule(
        id="torchvision-mismatch",
        severity=ERROR,
        title="torchvision not built for the installed torch (version or CUDA variant)",
        check=check_torchvision,
        needs=("torch", "torchvision"),
        cause="torchvision wheels pin one torch release (Requires-Dist torch==X.Y.Z) and one CUDA variant; installing or upgrading one of the pair alone breaks its C++ ops.",
        symptoms=(
            "RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA versions. PyTorch has CUDA Version=11.3 and torchvision has CUDA Version=10.2. Please reinstall the torchvision that matches your PyTorch install.",
            "RuntimeError: Couldn't load custom C++ ops. This can happen if your PyTorch and torchvision versions are incompatible, or if you had errors while compiling torchvision from source.",
            "RuntimeError: operator torchvision::nms does not exist",
        ),
        evidence_used="torch/version.py, torchvision version and Requires-Dist pin, local version (+cu113/+cpu) or conda build string, the torch/torchvision pairing table",
        fix_text="install the torchvision paired with the installed torch, from the same CUDA variant's index: `cudafix fix` (the exact command; applied with --apply).",
        sources=("pytorch/vision torchvision/extension.py", "pytorch/vision README (compatibility table)"),
    ),
    Rule(
        id="mixed-cuda-sources",
        severity=WARNING,
        title="Several CUDA runtimes of different majors, or two torch installs, in one env",
        check=check_mixed_sources,
        needs=("torch", "toolkits"),
        cause="pip and conda (or two pip families, nvidia-*-cu11 and -cu12) each bring CUDA libraries; wheels of one library for two majors write the same site-packages/nvidia/<lib> directory, and two torch installs (user site, conda + pip) leave `import torch` picking whichever is first on sys.path.",
        symptoms=(
            "ImportError: .../torch/lib/libtorch_cuda.so: undefined symbol: ncclMemFree",
            "pip list / conda list show one torch, `import torch` loads another",
        ),
        evidence_used="torch distributions on sys.path, pip nvidia-* / cuda-toolkit wheels (their -cuNN suffix or version), conda cudatoolkit / cuda-version / cuda-cudart / pytorch-cuda records",
        fix_text="uninstall the CUDA packages (or the torch) that the imported torch does not use.",
        sources=("rwth-i6/returnn#1802", "pytorch/pytorch#119072", "pytorch/pytorch#119932", "NVIDIA/nccl#1180", "pytorch/pytorch#104259"),
    ),
    Rule(
        id="alloc-conf-invalid",
        severity=ERROR,
        title="PYTORCH_CUDA_ALLOC_CONF has keys or values this torch version rejects",
        check=check_alloc_conf,
        needs=("torch", "env"),
        auto=True,
        cause="Allocator options are added and removed between torch releases (expandable_segments needs 2.1, roundup_bypass_threshold_mb was removed); a value copied from a newer guide makes an older torch raise at its first CUDA allocation, not at import.",
        symptoms=(
            "RuntimeError: Unrecognized CachingAllocator option: expandable_segments",
            "ValueError: Unrecognized key 'foo' in CUDA allocator config.",
            "CachingAllocator option max_split_size_mb too small, must be >= 20",
        ),
        evidence_used="PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF, the option names spelled out in the installed torch's libc10_cuda.so / libc10.so (parser texts tell its generation); without them (old snapshot), cudafix's table of allocator keys per torch release",
        fix_text="automatic when only unknown keys are the problem: they are dropped (the rest of the value is kept); bad values of known keys need the user (exact command).",
        sources=(ALLOC_DOC, "pytorch/pytorch c10/core/AllocatorConfig.cpp", "pytorch/pytorch#96995", "docs/alloc-conf.md"),
    ),
)
