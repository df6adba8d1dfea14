"""Official PyTorch releases (Linux x86_64): CUDA variants, torchvision, Python, arch lists
(the pytorch/builder, pytorch/pytorch and pytorch/test-infra build scripts named per row).

Arch lists are TORCH_CUDA_ARCH_LIST strings: "X.Y" = SASS sm_XY, "X.Y+PTX" = also PTX compute_XY.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

from cudafix.knowledge import (
    INFERRED,
    PRIMARY,
    SECONDARY,
    UNCONFIRMED,
    major_minor,
    version_tuple,
)
from cudafix.knowledge.arch import parse_arch_list
from cudafix.model.record import record
from cudafix.model import cuda as cudaver

# PyTorch's own wheel index, one sub-index per variant (".../whl/cu130", ".../whl/cpu"); the
# install commands of https://pytorch.org/get-started/locally/ and
# https://pytorch.org/get-started/previous-versions/ use it.  The one place cudafix names it.
INDEX_BASE = "https://download.pytorch.org/whl/"

S_1A = (
    "https://github.com/pytorch/pytorch/blob/main/RELEASE.md (Release Compatibility Matrix); "
    "https://github.com/pytorch/vision#installation (torch/torchvision/Python table)"
)
S_SITE = "https://github.com/pytorch/pytorch.github.io/blob/e3f009bbc0d7509ed5c85b633313ec72aa2d1a40/_get_started/previous-versions.md; " + S_1A
S_TESTINFRA = "https://github.com/pytorch/test-infra/blob/main/tools/scripts/generate_binary_build_matrix.py (CUDA_ARCHES_DICT); " + S_1A
S_LOCAL = "local artifact: torch-*.dist-info/METADATA + torch/version.py of the test venvs (tests/make_venvs.sh)"
S_B_BUILD = "https://github.com/pytorch/builder/blob/release/1.10/manywheel/build.sh (also release/1.9, lts/release/1.8)"
S_B_CUDA = "https://github.com/pytorch/builder/blob/release/2.5/manywheel/build_cuda.sh (release/1.11 .. release/2.5)"
S_PT_CUDA = (
    "https://github.com/pytorch/pytorch/blob/799d09f215740cc4fb78e0bd278dce469e33ddcb/.ci/manywheel/build_cuda.sh"
    " (from 2.13: .ci/manywheel/build_env_setup.py)"
)
S_CONDA = "https://github.com/pytorch/builder/blob/release/2.5/conda/pytorch-nightly/build.sh"
S_CONDA_DEP = (
    "https://github.com/pytorch/builder/blob/release/1.12/conda/build_pytorch.sh; "
    "https://github.com/pytorch/pytorch.github.io/blob/e3f009bbc0d7509ed5c85b633313ec72aa2d1a40/_get_started/previous-versions.md"
)

L102 = "3.7;5.0;6.0;7.0"
L11 = "3.7;5.0;6.0;7.0;7.5;8.0;8.6"
L118 = "3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0"
L12 = "5.0;6.0;7.0;7.5;8.0;8.6;9.0"
L128_27 = "7.5;8.0;8.6;9.0;10.0;12.0"
L128_28 = "7.0;7.5;8.0;8.6;9.0;10.0;12.0"
L13 = "7.5;8.0;8.6;9.0;10.0;12.0"
C10_110 = "3.7+PTX;5.0;6.0;6.1;7.0;7.5"
C11 = "3.7+PTX;5.0;6.0;6.1;7.0;7.5;8.0;8.6"
C118_20 = "3.7+PTX;5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0"
C118_21 = "5.0;6.0;6.1;7.0;7.5;8.0;8.6;3.7+PTX;9.0"
C12 = "5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0"


@record(frozen=True)
class WheelArch:
    """The TORCH_CUDA_ARCH_LIST of one torch release line and CUDA variant (pip wheels)."""

    variant: str  # "cu121"
    arch_list: str  # TORCH_CUDA_ARCH_LIST of the release wheel
    source: str
    status: str = PRIMARY
    patch: Optional[str] = None  # only this patch release ("2.13.0"); None = every patch
    note: str = ""


@record(frozen=True)
class CondaVariant:
    """One CUDA variant of a torch release on the pytorch conda channel."""

    cuda: str  # "11.3"
    package: str  # "cudatoolkit" (<=1.12) | "pytorch-cuda" (1.13-2.5)
    channels: Tuple[str, ...]  # ("pytorch", "nvidia")
    arch_list: Optional[str]  # None: not known -> never recommended
    source: str
    status: str = PRIMARY


@record(frozen=True)
class TorchRelease:
    """One torch minor release: CUDA variants, PyPI default, torchvision, Python range."""

    version: str  # "2.4"
    latest: str  # latest patch cudafix knows of, "2.4.1"
    torchvision: str  # "0.19"
    torchvision_latest: str  # pairs with ``latest``: "0.19.1"
    variants: Tuple[str, ...]  # CUDA wheel variants on the PyTorch index
    pypi_default: Optional[str]  # CUDA variant of the plain PyPI wheel (Linux x86_64)
    python: Tuple[str, str]  # supported CPython range, inclusive ("3.8", "3.12")
    wheel_arch: Tuple[WheelArch, ...]
    conda: Tuple[CondaVariant, ...] = ()  # pytorch channel builds (<= 2.5 only)
    source: str = S_1A
    status: str = PRIMARY  # of variants / default / python
    latest_status: str = PRIMARY  # of ``latest`` / ``torchvision_latest``
    note: str = ""

    @property
    def pytorch_channel(self) -> bool:
        """Published to the `pytorch` conda channel (2.5 was the last: pytorch/pytorch #138506)."""
        return bool(self.conda)

    @property
    def pip_style(self) -> str:
        """"find-links" (<=1.10: -f torch_stable.html), "extra-index" (1.11-1.13), "index" (2.0+)."""
        t = version_tuple(self.version)
        if t <= (1, 10):
            return "find-links"
        if t < (2, 0):
            return "extra-index"
        return "index"


def _wa(variant, arch, source, status=PRIMARY, patch=None, note=""):
    return WheelArch(variant, arch, source, status, patch, note)


def _cv(cuda, arch, channels=("pytorch", "nvidia"), package="pytorch-cuda", status=PRIMARY, source=S_CONDA):
    return CondaVariant(cuda, package, tuple(channels), arch, source + "; " + S_CONDA_DEP, status)


_CT = "cudatoolkit"

RELEASES: Tuple[TorchRelease, ...] = (
    TorchRelease(
        "1.8", "1.8.1", "0.9", "0.9.1", ("cu101", "cu102", "cu111"), "cu102", ("3.6", "3.9"),
        (
            # cu101 exists for 1.8.1 only (site previous-versions: "v1.8.1 additionally lists +cu101").
            # build.sh's `10.*)` arm keeps the base list: the same SASS as cu102.
            _wa("cu101", L102, S_SITE + "; " + S_B_BUILD + " (10.* arm)", INFERRED, patch="1.8.1"),
            _wa("cu102", L102, S_B_BUILD), _wa("cu111", L11, S_B_BUILD),
        ),
        (_cv("10.2", None, ("pytorch",), _CT, UNCONFIRMED), _cv("11.1", None, ("pytorch", "conda-forge"), _CT, UNCONFIRMED)),
        source=S_SITE, note="1.8.2 was an LTS build on a separate index (Python <= 3.8)",
    ),
    TorchRelease(
        "1.9", "1.9.1", "0.10", "0.10.1", ("cu102", "cu111"), "cu102", ("3.6", "3.9"),
        (_wa("cu102", L102, S_B_BUILD), _wa("cu111", L11, S_B_BUILD)),
        (_cv("10.2", None, ("pytorch",), _CT), _cv("11.3", None, ("pytorch", "conda-forge"), _CT)),
        source=S_SITE, note="PyPI default cu102 rests on RELEASE.md's generic sentence",
    ),
    TorchRelease(
        "1.10", "1.10.1", "0.11", "0.11.2", ("cu102", "cu111", "cu113"), "cu102", ("3.6", "3.9"),
        (
            _wa("cu102", L102, S_B_BUILD),
            _wa("cu111", L11, S_B_BUILD),
            _wa("cu113", L11, S_B_BUILD + " (arm `11.[123])`)", SECONDARY,
                note="the +cu113 pip wheels (-f .../whl/cu113/torch_stable.html) are not on the "
                     "previous-versions page; seen in many public install scripts (torch==1.10.0+cu113, "
                     "torchvision==0.11.1+cu113)"),
        ),
        (_cv("10.2", C10_110, ("pytorch",), _CT), _cv("11.3", C11, ("pytorch", "conda-forge"), _CT)),
        source=S_SITE, latest_status=PRIMARY,
        note="1.10.2 / torchvision 0.11.3 exist per public install scripts (secondary); the site lists up to 1.10.1",
    ),
    TorchRelease(
        "1.11", "1.11.0", "0.12", "0.12.0", ("cu102", "cu113"), "cu102", ("3.7", "3.10"),
        (_wa("cu102", L102, S_B_CUDA), _wa("cu113", L11, S_B_CUDA)),
        (_cv("10.2", None, ("pytorch",), _CT), _cv("11.3", None, ("pytorch",), _CT)),
        source=S_SITE,
    ),
    TorchRelease(
        "1.12", "1.12.1", "0.13", "0.13.1", ("cu102", "cu113", "cu116"), "cu102", ("3.7", "3.10"),
        (_wa("cu102", L102, S_B_CUDA), _wa("cu113", L11, S_B_CUDA), _wa("cu116", L11, S_B_CUDA)),
        (
            _cv("10.2", None, ("pytorch",), _CT),
            _cv("11.3", C11, ("pytorch",), _CT),
            _cv("11.6", C11, ("pytorch", "conda-forge"), _CT),
        ),
        source=S_SITE,
    ),
    TorchRelease(
        "1.13", "1.13.1", "0.14", "0.14.1", ("cu116", "cu117"), "cu117", ("3.7", "3.10"),
        (_wa("cu116", L11, S_B_CUDA), _wa("cu117", L11, S_B_CUDA)),
        (_cv("11.6", C11), _cv("11.7", C11)),
        source=S_SITE,
    ),
    TorchRelease(
        "2.0", "2.0.1", "0.15", "0.15.2", ("cu117", "cu118"), "cu117", ("3.8", "3.11"),
        (_wa("cu117", L11, S_B_CUDA), _wa("cu118", L118, S_B_CUDA)),
        (_cv("11.7", None, status=UNCONFIRMED), _cv("11.8", C118_20)),
        source=S_SITE + "; " + S_TESTINFRA,
    ),
    TorchRelease(
        "2.1", "2.1.2", "0.16", "0.16.2", ("cu118", "cu121"), "cu121", ("3.8", "3.11"),
        (_wa("cu118", L118, S_B_CUDA), _wa("cu121", L12, S_B_CUDA)),
        (_cv("11.8", C118_21), _cv("12.1", C12)),
        source=S_TESTINFRA + "; pytorch/test-infra tools/scripts/generate_release_matrix.py RELEASE_DICT",
    ),
    TorchRelease(
        "2.2", "2.2.2", "0.17", "0.17.2", ("cu118", "cu121"), "cu121", ("3.8", "3.12"),
        (_wa("cu118", L118, S_B_CUDA), _wa("cu121", L12, S_B_CUDA)),
        (_cv("11.8", C118_21), _cv("12.1", C12)),
        source=S_TESTINFRA, latest_status=SECONDARY,
        note="3.12 wheels published (test-infra PYTHON_ARCHES +3.12 @8e04a8e90) but 'experimental' in RELEASE.md; "
             "2.2.2/0.17.2 seen in public install scripts only",
    ),
    TorchRelease(
        "2.3", "2.3.1", "0.18", "0.18.1", ("cu118", "cu121"), "cu121", ("3.8", "3.12"),
        (_wa("cu118", L118, S_B_CUDA), _wa("cu121", L12, S_B_CUDA)),
        (_cv("11.8", C118_21), _cv("12.1", C12)),
        source=S_TESTINFRA + "; pytorch/vision README (2.3 | 0.18 | >=3.8, <=3.12)",
        note="3.12 'experimental' in RELEASE.md",
    ),
    TorchRelease(
        "2.4", "2.4.1", "0.19", "0.19.1", ("cu118", "cu121", "cu124"), "cu121", ("3.8", "3.12"),
        (_wa("cu118", L118, S_B_CUDA), _wa("cu121", L12, S_B_CUDA), _wa("cu124", L12, S_B_CUDA)),
        (_cv("11.8", C118_21), _cv("12.1", C12), _cv("12.4", None, status=UNCONFIRMED)),
        source=S_TESTINFRA,
    ),
    TorchRelease(
        "2.5", "2.5.1", "0.20", "0.20.1", ("cu118", "cu121", "cu124"), "cu124", ("3.9", "3.12"),
        (_wa("cu118", L118, S_B_CUDA), _wa("cu121", L12, S_B_CUDA), _wa("cu124", L12, S_B_CUDA)),
        (_cv("11.8", C118_21), _cv("12.1", C12), _cv("12.4", C12)),
        source=S_TESTINFRA, note="last release on the pytorch conda channel (pytorch/pytorch #138506); 3.13 experimental",
    ),
    TorchRelease(
        "2.6", "2.6.0", "0.21", "0.21.0", ("cu118", "cu124", "cu126"), "cu124", ("3.9", "3.13"),
        (
            _wa("cu118", L118, S_PT_CUDA, INFERRED, note="11.8 arm unchanged since builder; not read at release/2.6"),
            _wa("cu124", L12, S_PT_CUDA + " (PR #141142)"),
            _wa("cu126", L12, S_PT_CUDA + " (PR #145616, +PTX removed for release)"),
        ),
        source=S_TESTINFRA, latest_status=SECONDARY, note="torchvision 0.21 from a secondary README copy",
    ),
    TorchRelease(
        "2.7", "2.7.1", "0.22", "0.22.1", ("cu118", "cu126", "cu128"), "cu126", ("3.9", "3.13"),
        (
            _wa("cu118", L118, S_PT_CUDA, INFERRED),
            _wa("cu126", L12, S_PT_CUDA, INFERRED),
            _wa("cu128", L128_27, S_PT_CUDA + " (PRs #145792, #146265, #147607, #157558)"),
        ),
        source=S_TESTINFRA, latest_status=SECONDARY,
        note="2.7.0/0.22.0 primary (release_versions.sh); 2.7.1 seen in user logs (2.7.1+cu126)",
    ),
    TorchRelease(
        "2.8", "2.8.0", "0.23", "0.23.0", ("cu126", "cu128", "cu129"), "cu128", ("3.9", "3.13"),
        (
            _wa("cu126", L12, S_PT_CUDA + " (pytorch@00c7a380)"),
            _wa("cu128", L128_28, S_PT_CUDA + " (pytorch@00c7a380, PR #157558 re-adds sm_70)"),
            _wa("cu129", L128_28, S_PT_CUDA + " (pytorch@00c7a380: 12.0+PTX on main)", UNCONFIRMED,
                note="whether the release wheel kept 12.0+PTX is unconfirmed; SASS list as on main"),
        ),
        source=S_TESTINFRA, latest_status=SECONDARY,
        note="PyPI default from STABLE_CUDA_VERSIONS (validation logic); torchvision 0.23 secondary",
    ),
    TorchRelease(
        "2.9", "2.9.0", "0.24", "0.24.0", ("cu126", "cu128", "cu130"), "cu128", ("3.10", "3.14"),
        (
            _wa("cu126", L12, S_PT_CUDA + " (pytorch@799d09f2)"),
            _wa("cu128", L128_28, S_PT_CUDA + " (pytorch@799d09f2)"),
            _wa("cu130", L13, S_PT_CUDA + " (pytorch@799d09f2: 12.0+PTX on main)", UNCONFIRMED,
                note="release-wheel +PTX unconfirmed"),
        ),
        source=S_TESTINFRA,
    ),
    TorchRelease(
        "2.10", "2.10.0", "0.25", "0.25.0", ("cu126", "cu128", "cu130"), "cu128", ("3.10", "3.14"),
        (
            _wa("cu126", L12, S_PT_CUDA + " (pytorch@799d09f2)"),
            _wa("cu128", L128_28, S_PT_CUDA + " (pytorch@799d09f2)"),
            _wa("cu130", L13, S_PT_CUDA + " (pytorch@799d09f2: 12.0+PTX on main)", UNCONFIRMED,
                note="release-wheel +PTX unconfirmed"),
        ),
        source=S_TESTINFRA, latest_status=UNCONFIRMED,
        note="latest patch not confirmed (2.10.0 used); torchvision 0.25 secondary",
    ),
    TorchRelease(
        "2.11", "2.11.0", "0.26", "0.26.0", ("cu126", "cu128", "cu130"), "cu130", ("3.10", "3.14"),
        (
            _wa("cu126", L12, "pytorch/pytorch#172352 (support matrix)"),
            _wa("cu128", L13, "pytorch/pytorch#172598 (Volta excluded from cu128)"),
            _wa("cu130", L13, "pytorch/pytorch#175567 (+PTX removed for release)", UNCONFIRMED,
                note="RELEASE.md matrix says 12.0+PTX, PR #175567 removed it: PTX presence unconfirmed"),
        ),
        source=S_TESTINFRA + "; test-infra release_versions.sh @0cd5e78a1",
    ),
    TorchRelease(
        "2.12", "2.12.1", "0.27", "0.27.1", ("cu126", "cu130", "cu132"), "cu130", ("3.10", "3.14"),
        (
            _wa("cu126", L12, "RELEASE.md CUDA support matrix copy (secondary)", SECONDARY),
            _wa("cu130", L13, "RELEASE.md CUDA support matrix copy (secondary)", SECONDARY),
            _wa("cu132", L13, "RELEASE.md CUDA support matrix copy (secondary)", SECONDARY),
        ),
        source=S_TESTINFRA + "; test-infra release_versions.sh @50358ee12",
    ),
    TorchRelease(
        "2.13", "2.13.0", "0.28", "0.28.0", ("cu126", "cu130", "cu132"), "cu130", ("3.10", "3.14"),
        (
            _wa("cu126", L12, "RELEASE.md CUDA support matrix copy (secondary)", SECONDARY),
            _wa("cu130", L13 + "+PTX", "pytorch/pytorch#188914, #188925: 2.13.0 (cu130) shipped 12.0+PTX",
                PRIMARY, patch="2.13.0", note="shipped with PTX by mistake; later 2.13.x strip it"),
            _wa("cu130", L13, "pytorch/pytorch#188914, #188925 (fixed list)"),
            _wa("cu132", L13, "RELEASE.md CUDA support matrix copy (secondary)", SECONDARY),
        ),
        source=S_TESTINFRA + "; " + S_LOCAL + " (2.13.0+cpu)", latest_status=SECONDARY,
        note="3.15 experimental; whether cu129 2.13 wheels were published is unconfirmed; torchvision 0.28 secondary",
    ),
    TorchRelease(
        "2.14", "2.14.1", "0.29", "0.29.1", ("cu126", "cu130", "cu132"), "cu130", ("3.10", "3.14"),
        (
            _wa("cu126", L12, "RELEASE.md support matrix 'For Release 2.12, 2.13 and 2.14' (secondary copy)", SECONDARY),
            _wa("cu130", L13, "docs/benchmarks.md: fatbin scan of torch 2.14.1+cu130 libtorch_cuda.so (SASS sm_75 .. sm_121a, no PTX)"),
            _wa("cu132", L13, "RELEASE.md support matrix 'For Release 2.12, 2.13 and 2.14' (secondary copy)", SECONDARY),
        ),
        source=S_LOCAL + " (2.14.1+cu130 from PyPI: Requires-Python >=3.10, classifiers 3.10-3.14); "
               "RELEASE.md matrix copy for the variants (secondary)",
        status=SECONDARY, latest_status=SECONDARY,
        note="cu126/cu132 from third-party copies of the support matrix; torchvision 0.29.1 by torchvision's numbering (0.(minor+15)), installed by pip beside torch 2.14.1 in tests/test_fix_apply_real.py",
    ),
)

_BY_VERSION: Dict[str, TorchRelease] = {r.version: r for r in RELEASES}

# torch patch -> torchvision patch where the 2.x rule 0.(minor+15).patch does not hold, and all of 1.x.
TORCHVISION_PAIRS: Dict[str, Tuple[str, str]] = {
    "1.8.0": ("0.9.0", S_SITE), "1.8.1": ("0.9.1", S_SITE),
    "1.9.0": ("0.10.0", S_SITE), "1.9.1": ("0.10.1", S_SITE),
    "1.10.0": ("0.11.0", S_SITE + " (pip; public scripts also pair 0.11.1+cu113)"),
    "1.10.1": ("0.11.2", S_SITE), "1.10.2": ("0.11.3", "public install scripts (secondary)"),
    "1.11.0": ("0.12.0", S_SITE),
    "1.12.0": ("0.13.0", S_SITE), "1.12.1": ("0.13.1", S_SITE),
    "1.13.0": ("0.14.0", S_SITE), "1.13.1": ("0.14.1", S_SITE),
    "2.0.0": ("0.15.1", S_SITE + " (pip wheels; conda pairs 0.15.0)"), "2.0.1": ("0.15.2", S_SITE),
}


def release(version: str) -> Optional[TorchRelease]:
    """The release row of "2.4", "2.4.1" or "2.4.1+cu121"."""
    mm = major_minor(version)
    if not mm:
        return None
    return _BY_VERSION.get("%d.%d" % mm)


def _variant_of(variant: str) -> str:
    v = variant.strip().lower()
    if v.startswith("+"):
        v = v[1:]
    if not v.startswith("cu"):
        # "12.1" / "12.1.105" -> cu121
        t = version_tuple(v)
        if len(t) >= 2:
            return cudaver.tag_of((t[0], t[1]))
    return v


def wheel_arch_row(torch_version: str, cuda_variant: str) -> Optional[WheelArch]:
    rel = release(torch_version)
    if rel is None:
        return None
    variant = _variant_of(cuda_variant)
    t = version_tuple(torch_version)
    patch = "%d.%d.%d" % t[:3] if len(t) >= 3 else None
    general = None
    for row in rel.wheel_arch:
        if row.variant != variant:
            continue
        if row.patch is not None:
            if row.patch == patch:
                return row
            continue
        general = row
    return general


def wheel_arch_list(torch_version: str, cuda_variant: str) -> Optional[Tuple[List[str], List[str]]]:
    """(sass, ptx) of the official Linux x86_64 wheel, e.g. ("2.4.1", "cu121") -> (["sm_50", ...], [])."""
    row = wheel_arch_row(torch_version, cuda_variant)
    return parse_arch_list(row.arch_list) if row else None


def conda_variant(torch_version: str, cuda: str) -> Optional[CondaVariant]:
    rel = release(torch_version)
    if rel is None:
        return None
    t = version_tuple(_cuda_dotted(cuda))
    for cv in rel.conda:
        if version_tuple(cv.cuda)[:2] == t[:2]:
            return cv
    return None


def conda_arch_list(torch_version: str, cuda: str) -> Optional[Tuple[List[str], List[str]]]:
    """(sass, ptx) of the pytorch-channel conda build (cuda "11.3" or "cu113"), None if unknown."""
    cv = conda_variant(torch_version, cuda)
    if cv is None or cv.arch_list is None:
        return None
    return parse_arch_list(cv.arch_list)


def _cuda_dotted(cuda: str) -> str:
    c = cuda.strip().lower()
    if c.startswith("cu"):
        digits = c[2:]
        return "%s.%s" % (digits[:-1], digits[-1]) if len(digits) >= 2 else digits
    return c


def variant_cuda(variant: str) -> str:
    """"cu121" -> "12.1"; "cu118" -> "11.8"; "cu102" -> "10.2"."""
    return _cuda_dotted(variant)


def torchvision_for(torch_version: str) -> Optional[str]:
    """torchvision matching a torch version: "2.4" -> "0.19"; "2.4.1" -> "0.19.1"; "2.0.0" -> "0.15.1"."""
    t = version_tuple(torch_version)
    rel = release(torch_version)
    if len(t) >= 3:
        key = "%d.%d.%d" % t[:3]
        if key in TORCHVISION_PAIRS:
            return TORCHVISION_PAIRS[key][0]
        if t[0] == 2 and rel is not None:
            return "0.%d.%d" % (t[1] + 15, t[2])  # vision README pairing; RELEASE_DICT patch pairs
        return None
    return rel.torchvision if rel else None


def index_url(variant: str) -> str:
    """The PyTorch wheel index of a variant: "cu130" -> "https://download.pytorch.org/whl/cu130"."""
    return INDEX_BASE + _variant_of(variant)


def python_supported(rel: TorchRelease, python: str) -> bool:
    py = major_minor(python)
    return bool(py) and major_minor(rel.python[0]) <= py <= major_minor(rel.python[1])


# torch patch -> torchaudio patch.  1.x and 2.0 from the site's previous-versions page; 2.1+ share
# torch's version.  PyPI's torchaudio release list (`pip index versions torchaudio`, read
# 2026-12-01) ends at 2.11.1: no torchaudio exists for torch 2.12+, so an env that has torchaudio
# cannot move to those releases without dropping it (the planner says so instead).
S_AUDIO = "pytorch/pytorch.github.io _get_started/previous-versions.md; PyPI torchaudio release list (2026-12-01)"
TORCHAUDIO_PAIRS: Dict[str, str] = {
    "1.8.0": "0.8.0", "1.8.1": "0.8.1", "1.9.0": "0.9.0", "1.9.1": "0.9.1",
    "1.10.0": "0.10.0", "1.10.1": "0.10.1", "1.10.2": "0.10.2", "1.11.0": "0.11.0",
    "1.12.0": "0.12.0", "1.12.1": "0.12.1", "1.13.0": "0.13.0", "1.13.1": "0.13.1",
    "2.0.0": "2.0.1", "2.0.1": "2.0.2",
}
TORCHAUDIO_LAST = (2, 11, 1)  # newest torchaudio on PyPI (S_AUDIO)


def torchaudio_for(torch_version: str) -> Optional[str]:
    """torchaudio built for a torch patch: "1.10.2" -> "0.10.2", "2.5.1" -> "2.5.1"; None when
    no torchaudio was released for it (2.12+) or the version is not a full X.Y.Z."""
    t = version_tuple(torch_version)
    if len(t) < 3:
        return None
    key = "%d.%d.%d" % t[:3]
    if key in TORCHAUDIO_PAIRS:
        return TORCHAUDIO_PAIRS[key]
    if (2, 1, 0) <= t[:3] <= TORCHAUDIO_LAST:
        return key
    return None


def companion_for(name: str, torch_version: str) -> Optional[str]:
    """The release of a torch-pinned companion package built for ``torch_version`` (X.Y.Z), or
    None when cudafix does not know it (the planner then refuses to move torch under it)."""
    if name == "torchvision":
        return torchvision_for(torch_version)
    if name == "torchaudio":
        return torchaudio_for(torch_version)
    return None


def variant_exists(torch_version: str, variant: str) -> bool:
    """Whether the official index has ``variant`` for that patch ("cpu" always; a cuXYZ when the
    release lists it and its wheel arch row covers that patch)."""
    rel = release(torch_version)
    if rel is None:
        return False
    if variant == "cpu":
        return True
    return variant in rel.variants and wheel_arch_row(torch_version, variant) is not None
