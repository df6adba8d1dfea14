"""torch's companions (torchvision, torchaudio): where torch itself cannot run on a GPU, their
failure there is the same cause -- the torch build the plan replaces brings its own -- so the
extension rules leave them to torch's finding, which names them as its evidence (issue 34)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List

from cudafix.knowledge import compat
from cudafix.model.snapshot import Snapshot
from cudafix.rules._torchfit import _fits, _gpu_cc
from cudafix.rules._util import gpu_label

# Packages built and released with torch (one CUDA variant per torch build).
TORCH_COMPANIONS = ("torchvision", "torchaudio")


def torch_fails_on(snap: Snapshot) -> Dict[int, str]:
    """GPU index -> the torch finding that already says torch cannot run there (driver-too-old:
    the driver cannot run torch's CUDA runtime; arch-unsupported: no code for it)."""
    if compat.runtime(compat.driver_of(snap), compat.torch_cuda(snap)).fails:
        return {g.index: "driver-too-old" for g in snap.visible_gpus()}
    _t, _covs, fits, _blocked = _fits(snap)
    return {f.gpu.index: "arch-unsupported" for f in fits if f.kind == "none"}


def companion_evidence(snap: Snapshot, rule: str) -> List[str]:
    """Evidence for torch's ``rule`` finding: its companions that fail or stall on the same GPUs."""
    if not snap.extensions.scanned:
        return []
    fails = {i for i, r in torch_fails_on(snap).items() if r == rule}
    if not fails:
        return []
    drv = compat.driver_of(snap)
    groups: Dict[str, List] = {}
    for m in snap.extensions.modules:
        if m.package in TORCH_COMPANIONS and (m.sass or m.ptx):
            groups.setdefault(m.package, []).append(m)
    out: List[str] = []
    for pkg, group in groups.items():
        hits: List[str] = []
        for g in snap.visible_gpus():
            cc, _note = _gpu_cc(g)
            if g.index not in fails or cc is None:
                continue
            for m in group:
                a = compat.device_code(drv, cc, m.sass, m.ptx, m.ptx_isa)
                text = "%s on %s" % (a.how, gpu_label(g))
                if a.how != compat.SASS and text not in hits:
                    hits.append(text)
        if hits:
            files = "%d files" % len(group) if len(group) > 1 else os.path.basename(group[0].path)
            label = "%s %s" % (pkg, group[0].package_version) if group[0].package_version else pkg
            out.append("%s (%s), built with this torch: %s; the torch build that fixes this brings its own" % (
                label, files, ", ".join(hits)))
    return out
