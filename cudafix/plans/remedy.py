"""Which official torch build fits this machine: driver, every GPU, and the env's Python.

Rules applied (each one is stated in the recommendation's ``evidence``):
- Python: the release's supported CPython range contains the env's Python.
- Driver: the variant's CUDA <= the driver's CUDA (native), or, for the same CUDA major only,
  the driver is at or above that major's minor-version-compatibility floor (release wheels carry
  SASS, which minor compat runs; never across majors):
  https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
- GPUs: every GPU's CC is covered by SASS of the build's arch list (``arch.fit`` == "sass");
  PTX-only coverage means minutes of JIT and is not recommended (docs/gpu.md, PTX JIT row).
Newest release first; within it a native variant before a minor-compat one, newer CUDA first.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence, Tuple

from cudafix.knowledge import cuda_driver, major_minor, version_tuple
from cudafix.knowledge import torch_builds as tb
from cudafix.knowledge.arch import fit, parse_cc
from cudafix.knowledge.gpus import sm_support

NEW_PLATFORM_RULE = (
    "RN 13.4U1: 'new features and newly enabled platforms require an R615 or later driver that supports them' "
    "(a GPU needs a driver of at least the CUDA release that first supports its SM; https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html)"
)


def driver_gap(driver_cuda: Optional[int], ccs: Sequence[str]) -> List[Tuple[str, str]]:
    """GPUs this driver cannot drive at all: [(cc, first CUDA that supports it)] for CCs whose
    SM first appeared in a CUDA newer than the driver's."""
    gaps = []
    if driver_cuda is None:
        return gaps
    for cc in ccs:
        major, minor = parse_cc(cc)
        row = sm_support(major * 10 + minor)
        if row is not None and cuda_driver.cuda_int(row.first_cuda) > driver_cuda:
            gaps.append((cc, row.first_cuda))
    return gaps


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """A torch build that fits the driver, every GPU and the Python: exact install commands."""

    torch: str  # "2.4.1"
    variant: str  # "cu121"
    torchvision: str  # "0.19.1"
    index_url: str
    pip_command: str
    conda_command: Optional[str]  # only in a conda env and when the pytorch channel has a fitting build
    minor_compat: bool  # runs only under CUDA minor-version compatibility
    evidence: Tuple[str, ...]  # sentences stating the rules applied
    notes: Tuple[str, ...] = ()  # unconfirmed facts the choice rests on
    alternative: Optional["Recommendation"] = None  # closest fit at the env's current torch minor

    @property
    def commands(self) -> Tuple[str, ...]:
        return tuple(c for c in (self.conda_command, self.pip_command) if c)


def _driver_runs(variant_cuda: str, driver_cuda: Optional[int], driver_version: Optional[str]) -> Optional[str]:
    """"native" | "minor-compat" | None (cannot run)."""
    if driver_cuda is None:
        return "native"  # unconstrained; the caller notes the minimum driver
    need = cuda_driver.cuda_int(variant_cuda)
    if need <= driver_cuda:
        return "native"
    major = need // 1000
    if driver_cuda // 1000 != major:
        return None
    floor = cuda_driver.minor_compat_floor(major)
    if floor is None:
        return None
    if driver_version:
        return "minor-compat" if cuda_driver.driver_at_least(driver_version, floor) else None
    # Without the exact version: any driver reporting X.1+ is of a later branch than the X.0 floor.
    return "minor-compat" if driver_cuda % 1000 >= 10 else None


def _covers(arch: Optional[Tuple[List[str], List[str]]], ccs: Sequence[str]) -> Optional[List[str]]:
    """The SASS entry used per GPU, or None if some GPU lacks SASS."""
    if arch is None:
        return None
    sass, _ptx = arch
    used = []
    for cc in ccs:
        f = fit(sass, [], cc)
        if f.kind != "sass":
            return None
        used.append(f.entry or "")
    return used


def _candidates(rel: tb.TorchRelease, driver_cuda, driver_version, ccs):
    """(mode, variant, sass entries) for each variant of ``rel`` that fits, best first."""
    out = []
    for variant in rel.variants:
        mode = _driver_runs(tb.variant_cuda(variant), driver_cuda, driver_version)
        if mode is None:
            continue
        used = _covers(tb.wheel_arch_list(rel.latest, variant), ccs)
        if used is None:
            continue
        out.append((mode, variant, used))
    # native first, then the newest CUDA
    out.sort(key=lambda c: (c[0] != "native", [-x for x in version_tuple(tb.variant_cuda(c[1]))]))
    return out


def _build(rel, mode, variant, used, driver_cuda, driver_version, ccs, python, conda) -> Recommendation:
    vcuda = tb.variant_cuda(variant)
    row = tb.wheel_arch_row(rel.latest, variant)
    evidence = [
        "torch %s supports Python %s-%s; this env has Python %s" % (rel.version, rel.python[0], rel.python[1], python),
    ]
    if driver_cuda is None:
        evidence.append("driver unknown: the %s build needs a driver >= %s (CUDA %s)"
                        % (variant, cuda_driver.min_driver(vcuda) or "?", vcuda))
    elif mode == "native":
        evidence.append("the driver supports CUDA %s; the %s build needs CUDA %s"
                        % (cuda_driver.parse_cuda_int(driver_cuda), variant, vcuda))
    else:
        evidence.append("the driver supports CUDA %s < %s, but CUDA %d.x minor-version compatibility lets it run "
                        "SASS-only builds (driver >= %s); PTX JIT and some newer features are unavailable"
                        % (cuda_driver.parse_cuda_int(driver_cuda), vcuda, cuda_driver.cuda_int(vcuda) // 1000,
                           cuda_driver.minor_compat_floor(cuda_driver.cuda_int(vcuda) // 1000)))
    for cc, entry in zip(ccs, used):
        evidence.append("GPU compute capability %s runs the build's %s SASS (arch list %s)" % (cc, entry, row.arch_list if row else "?"))
    notes = []
    if rel.latest_status not in ("primary", "derived"):
        notes.append("torch %s / torchvision %s: %s (%s)" % (rel.latest, rel.torchvision_latest, rel.latest_status, rel.note or rel.source))
    if row is not None and row.status not in ("primary", "derived"):
        notes.append("arch list of %s %s is %s: %s" % (rel.latest, variant, row.status, row.note or row.source))
    conda_cmd = None
    if conda and rel.pytorch_channel:
        cv = tb.conda_variant(rel.latest, vcuda)
        carch = tb.conda_arch_list(rel.latest, vcuda)
        if cv is not None and _covers(carch, ccs) is not None and mode == "native":
            conda_cmd = tb.conda_command(rel.latest, vcuda, rel.torchvision_latest)
        else:
            notes.append("no pytorch-channel conda build known to fit; use the pip command inside the conda env")
    elif conda:
        notes.append("torch %s is not on the pytorch conda channel (2.5 was the last); use pip inside the conda env" % rel.version)
    return Recommendation(
        torch=rel.latest,
        variant=variant,
        torchvision=rel.torchvision_latest,
        index_url=tb.index_url(variant),
        pip_command=tb.pip_command(rel.latest, variant, rel.torchvision_latest),
        conda_command=conda_cmd,
        minor_compat=(mode == "minor-compat"),
        evidence=tuple(evidence),
        notes=tuple(notes),
    )


def _pin_local_if_same(rec: Recommendation, current_torch: Optional[str]) -> Recommendation:
    """Same X.Y.Z as the installed torch (e.g. 2.13.0+cpu -> 2.13.0 cu130): pin the local version,
    or pip keeps the installed build (see torch_builds.pip_command)."""
    if current_torch and current_torch.split("+")[0] == rec.torch:
        return dataclasses.replace(rec, pip_command=tb.pip_command(rec.torch, rec.variant, rec.torchvision, local=True))
    return rec


def recommend(
    driver_cuda: Optional[int],
    ccs: Sequence[str],
    python: str,
    conda: bool,
    current_torch: Optional[str] = None,
    driver_version: Optional[str] = None,
) -> Optional[Recommendation]:
    """The newest official torch build that fits the driver, every GPU (SASS) and Python.

    ``driver_cuda``: cuDriverGetVersion value (12010), None if unknown (then the driver is not a
    constraint and the evidence names the minimum driver).  ``ccs``: compute capabilities of the
    visible GPUs ("9.0").  None also when the driver predates a GPU (:func:`driver_gap`): then
    only a driver upgrade helps.  ``driver_version`` ("530.30.02") makes the minor-compat floor exact.
    When ``current_torch`` is given and its own minor has a fitting build, that is attached as
    ``alternative`` (the smallest change).  None when no official build fits.
    """
    ccs = [c for c in ccs if c]
    if not major_minor(python):
        return None
    if driver_gap(driver_cuda, ccs):
        return None  # no torch build helps: the driver itself predates the GPU (see driver_gap)
    best: Optional[Recommendation] = None
    for rel in sorted(tb.RELEASES, key=lambda r: version_tuple(r.version), reverse=True):
        if not tb.python_supported(rel, python):
            continue
        cands = _candidates(rel, driver_cuda, driver_version, ccs)
        if cands:
            mode, variant, used = cands[0]
            best = _build(rel, mode, variant, used, driver_cuda, driver_version, ccs, python, conda)
            break
    if best is None:
        return None
    best = _pin_local_if_same(best, current_torch)
    if current_torch:
        cur = tb.release(current_torch)
        if cur is not None and cur.version != tb.release(best.torch).version and tb.python_supported(cur, python):
            cands = _candidates(cur, driver_cuda, driver_version, ccs)
            if cands:
                mode, variant, used = cands[0]
                alt = _build(cur, mode, variant, used, driver_cuda, driver_version, ccs, python, conda)
                best = dataclasses.replace(best, alternative=_pin_local_if_same(alt, current_torch))
    return best
