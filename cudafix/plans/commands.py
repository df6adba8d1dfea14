"""The exact commands of a plan: the env's own pip, or conda on the env's prefix, and POSIX shell
lines for environment edits (cudafix.plans.planner decides *what*; this module says *how*).

pip: the PyTorch index with local-version pins (PEP 440 lets `torch==2.13.0` match an installed
`2.13.0+cpu`, so only `==2.13.0+cu130` makes pip switch variants), in the style of the release's
era (`-f torch_stable.html` <= 1.10, `--extra-index-url` 1.11-1.13, `--index-url` 2.0+); plain
PyPI when the target is the variant PyPI itself serves for that release on Linux x86_64 (what
https://pytorch.org/get-started/locally/ prints for the default variant) and no same-version
switch is needed.  conda: `conda install -p <prefix>`, pytorch/nvidia channels up to 2.5 (the last
release there, pytorch/pytorch#138506), conda-forge after.
"""

from __future__ import annotations

import re
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence, Tuple

from cudafix.knowledge import version_tuple
from cudafix.knowledge import torch_builds as tb
from cudafix.model.fixes import PREPEND_PATH, REMOVE_PATH, SET, UNSET
from cudafix.model.record import record
from cudafix.model.snapshot import REPORT_SOURCE, Snapshot

INSTALL = "install"
UNINSTALL = "uninstall"
SHELL = "shell"
DRIVER = "driver"
OTHER = "other"

@record(frozen=True)
class Step:
    """One thing to run, in order.  ``argv`` empty: advice only (a shell line, a driver upgrade)."""

    kind: str  # INSTALL | UNINSTALL | SHELL | DRIVER | OTHER
    text: str  # the exact line to run, as printed
    argv: Tuple[str, ...] = ()
    shell: str = ""  # SHELL steps: the shells the line is valid in
    root: bool = False  # needs root / sudo
    why: str = ""



def quote_argv(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def plain_version(v: Optional[str]) -> str:
    return (v or "").split("+", 1)[0].strip()



def installed_companions(snap: Snapshot) -> List[Tuple[str, str]]:
    """(name, installed version) of torchvision and every other torch-pinned add-on."""
    out: List[Tuple[str, str]] = []
    if snap.torchvision:
        tv = snap.torchvision[0]
        out.append(("torchvision", tv.full_version))
    for d in getattr(snap, "torch_pinned", []) or []:
        out.append((d.name, d.version))
    return out



def owner_of(snap: Snapshot) -> str:
    t = snap.primary_torch
    if t is not None and t.dist.origin == "conda" and (snap.python.conda_prefix or snap.source == REPORT_SOURCE):
        return "conda"  # a pasted report names conda's records but not the prefix: the active env's conda
    return "pip"


# cuda-toolkit's extras -> the wheel each pulls in (NVIDIA's cuda-toolkit metapackage on PyPI)
_TOOLKIT_EXTRAS = {"cudart": "nvidia-cuda-runtime", "cupti": "nvidia-cuda-cupti", "nvrtc": "nvidia-cuda-nvrtc"}


def stale_nvidia(snap: Snapshot, variant: str) -> List[str]:
    """pip nvidia-* wheels the installed torch requires for another CUDA major than the target's:
    pip leaves them behind, and two majors in one env is its own problem (mixed-cuda-sources)."""
    t = snap.primary_torch
    if t is None or not t.cuda or variant == "cpu" or owner_of(snap) != "pip":
        return []
    old_major = version_tuple(t.cuda)[0]
    if version_tuple(tb.variant_cuda(variant))[0] == old_major:
        return []
    required = set()
    for req in t.dist.requires:
        if ";" in req and "extra" in req.split(";", 1)[1]:
            continue
        m = re.match(r"^\s*(nvidia-[A-Za-z0-9_.-]+|cuda-toolkit|cuda-bindings)\s*(\[([^\]]*)\])?", req)
        if not m:
            continue
        required.add(re.sub(r"[-_.]+", "-", m.group(1)).lower())
        # cuda-toolkit[cublas,cudart,...] (torch >= 2.14 wheels) pulls nvidia-<component> wheels
        for extra in (m.group(3) or "").split(","):
            extra = extra.strip().lower()
            if extra:
                required.add(_TOOLKIT_EXTRAS.get(extra, "nvidia-" + extra))
    return sorted(d.name for d in snap.toolkits.nvidia_wheels if d.name in required)


def pip_steps(snap: Snapshot, torch_v: str, variant: str, comps: Dict[str, str], torch_changes: bool,
               uninstall: Sequence[str]) -> Tuple[List[Step], List[str]]:
    py = snap.python.executable or "python"
    rel = tb.release(torch_v)
    t = snap.primary_torch
    notes: List[str] = []
    installed = {"torch": t.full_version if t else None}
    installed.update(dict(installed_companions(snap)))
    # PyPI serves the release's default CUDA variant (Linux x86_64) under the plain version: the
    # install pytorch.org prints for it has no index.  A same-version switch needs the local pin,
    # which only the PyTorch index has (PEP 440: `==2.13.0` is met by an installed 2.13.0+cpu).
    same_base_switch = any(plain_version(installed.get(n)) == plain_version(v) and installed.get(n) != v and
                           (n != "torch" or torch_changes)
                           for n, v in [("torch", torch_v)] + list(comps.items()))
    pypi = (rel is not None and variant == rel.pypi_default and snap.python.platform in ("", "linux-x86_64")
            and not same_base_switch)
    specs: List[str] = []
    for name, v in [("torch", torch_v)] + sorted(comps.items()):
        changes = name != "torch" or torch_changes
        if pypi or not changes:
            specs.append("%s==%s" % (name, v))  # unchanged torch: plain pin, met by the installed build
        else:
            specs.append("%s==%s+%s" % (name, v, variant))
    style = rel.pip_style if rel else "index"
    if pypi:
        extra: List[str] = []
        notes.append("%s is the build PyPI serves for torch %s on Linux x86_64 (its default CUDA variant): "
                     "plain pip, no extra index" % (variant, torch_v))
    elif style == "find-links":
        extra = ["-f", tb.INDEX_BASE + "torch_stable.html"]
    elif style == "extra-index":
        extra = ["--extra-index-url", tb.index_url(variant)]
    else:
        extra = ["--index-url", tb.index_url(variant)]
    argv = (py, "-m", "pip", "install") + tuple(specs) + tuple(extra)
    steps = [Step(INSTALL, quote_argv(argv), argv, why="install %s" % ", ".join(specs))]
    if uninstall:
        u = (py, "-m", "pip", "uninstall", "-y") + tuple(uninstall)
        steps.append(Step(UNINSTALL, quote_argv(u), u, why="the CUDA %s libraries of the replaced torch (pip leaves them behind)"
                          % version_tuple(t.cuda)[0] if t and t.cuda else ""))
    return steps, notes


def conda_steps(snap: Snapshot, torch_v: str, variant: str, comps: Dict[str, str]) -> Tuple[List[Step], List[str]]:
    prefix = snap.python.conda_prefix or ""
    where = ("-p", prefix) if prefix else ()  # no prefix (a pasted report): the activated env
    rel = tb.release(torch_v)
    t = snap.primary_torch
    channel = (t.dist.conda_channel or "") if t else ""
    cuda = None if variant == "cpu" else tb.variant_cuda(variant)
    specs = ["pytorch==%s" % torch_v] + ["%s==%s" % (n, v) for n, v in sorted(comps.items())]
    notes: List[str] = []
    cv = tb.conda_variant(torch_v, cuda) if cuda else None
    if rel is not None and rel.pytorch_channel and "conda-forge" not in channel and (cuda is None or cv is not None):
        if cuda is None:
            specs += ["cpuonly"]
            chans = ["pytorch"]
        else:
            specs += ["%s=%s" % (cv.package, cv.cuda)]
            chans = list(cv.channels)
        argv = ("conda", "install") + where + tuple(specs) + tuple(x for c in chans for x in ("-c", c))
    else:
        # conda-forge: the CUDA build is chosen by the build string and the cuda-version pin.
        specs[0] = "pytorch=%s=%s*" % (torch_v, "cuda" if cuda else "cpu")
        if cuda:
            specs.append("cuda-version=%s" % cuda)
        argv = ("conda", "install") + where + ("-c", "conda-forge") + tuple(specs)
        notes.append("conda-forge builds its own pytorch: which versions and CUDA builds it has, and their arch "
                     "lists, are not in cudafix's table (unconfirmed); conda refuses the command if the build does not exist")
    return [Step(INSTALL, quote_argv(argv), argv, why="install " + ", ".join(specs))], notes



def env_line(op) -> Optional[str]:
    """An env edit as one POSIX-shell line (sh, bash, zsh, dash)."""
    if not shlex.quote(op.name) == op.name:
        return None
    if op.op == SET:
        return "export %s=%s" % (op.name, shlex.quote(op.value or ""))
    if op.op == UNSET:
        return "unset %s" % op.name
    if op.op == PREPEND_PATH:
        return 'export %s=%s"${%s:+:$%s}"' % (op.name, shlex.quote(op.value or ""), op.name, op.name)
    if op.op == REMOVE_PATH:
        return None  # no portable one-liner; cudafix applies these itself (auto fixes)
    return None
