"""The install section of a Snapshot: whether `import torch` finds the libraries torch's own
binaries need in the env's wheels, predicted without importing (cudafix.probes.loader.torchload)."""

from __future__ import annotations

import dataclasses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional

from cudafix.model.record import record


def _field_dict() -> Dict[str, str]:
    return {}


MISSING = "missing"  # no wheel of the family torch requires is installed
OTHER_MAJOR = "other-major"  # a wheel of the family, for another CUDA / soname major
TOO_OLD = "too-old"  # the wheel is there, but lacks symbols torch's libraries import
UNPINNED = "unpinned"  # loads, but is not the version torch's requirement pins (a warning)


@record
class InstallBreak:
    """One cause: a wheel torch's libraries need, missing, of another major, or too old."""

    kind: str  # MISSING | OTHER_MAJOR | TOO_OLD | UNPINNED
    wheel: str  # the distribution torch needs ("nvidia-nvjitlink-cu12")
    requirement: str = ""  # the requirement that says so ("nvidia-nvjitlink-cu12==12.4.127")
    required_by: str = ""  # "torch 2.5.1" | "cuda-toolkit 13.0.3 [cusparse]"
    installed: Optional[str] = None  # "nvidia-nvjitlink-cu12 12.3.101" (what stands in its place)
    soname: str = ""  # the library torch's binaries ask for ("libnvJitLink.so.12")
    needed_by: str = ""  # the object whose DT_NEEDED / symbol import fails (a path)
    symbol: str = ""  # TOO_OLD: the first symbol it lacks ("__nvJitLinkComplete_12_4")
    symbol_version: str = ""  # that symbol's version ("libnvJitLink.so.12")
    found: str = ""  # the file the loader picks for ``soname`` ("" when none)


@record
class TorchImport:
    """`import torch`, simulated: the error it raises (None: it imports) and every broken wheel."""

    probed: bool = False  # False: not probed (an older snapshot) -- rules answer unknown
    error: Optional[str] = None  # the last line of the traceback, e.g. "OSError: libcudnn.so.8: cannot open ..."
    stage: str = ""  # where: "libtorch_global_deps" | "preload" | "torch._C"
    preloader: str = ""  # torch/__init__.py's fallback, read from the installed file (cudafix.probes.loader.torchload)
    breaks: List[InstallBreak] = dataclasses.field(default_factory=list)
    found_via: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
    unknown: Dict[str, str] = dataclasses.field(default_factory=_field_dict)
