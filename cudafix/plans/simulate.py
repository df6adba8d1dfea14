"""Apply a plan's package target to a snapshot: the state the env would be in afterwards.

The rules then judge that state exactly as they judge a probed one (docs/remedies.md:
applying a plan and re-checking must come back clean).  What the new install will contain is
taken from knowledge, never guessed: the version strings torch and torchvision write into their
``version.py`` (``2.13.0+cu130``), torch's CUDA, and the published arch list of the target wheel
(the fatbin scan of the old torch is dropped, so the arch rules fall back to that list).  The
loader resolutions of the old install are dropped too (they describe files that will be gone).
"""

from __future__ import annotations

import copy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Collection, Dict, Optional, Sequence

from cudafix.knowledge import torch_builds as tb
from cudafix.knowledge.cuda_packages import normalize
from cudafix.model.snapshot import Snapshot

NOT_INSTALLED = "not installed yet: the plan's target (re-check after applying it)"


def _local(version: str, variant: str) -> str:
    return "%s+%s" % (version.split("+", 1)[0], variant)


def apply_target(snap: Snapshot, torch: str, variant: str, companions: Optional[Dict[str, str]] = None,
                 uninstall: Sequence[str] = (), owner: str = "pip", replaced: Collection[str] = ()) -> Snapshot:
    """A NEW snapshot in which the imported torch is ``torch``+``variant`` (X.Y.Z, "cu130"|"cpu"),
    each installed companion (torchvision, torchaudio ...) is at ``companions[name]`` for that
    build, and the ``uninstall``-ed distributions are gone.  ``owner``: "pip" | "conda".
    ``replaced``: PEP 503 names of the packages the plan reinstalls (companions, CUDA packages
    moved to another major): their old extension modules are gone, and the new builds are the
    ones made for the target (their own scan comes with the re-check after applying)."""
    new = copy.deepcopy(snap)
    cuda = None if variant == "cpu" else tb.variant_cuda(variant)
    companions = dict(companions or {})
    t = new.primary_torch
    if t is not None:
        t.version = _local(torch, variant)
        t.dist.version = t.version if owner == "pip" else torch
        t.dist.origin = owner
        t.cuda = cuda
        t.hip = None
        t.git_version = None
        t.arch = []
        t.dist.requires = []  # the new wheel's own pins are not known here
        t.unknown = {"arch": NOT_INSTALLED}
        t.found_via = {"version": "plan target", "cuda": "plan target"}
        if owner == "conda":
            t.dist.conda_build = ("cuda%s" % cuda) if cuda else "cpu"
    if "torchvision" in companions:
        for tv in new.torchvision:
            tv.version = _local(companions["torchvision"], variant)
            tv.dist.version = tv.version if owner == "pip" else companions["torchvision"]
            tv.dist.origin = owner
            tv.cuda = cuda
            tv.requires_torch = "torch==%s" % torch
            tv.dist.requires = [tv.requires_torch]
            tv.unknown = {}
            tv.found_via = {"version": "plan target", "cuda": "plan target"}
            tv.dist.conda_build = None
    for d in getattr(new, "torch_pinned", []):
        if d.name in companions:
            d.version = companions[d.name]
            d.requires = ["torch==%s" % torch]
    gone = set(uninstall)
    if gone:
        new.toolkits.nvidia_wheels = [d for d in new.toolkits.nvidia_wheels if d.name not in gone]
    drop = {normalize(n) for n in replaced} | {"torch"} | {normalize(n) for n in companions}
    new.extensions.modules = [m for m in new.extensions.modules
                              if normalize(m.package or "") not in drop or m.location.startswith("torch extension")]
    new.libraries.resolutions = []
    new.libraries.unknown = dict(new.libraries.unknown, resolutions=NOT_INSTALLED)
    new.source = (snap.source + "; " if snap.source else "") + "plan target applied (cudafix.plans.simulate)"
    return new
