"""What moves with torch, and the CUDA packages outside torch (docs/remedies.md, "Companions").

Companions: torchvision, every package whose metadata pins torch (``torch_pinned``), and every
package whose extension modules link torch's libraries (``torch_linked``: torchaudio >= 2.9 pins
nothing but its ``lib*.so`` need libtorch).  Each is reinstalled in the release built for the
target torch; the old one's extension modules are gone after the plan (cudafix.plans.simulate).

CUDA packages outside torch (cupy-cudaNNx, jax's cudaNN plugins, onnxruntime-gpu): when the
driver cannot run their CUDA major, the plan changes them to the same release for a major it runs
where cudafix.knowledge.cuda_addons names that wheel; otherwise they are listed ``open`` with the
reason and the command.  They never decide which torch the plan picks.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from typing import Dict, List, Optional, Tuple

from cudafix.knowledge import compat
from cudafix.knowledge import cuda_addons as ka
from cudafix.knowledge.cuda_packages import normalize
from cudafix.model.snapshot import Snapshot
from cudafix.plans.commands import INSTALL, UNINSTALL, Step, installed_companions, plain_version, quote_argv
from cudafix.model import cuda as cudaver


def all_companions(snap: Snapshot) -> List[Tuple[str, str]]:
    """(name, installed version) of every package that moves with torch, torchvision first."""
    out = list(installed_companions(snap))
    seen = {normalize(n) for n, _ in out} | {"torch"}
    for m in snap.extensions.modules:
        name = normalize(m.package or "")
        if m.torch_linked and name and name not in seen and m.package_version and not m.location.startswith("torch extension"):
            seen.add(name)
            out.append((name, m.package_version))
    return out


def companion_variant(snap: Snapshot, name: str, have: str) -> Optional[str]:
    """The build variant ("cu128", "cpu") an installed companion is, None when unknown."""
    m = re.search(r"\+(cu\d+|cpu)$", have or "")
    if m:
        return m.group(1)
    if name == "torchvision" and snap.torchvision:
        tv = snap.torchvision[0]
        if tv.cuda:
            return cudaver.tag(tv.cuda)
    return None


@dataclasses.dataclass(frozen=True)
class AddonMove:
    """A CUDA package outside torch the driver cannot run, and what the plan does about it."""

    name: str  # installed wheel, PEP 503 name
    version: str
    major: int  # its CUDA major (0: not in its name)
    other: str  # the wheel for a major the driver runs ("" when cudafix cannot name it)
    known: bool  # the plan installs ``other`` itself (its name and release are cited)
    why: str = ""

    @property
    def to(self) -> Optional[str]:
        return self.other if self.known else None


def _addon_packages(snap: Snapshot) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for m in snap.extensions.modules:
        name = normalize(m.package or "")
        if name and m.package_version and (name, m.package_version) not in out:
            if ka.family_of(name) or name in ka.UNNAMED:
                out.append((name, m.package_version))
    return out


MINOR_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"


def addon_moves(snap: Snapshot, driver_cuda: Optional[int]) -> List[AddonMove]:
    """CUDA packages outside torch whose CUDA major the driver cannot run (driver_cuda: 12040)."""
    if driver_cuda is None:
        return []
    dmajor = cudaver.major(driver_cuda)
    # The newest major the driver runs: these packages carry their own CUDA runtime (cupy links it
    # statically, jax's plugins load their own nvidia-* wheels), so they need not follow torch's.
    floor = compat.minor_floor(dmajor) or "?"
    drv = compat.Driver(driver_cuda, snap.driver.kernel_version or snap.driver.libcuda_version)
    out: List[AddonMove] = []
    for name, ver in _addon_packages(snap):
        fam = ka.family_of(name)
        if fam is None:
            # Its CUDA major is not in its name: judged only by what the rules say about its modules.
            continue
        family, major, template = fam
        # Its own runtime is of CUDA major.x (any minor): it stays when the driver runs that major.
        if compat.runtime(drv, major * 1000).runs:
            continue
        reason = "built for CUDA %d; this driver runs CUDA <= %d.%d (CUDA %d.x needs a driver >= %s: %s)" % (
            major, dmajor, (driver_cuda % 1000) // 10, dmajor, floor, MINOR_DOC)
        other = template % dmajor
        known = dmajor in family.majors and family.same_version and family.status == ka.PRIMARY
        out.append(AddonMove(name, ver, major, other, known, reason + "; " + (
            "%s is the same release for CUDA %d (%s)" % (other, dmajor, family.source) if known else family.note)))
    return out


def open_lines(snap: Snapshot, moves: List[AddonMove]) -> List[str]:
    """One open line per project (jax's plugin and pjrt wheels move together), with the command."""
    py = shlex.quote(snap.python.executable or "python")
    groups: Dict[str, List[AddonMove]] = {}
    for m in moves:
        if not m.known:
            groups.setdefault(m.name.split("-cuda")[0], []).append(m)
    out = []
    for ms in groups.values():
        cmd = "%s -m pip uninstall -y %s && %s -m pip install %s" % (
            py, " ".join(m.name for m in ms), py, " ".join(shlex.quote("%s==%s" % (m.other, plain_version(m.version))) for m in ms))
        out.append("%s: %s — %s" % (", ".join("%s %s" % (m.name, m.version) for m in ms), ms[0].why, cmd))
    return out


def addon_steps(snap: Snapshot, moves: List[AddonMove]) -> List[Step]:
    """Uninstall the old-major wheels, then install their other-major builds (one step each)."""
    known = [m for m in moves if m.known]
    if not known:
        return []
    py = snap.python.executable or "python"
    u = (py, "-m", "pip", "uninstall", "-y") + tuple(m.name for m in known)
    i = (py, "-m", "pip", "install") + tuple("%s==%s" % (m.other, plain_version(m.version)) for m in known)
    return [Step(UNINSTALL, quote_argv(u), u, why="CUDA %s builds this driver cannot run" % "/".join(sorted({str(m.major) for m in known}))),
            Step(INSTALL, quote_argv(i), i, why="the same releases built for a CUDA major this driver runs: %s" % ", ".join(m.other for m in known))]
