"""Broken torch installs: the nvidia-* wheels torch's own binaries need, missing, of another major or
too old (what lock-file installers, `--no-deps`, a partial uninstall or another package moving a
shared wheel leave behind).  Facts: cudafix.probes.loader.torchload (the loads of `import torch`
simulated from the binaries, the wheels from torch's Requires-Dist)."""

from __future__ import annotations

import os
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List

from cudafix.model.findings import ERROR, WARNING, Outcome, Rule
from cudafix.model.fixes import Fix
from cudafix.model.install import MISSING, OTHER_MAJOR, TOO_OLD, UNPINNED, InstallBreak
from cudafix.model.snapshot import Snapshot
from cudafix.rules._util import ok, problem, unknown

LD_SO = "https://man7.org/linux/man-pages/man8/ld.so.8.html"
REQS_DOC = "https://packaging.python.org/en/latest/specifications/dependency-specifiers/"
TORCH_INIT = "https://github.com/pytorch/pytorch/blob/main/torch/__init__.py (_load_global_deps, _preload_cuda_deps)"


def _torch(snap: Snapshot) -> str:
    t = snap.primary_torch
    return "torch %s" % t.full_version if t else "torch"


def install_fix(snap: Snapshot, breaks: List[InstallBreak]) -> Fix:
    """One pip command for every wheel torch needs: each spelled as its pin (a too-old wheel that
    satisfies a loose pin gets ``>installed``), so pip installs it rather than saying "Requirement
    already satisfied"; never a source build (``--only-binary``: NVIDIA's wheels have no sdist)."""
    specs = []
    for b in breaks:
        if b.requirement and b.requirement not in specs:
            specs.append(b.requirement)
    # another major's wheel holding the very file torch loads (nvidia-nccl-cu12's nvidia/nccl/lib/libnccl.so.2
    # where torch 2.14 wants nvidia-nccl-cu13's): removed first, or its later uninstall deletes the new file
    gone = sorted({b.installed.split(" ", 1)[0] for b in breaks if b.kind == OTHER_MAJOR and b.found and b.installed})
    cmds = ("pip uninstall -y %s" % " ".join(shlex.quote(g) for g in gone),) if gone else ()
    cmds += ("pip install --only-binary=:all: %s" % " ".join(shlex.quote(s) for s in specs),)
    return Fix(summary="install the CUDA wheels %s requires (%s)%s" % (
        _torch(snap), ", ".join(specs), "; first remove %s, which ships the same file" % ", ".join(gone) if gone else ""),
        commands=cmds)


def _what(b: InstallBreak) -> str:
    if b.kind == MISSING:
        return "%s is not installed" % b.wheel
    if b.kind == OTHER_MAJOR:
        return "%s stands where %s should be (another major)" % (b.installed or "another wheel", b.wheel)
    return "%s is older than torch's libraries need: %s imports %s%s, which it does not define" % (
        b.installed or b.wheel, os.path.basename(b.needed_by) or "torch", b.symbol,
        " (version %s)" % b.symbol_version if b.symbol_version else "")


def check_torch_install(snap: Snapshot) -> Iterable[Outcome]:
    ti = snap.torch_import
    subject = "torch-install"
    t = snap.primary_torch
    if t is None:
        return [ok("no torch installed", subject=subject)]
    if not t.cuda and not t.hip and t.version:
        return [ok("%s is a CPU build: it loads no CUDA library" % _torch(snap), subject=subject)]
    if not ti.probed:
        return [unknown("`import torch` was not simulated in this snapshot", subject=subject)]
    if ti.unknown.get("import"):
        return [unknown("whether `import torch` finds its libraries is unknown", ti.unknown["import"], subject=subject)]
    broken = [b for b in ti.breaks if b.kind in (MISSING, OTHER_MAJOR, TOO_OLD)]
    if not broken:
        if ti.error:
            return [unknown("`import torch` fails (simulated: %s) for a cause no wheel explains" % ti.error, subject=subject)]
        return [ok("`import torch` finds every library torch's binaries load (simulated, %s)" % ti.found_via.get("preloader", ""),
                   subject=subject)]
    fix = install_fix(snap, broken)
    out: List[Outcome] = []
    for i, b in enumerate(broken):
        ev = ["%s requires %s (%s)" % (b.required_by or _torch(snap), b.requirement, REQS_DOC)]
        if not b.soname:  # required, not installed, and no library of it is loaded by `import torch`
            out.append(problem("%s: %s (`import torch` does not load it: the first use of its library fails)" % (
                _torch(snap), _what(b)), ev, fix=fix, severity=WARNING, subject=b.wheel))
            continue
        if b.kind == TOO_OLD:
            ev.append("%s imports %s%s; the loader binds every symbol at load (RTLD_NOW): %s (%s) lacks it" % (
                b.needed_by, b.symbol, ", version %s" % b.symbol_version if b.symbol_version else "", b.found, b.installed or "?"))
        else:
            ev.append("%s needs %s (DT_NEEDED of %s): found by no step of the loader's search (%s) nor by torch's "
                      "preloader on sys.path (%s)" % (_torch(snap), b.soname, b.needed_by or "torch", LD_SO, ti.preloader))
        if ti.error:
            msg = "%s: %s: `import torch` fails with '%s'" % (_torch(snap), _what(b), ti.error) if i == 0 else \
                "%s: %s (fails at `import torch` once the error above is fixed)" % (_torch(snap), _what(b))
            out.append(problem(msg, ev, fix=fix, severity=ERROR, subject=b.wheel))
        else:  # the loads at import succeed (another copy is found first): a later load fails
            out.append(problem("%s: %s (`import torch` still works: another copy of %s is found)" % (_torch(snap), _what(b), b.soname),
                               ev, fix=fix, severity=WARNING, subject=b.wheel))
    return out


def check_torch_wheel_pins(snap: Snapshot) -> Iterable[Outcome]:
    ti = snap.torch_import
    subject = "torch-wheels"
    t = snap.primary_torch
    if t is None:
        return [ok("no torch installed", subject=subject)]
    if not t.cuda and not t.hip and t.version:
        return [ok("%s is a CPU build: it requires no CUDA wheel" % _torch(snap), subject=subject)]
    if not ti.probed:
        return [unknown("`import torch` was not simulated in this snapshot", subject=subject)]
    loose = [b for b in ti.breaks if b.kind == UNPINNED]
    if not loose:
        return [ok("every installed nvidia-* wheel torch requires is the version it pins", subject=subject)]
    fix = install_fix(snap, loose)
    return [problem("%s is installed; %s requires %s (`import torch` works: its libraries find every symbol they import)" % (
        b.installed, b.required_by, b.requirement), ["%s (%s)" % (b.required_by, REQS_DOC)], fix=fix, severity=WARNING,
        subject=b.wheel) for b in loose]


RULES = (
    Rule(
        id="torch-install-broken",
        severity=ERROR,
        title="torch's own libraries need an nvidia-* wheel that is missing, of another major, or too old",
        check=check_torch_install,
        cause="pip wheels of torch >= 1.13 load CUDA's libraries from NVIDIA's wheels (nvidia-*-cuNN, or cuda-toolkit[...] "
              "extras since CUDA 13), found through torch's RPATH and, after a failed load, torch/__init__.py's preloader "
              "searching sys.path. A lock file, `--no-deps`, a partial uninstall or another package moving a shared wheel "
              "leaves one missing, of another major, or older than the symbols torch's libraries import: `import torch` fails.",
        symptoms=("ValueError: libcublas.so.*[0-9] not found in the system path [...]",
                  "OSError: libcudnn.so.8: cannot open shared object file: No such file or directory",
                  "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory",
                  "ImportError: .../nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12",
                  "ImportError: .../torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
                  "UnboundLocalError: local variable 'cublas_path' referenced before assignment"),
        evidence_used="DT_NEEDED, DT_RPATH/RUNPATH and versioned symbol imports of torch's libraries and the wheels' libraries "
                      "(the loads of `import torch` simulated in order, torch/__init__.py's preloader read from the installed "
                      "file), torch's and cuda-toolkit's Requires-Dist (extras included), the wheels' RECORD files",
        fix_text="install the wheels torch pins (exact pip command, one per plan); never a source build",
        sources=(TORCH_INIT, LD_SO, REQS_DOC, "docs/broken-installs.md"),
        severity_basis="error: measured, `import torch` raises on torch 1.13.1, 2.0.1, 2.4.1, 2.5.1, 2.9.1 and 2.14.1 "
                       "(docs/broken-installs.md); a warning where the loads at import still succeed through another copy.",
        needs=("torch", "torch_import"),
    ),
    Rule(
        id="torch-wheel-unpinned",
        severity=WARNING,
        title="An nvidia-* wheel torch requires is installed at a version torch does not pin, yet imports",
        check=check_torch_wheel_pins,
        cause="torch (or cuda-toolkit for its extras) pins the CUDA wheels it was built and tested with; another version "
              "whose libraries still define every symbol torch imports loads, but is not what torch was tested with.",
        symptoms=("pip check: ... has requirement nvidia-...==X, but you have nvidia-... Y",),
        evidence_used="torch's and cuda-toolkit's Requires-Dist (extras included) against the installed wheels' versions",
        fix_text="install the pinned version (exact pip command)",
        sources=(REQS_DOC,),
        severity_basis="warning: `import torch` works (simulated and measured with nvidia-nvjitlink 13.0.39 under torch 2.14.1).",
        needs=("torch", "torch_import"),
    ),
)
