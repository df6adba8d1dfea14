"""Which official torch builds could fit this machine, ranked smallest change first.

The planner (:mod:`cudafix.plans.planner`) takes these candidates in order and keeps the first
one that the rules themselves find clean once applied to the snapshot
(:mod:`cudafix.plans.simulate`).  This module only prunes what certainly cannot work and orders
the rest; it states, for each candidate, the facts it rests on.

Pruning (each stated in the candidate's ``evidence``):
- Python: the release's supported CPython range holds the env's Python.
- Driver: the variant's CUDA <= the driver's CUDA (*native*), or the same CUDA major above the
  minor-version-compatibility floor (*minor-compat*: valid when every GPU runs SASS, since minor
  compatibility cannot JIT newer PTX; the driver-minor-compat rule is then a note, otherwise a
  warning that rules the candidate out).  NVIDIA, CUDA Compatibility guide.
- GPUs: every visible GPU runs SASS of the build's arch list, or PTX (the arch-ptx-jit rule warns
  about that JIT, so the planner never keeps one either).

Order: the installed torch version in another variant first, then the nearest release (by
release count; a newer one before an older one at the same distance); within a release, native
before minor-compat, the installed CUDA major before another, then the newest CUDA.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Sequence, Tuple

from cudafix.knowledge import compat, cuda_driver, major_minor, version_tuple
from cudafix.knowledge import torch_builds as tb
from cudafix.knowledge.arch import fit, parse_cc
from cudafix.knowledge.gpus import sm_support
from cudafix.model.record import record
from cudafix.model import cuda as cudaver

NEW_PLATFORM_RULE = (
    "RN 13.4U1: 'new features and newly enabled platforms require an R615 or later driver that supports them' "
    "(a GPU needs a driver of at least the CUDA release that first supports its SM; https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html)"
)
NATIVE = "native"
MINOR_COMPAT = "minor-compat"
NO_DRIVER = "driver-unknown"  # the driver is not known: it does not constrain the choice


def driver_gap(driver_cuda: Optional[int], ccs: Sequence[str]) -> List[Tuple[str, str]]:
    """GPUs this driver cannot drive at all: [(cc, first CUDA that supports it)] for CCs whose
    SM first appeared in a CUDA newer than the driver's (a newer GPU needs a newer driver,
    whatever torch is installed)."""
    gaps: List[Tuple[str, str]] = []
    if driver_cuda is None:
        return gaps
    for cc in ccs:
        major, minor = parse_cc(cc)
        row = sm_support(major * 10 + minor)
        if row is not None and cudaver.version_int(row.first_cuda) > driver_cuda:
            gaps.append((cc, row.first_cuda))
    return gaps


@record(frozen=True)
class Candidate:
    """One official torch build: version + variant, how it runs on this driver and these GPUs."""

    torch: str  # "2.13.0"
    variant: str  # "cu130" | "cpu"
    mode: str  # NATIVE | MINOR_COMPAT | NO_DRIVER ("cpu": NATIVE)
    arch_list: str  # TORCH_CUDA_ARCH_LIST of the wheel ("" for cpu)
    gpu_fit: Tuple[Tuple[str, str, str], ...]  # (cc, "sass"|"ptx", entry) per visible GPU
    evidence: Tuple[str, ...]
    notes: Tuple[str, ...] = ()  # facts of lower status the choice rests on
    distance: int = 0  # releases away from the installed torch (0: same X.Y)

    @property
    def cuda(self) -> Optional[str]:
        return None if self.variant == "cpu" else tb.variant_cuda(self.variant)

    @property
    def label(self) -> str:
        return "torch %s+%s" % (self.torch, self.variant)


# A knowledge row's status (cudafix/knowledge/__init__.py) as a plan note says it to a user.
_PLAIN_STATUS = {
    "secondary": "not on PyTorch's own pages, only in third-party copies",
    "inferred": "inferred by cudafix, not published by PyTorch",
    "unconfirmed": "not verified",
}


def _public(source: str) -> str:
    """A row's source as users read it."""
    return source.strip() or "cudafix's release table"


def driver_mode(variant_cuda: str, driver_cuda: Optional[int], driver_version: Optional[str]) -> Optional[str]:
    """NATIVE | MINOR_COMPAT | NO_DRIVER, or None when the driver cannot run that CUDA (or the
    compatibility model cannot tell: a plan never rests on an unknown)."""
    if driver_cuda is None:
        return NO_DRIVER
    a = compat.runtime(compat.Driver(driver_cuda, driver_version), cudaver.version_int(variant_cuda))
    if not a.runs:
        return None
    return NATIVE if a.how == compat.NATIVE else MINOR_COMPAT


def _gpu_fit(arch: Optional[Tuple[List[str], List[str]]], ccs: Sequence[str]) -> Optional[Tuple[Tuple[str, str, str], ...]]:
    if arch is None:
        return None
    sass, ptx = arch
    out = []
    for cc in ccs:
        f = fit(sass, ptx, cc)
        if f.kind not in ("sass", "ptx"):
            return None
        out.append((cc, f.kind, f.entry or ""))
    return tuple(out)


def candidate(torch_v: str, variant: str, driver_cuda: Optional[int], driver_version: Optional[str], ccs: Sequence[str],
              python: str, distance: int = 0) -> Optional[Candidate]:
    """One build as a Candidate, or None when it does not exist or cannot run here."""
    rel = tb.release(torch_v)
    if rel is None or not tb.variant_exists(torch_v, variant):
        return None
    ev = ["torch %s supports Python %s-%s; the env has Python %s" % (rel.version, rel.python[0], rel.python[1], python)]
    notes: List[str] = []
    if variant == "cpu":
        return Candidate(torch_v, variant, NATIVE, "", (), tuple(ev), (), distance)
    vcuda = tb.variant_cuda(variant)
    mode = driver_mode(vcuda, driver_cuda, driver_version)
    if mode is None:
        return None
    row = tb.wheel_arch_row(torch_v, variant)
    fits = _gpu_fit(tb.wheel_arch_list(torch_v, variant), ccs)
    if row is None or fits is None:
        return None
    if mode == NO_DRIVER:
        ev.append("the driver is unknown: the %s build needs a driver >= %s (CUDA %s)" % (variant, cuda_driver.min_driver(vcuda) or "?", vcuda))
    elif mode == NATIVE:
        ev.append("runs natively: the driver supports CUDA %s >= %s, the %s build's CUDA" % (
            cudaver.version_text(driver_cuda), vcuda, variant))
    else:
        ev.append("only under minor-version compatibility: the driver supports CUDA %s < %s" % (cudaver.version_text(driver_cuda), vcuda))
    for cc, kind, entry in fits:
        ev.append("compute capability %s runs the wheel's %s %s (arch list %s)" % (cc, entry, "SASS" if kind == "sass" else "PTX through the JIT", row.arch_list))
    if row.status not in ("primary", "derived"):
        notes.append("which GPUs torch %s+%s has code for is %s (%s)" % (
            torch_v, variant, _PLAIN_STATUS.get(row.status, row.status), _public(row.note or row.source)))
    if rel.latest_status not in ("primary", "derived") and torch_v == rel.latest:
        notes.append("torch %s with torchvision %s: that pairing is %s (%s)" % (
            rel.latest, rel.torchvision_latest, _PLAIN_STATUS.get(rel.latest_status, rel.latest_status), _public(rel.note or rel.source)))
    return Candidate(torch_v, variant, mode, row.arch_list, fits, tuple(ev), tuple(notes), distance)


def candidates(
    driver_cuda: Optional[int],
    ccs: Sequence[str],
    python: str,
    current_torch: Optional[str] = None,
    current_cuda: Optional[str] = None,
    driver_version: Optional[str] = None,
    want_cuda: bool = True,
) -> List[Candidate]:
    """Every official build that may fit, best first (see the module docstring for the order).

    ``driver_cuda``: cuDriverGetVersion value (12040), None if unknown; ``ccs``: compute
    capabilities of the visible GPUs; ``current_torch``: the installed X.Y.Z (its own patch is
    kept when the plan stays on its release); ``want_cuda``: False on a machine with no NVIDIA GPU
    (then only CPU builds are listed).  Empty when the driver predates a GPU (:func:`driver_gap`).
    """
    ccs = [c for c in ccs if c]
    if not major_minor(python) or driver_gap(driver_cuda, ccs):
        return []
    releases = sorted(tb.RELEASES, key=lambda r: version_tuple(r.version))
    cur_mm = major_minor(current_torch) if current_torch else ()
    cur_idx = next((i for i, r in enumerate(releases) if major_minor(r.version) == cur_mm), None)
    cur_major = major_minor(current_cuda)[0] if current_cuda and major_minor(current_cuda) else None
    out: List[Candidate] = []
    for i, rel in enumerate(releases):
        if not tb.python_supported(rel, python):
            continue
        same = cur_idx is not None and i == cur_idx
        torch_v = current_torch if same and current_torch and len(version_tuple(current_torch)) >= 3 else rel.latest
        torch_v = "%d.%d.%d" % version_tuple(torch_v)[:3]
        distance = abs(i - cur_idx) if cur_idx is not None else len(releases) - i
        variants = ("cpu",) if not want_cuda else rel.variants
        for variant in variants:
            c = candidate(torch_v, variant, driver_cuda, driver_version, ccs, python, distance)
            if c is not None:
                out.append(c)

    def key(c: Candidate):
        cuda = version_tuple(c.cuda) if c.cuda else (0,)
        return (
            c.distance,
            -version_tuple(c.torch)[1] - 100 * version_tuple(c.torch)[0],  # newer release first at a tie
            c.mode == MINOR_COMPAT,
            cur_major is not None and bool(c.cuda) and cuda[0] != cur_major,
            tuple(-x for x in cuda),
        )

    out.sort(key=key)
    return out
