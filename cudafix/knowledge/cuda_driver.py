"""NVIDIA driver <-> CUDA facts (NVIDIA's release notes and CUDA Compatibility guide, URLs below).

- :data:`TOOLKIT_DRIVERS`: CUDA toolkit release -> minimum ("toolkit") driver (RN Table 3).
- :data:`MINOR_COMPAT_FLOORS`: per CUDA major, the lowest driver that runs any release of that
  major under minor-version compatibility (SASS only; no PTX JIT of newer PTX).
- :data:`DRIVER_BRANCH_CUDA`: driver branch -> the value ``cuDriverGetVersion`` reports.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple

from cudafix.knowledge import (
    DERIVED,
    PRIMARY,
    SECONDARY,
    UNCONFIRMED,
    version_tuple,
)
from cudafix.model.record import record
from cudafix.model.lazyre import lazy_re

RN = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (Table 3)"
RN_13_BRANCH = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (13.4U1 edition, branch table)"
RN_13_3 = "https://docs.nvidia.com/cuda/archive/13.3.0/cuda-toolkit-release-notes/index.html (quoted by third-party repos)"
MINOR_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
FWD_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"


def compare_driver_versions(a: str, b: str) -> int:
    """-1 / 0 / 1 comparing driver versions numerically, missing parts as 0 ("570.26" < "570.124.06")."""
    ta, tb = version_tuple(a), version_tuple(b)
    if not ta or not tb:
        raise ValueError("not a driver version: %r / %r" % (a, b))
    n = max(len(ta), len(tb))
    ta = ta + (0,) * (n - len(ta))
    tb = tb + (0,) * (n - len(tb))
    return (ta > tb) - (ta < tb)


def driver_at_least(driver: str, minimum: str) -> bool:
    return compare_driver_versions(driver, minimum) >= 0


_DRIVER_RE = lazy_re(r"^\d{3,4}(\.\d{1,3}){0,2}$")


def is_driver_version(text: str) -> bool:
    """A plausible NVIDIA driver version: "580", "570.26", "580.95.05"."""
    return bool(_DRIVER_RE.match(str(text).strip()))


def driver_branch(driver: str) -> int:
    """"580.95.05" -> 580."""
    t = version_tuple(driver)
    if not t:
        raise ValueError("not a driver version: %r" % driver)
    return t[0]


# -- CUDA toolkit -> minimum driver --------------------------------------------------------


@record(frozen=True)
class ToolkitDriver:
    """A CUDA toolkit release and the minimum drivers it ships with."""

    cuda: str  # "12.1" (major.minor of the release)
    update: int  # 0 = GA, 1 = Update 1 ...; -1 = RC
    label: str  # as the release notes name it
    linux: Optional[str]  # minimum Linux x86_64 driver (None: not given)
    windows: Optional[str]  # minimum Windows x86_64 driver (None: N/A, driver unbundled)
    source: str
    status: str = PRIMARY


def _td(cuda, update, label, linux, windows, source=RN, status=PRIMARY):
    return ToolkitDriver(cuda, update, label, linux, windows, source, status)


TOOLKIT_DRIVERS: Tuple[ToolkitDriver, ...] = (
    _td("9.0", 0, "CUDA 9.0.76", "384.81", "385.54"),
    _td("9.1", 0, "CUDA 9.1.85", "390.46", "391.29"),
    _td("9.2", 0, "CUDA 9.2.88", "396.26", "397.44"),
    _td("9.2", 1, "CUDA 9.2.148 Update 1", "396.37", "398.26"),
    _td("10.0", 0, "CUDA 10.0.130", "410.48", "411.31"),
    _td("10.1", 0, "CUDA 10.1 (10.1.105 GA and updates)", "418.39", "418.96"),
    _td("10.2", 0, "CUDA 10.2.89", "440.33", "441.22"),
    _td("11.0", -1, "CUDA 11.0.1 RC", "450.36.06", "451.22"),
    _td("11.0", 0, "CUDA 11.0.2 GA", "450.51.05", "451.48"),
    _td("11.0", 1, "CUDA 11.0.3 Update 1", "450.51.06", "451.82"),
    _td("11.1", 0, "CUDA 11.1 GA", "455.23", "456.38"),
    _td("11.1", 1, "CUDA 11.1.1 Update 1", "455.32", "456.81"),
    _td("11.2", 0, "CUDA 11.2.0 GA", "460.27.03", "460.82"),
    _td("11.2", 1, "CUDA 11.2.1 Update 1", "460.32.03", "461.09"),
    _td("11.2", 2, "CUDA 11.2.2 Update 2", "460.32.03", "461.33"),
    _td("11.3", 0, "CUDA 11.3.0 GA", "465.19.01", "465.89"),
    _td("11.3", 1, "CUDA 11.3.1 Update 1", "465.19.01", "465.89"),
    _td("11.4", 0, "CUDA 11.4.0 GA", "470.42.01", "471.11"),
    _td("11.4", 1, "CUDA 11.4 Update 1", "470.57.02", "471.41"),
    _td("11.4", 2, "CUDA 11.4 Update 2", "470.57.02", "471.41"),
    _td("11.4", 3, "CUDA 11.4 Update 3", "470.82.01", "472.50"),
    _td("11.4", 4, "CUDA 11.4 Update 4", "470.82.01", "472.50"),
    _td("11.5", 0, "CUDA 11.5 GA", "495.29.05", "496.04"),
    _td("11.5", 1, "CUDA 11.5 Update 1", "495.29.05", "496.13"),
    _td("11.5", 2, "CUDA 11.5 Update 2", "495.29.05", "496.13"),
    _td("11.6", 0, "CUDA 11.6 GA", "510.39.01", "511.23"),
    _td("11.6", 1, "CUDA 11.6 Update 1", "510.47.03", "511.65"),
    _td("11.6", 2, "CUDA 11.6 Update 2", "510.47.03", "511.65"),
    _td("11.7", 0, "CUDA 11.7 GA", "515.43.04", "516.01"),
    _td("11.7", 1, "CUDA 11.7 Update 1", "515.48.07", "516.31"),
    _td("11.8", 0, "CUDA 11.8 GA", "520.61.05", "520.06"),
    _td("12.0", 0, "CUDA 12.0 GA", "525.60.13", "527.41"),
    _td("12.0", 1, "CUDA 12.0 Update 1", "525.85.12", "528.33"),
    _td("12.1", 0, "CUDA 12.1 GA", "530.30.02", "531.14"),
    _td("12.1", 1, "CUDA 12.1 Update 1", "530.30.02", "531.14"),
    _td("12.2", 0, "CUDA 12.2 GA", "535.54.03", "536.25"),
    _td("12.2", 1, "CUDA 12.2 Update 1", "535.86.09", "536.67"),
    _td("12.2", 2, "CUDA 12.2 Update 2", "535.104.05", "537.13"),
    _td("12.3", 0, "CUDA 12.3 GA", "545.23.06", "545.84"),
    _td("12.3", 1, "CUDA 12.3 Update 1", "545.23.08", "546.12"),
    _td("12.4", 0, "CUDA 12.4 GA", "550.54.14", "551.61"),
    _td("12.4", 1, "CUDA 12.4 Update 1", "550.54.15", "551.78"),
    _td("12.5", 0, "CUDA 12.5 GA", "555.42.02", "555.85"),
    _td("12.5", 1, "CUDA 12.5 Update 1", "555.42.06", "555.85"),
    _td("12.6", 0, "CUDA 12.6 GA", "560.28.03", "560.76"),
    _td("12.6", 1, "CUDA 12.6 Update 1", "560.35.03", "560.94"),
    _td("12.6", 2, "CUDA 12.6 Update 2", "560.35.03", "560.94"),
    _td("12.6", 3, "CUDA 12.6 Update 3", "560.35.05", "561.17"),
    # (no CUDA 12.7 toolkit exists)
    _td("12.8", 0, "CUDA 12.8 GA", "570.26", "570.65"),
    _td("12.8", 1, "CUDA 12.8 Update 1", "570.124.06", "572.61"),
    _td("12.9", 0, "CUDA 12.9 GA", "575.51.03", "576.02"),
    _td("12.9", 1, "CUDA 12.9 Update 1", "575.57.08", "576.57"),
    _td("13.0", 0, "CUDA 13.0 GA", "580.65.06", None),
    _td("13.0", 1, "CUDA 13.0 Update 1", "580.82.07", None),
    _td("13.0", 2, "CUDA 13.0 Update 2", "580.95.05", None),
    _td("13.1", 0, "CUDA 13.1 GA", "590.44.01", None),
    _td("13.1", 1, "CUDA 13.1 Update 1", "590.48.01", None),
    _td("13.2", 0, "CUDA 13.2 GA", "595.45.04", None),
    _td("13.2", 1, "CUDA 13.2 Update 1", "595.58.03", None),
    _td("13.2", 2, "CUDA 13.2 Update 2", "595.71.05", None),
    _td("13.3", 0, "CUDA 13.3 GA", "610.43.02", None, RN_13_3, SECONDARY),
    _td("13.3", 1, "CUDA 13.3 Update 1", "610.43.02", None, RN_13_3, SECONDARY),
    # 13.4: the RN gives only the branch (driver unbundled on Linux from 13.4).
    _td("13.4", 0, "CUDA 13.4 (branch R615 only)", "615", None, RN_13_BRANCH, PRIMARY),
)


def toolkit_driver(cuda: str) -> Optional[ToolkitDriver]:
    """The row of the GA release of ``cuda``'s major.minor ("12.1" or "12.1.1" -> 12.1 GA)."""
    t = version_tuple(cuda)
    if len(t) < 2:
        return None
    key = "%d.%d" % t[:2]
    for row in TOOLKIT_DRIVERS:
        if row.cuda == key and row.update == 0:
            return row
    return None


def min_driver(cuda: str, os: str = "linux") -> Optional[str]:
    """Minimum ("toolkit") driver of the GA release of that CUDA major.minor; None if not known.

    >>> min_driver("12.1")
    '530.30.02'
    """
    row = toolkit_driver(cuda)
    if row is None:
        return None
    return row.windows if os.lower().startswith("win") else row.linux


# -- minor-version compatibility ----------------------------------------------------------


@record(frozen=True)
class MinorCompatFloor:
    """The lowest driver that runs a CUDA major family under minor-version compatibility."""

    major: int
    linux: str
    windows: Optional[str]
    source: str
    status: str
    note: str = ""


MINOR_COMPAT_FLOOR_ROWS: Tuple[MinorCompatFloor, ...] = (
    MinorCompatFloor(
        11, "450.80.02", "452.39", MINOR_COMPAT + " (and RN 13.x footnote ***)", PRIMARY,
        "CUDA 11.0 GA shipped an earlier driver; 450.80.02 enables minor compat across 11.x",
    ),
    MinorCompatFloor(
        12, "525.60.13", "528.33",
        "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (older 12.x edition, Table 2, "
        "seen in two secondary copies); branch '>= 525' is primary: " + MINOR_COMPAT,
        SECONDARY, "branch >= 525 primary; exact point release secondary",
    ),
    MinorCompatFloor(
        13, "580", None, MINOR_COMPAT + " ('>= 580'); RN 13.4U1 'Existing CUDA 13.x applications run on drivers >=580'",
        PRIMARY, "branch-level only; lowest R580 in RN Table 3 is 580.65.06 (13.0 GA)",
    ),
)

MINOR_COMPAT_FLOORS = {row.major: row.linux for row in MINOR_COMPAT_FLOOR_ROWS}


def minor_compat_floor(major: int, os: str = "linux") -> Optional[str]:
    for row in MINOR_COMPAT_FLOOR_ROWS:
        if row.major == int(major):
            return row.windows if os.lower().startswith("win") else row.linux
    return None


def minor_compat_floor_row(major: int) -> Optional[MinorCompatFloor]:
    for row in MINOR_COMPAT_FLOOR_ROWS:
        if row.major == int(major):
            return row
    return None


# -- driver branch -> cuDriverGetVersion -------------------------------------------------


@record(frozen=True)
class BranchCuda:
    """A driver branch and the CUDA version its cuDriverGetVersion reports."""

    branch: int  # 580
    cuda: int  # 13000 (cuDriverGetVersion)
    source: str
    status: str


def _bc(branch, cuda, evidence, status):
    return BranchCuda(branch, cuda, evidence, status)


DRIVER_BRANCH_CUDA: Tuple[BranchCuda, ...] = (
    _bc(410, 10000, RN + " (10.0.130 >= 410.48)", DERIVED),
    _bc(418, 10010, "https://docs.nvidia.com/datacenter/tesla/pdf/NVIDIA_CUDA_Drivers_Support.pdf", PRIMARY),
    _bc(440, 10020, "https://docs.nvidia.com/datacenter/tesla/pdf/NVIDIA_CUDA_Drivers_Support.pdf", PRIMARY),
    _bc(450, 11000, "https://docs.nvidia.com/datacenter/tesla/pdf/NVIDIA_CUDA_Drivers_Support.pdf", PRIMARY),
    _bc(455, 11010, "https://docs.nvidia.com/datacenter/tesla/pdf/NVIDIA_CUDA_Drivers_Support.pdf", PRIMARY),
    _bc(460, 11020, RN + " (11.2.0 >= 460.27.03)", DERIVED),
    _bc(465, 11030, RN + " (11.3.0 >= 465.19.01)", DERIVED),
    _bc(470, 11040, RN + " (11.4.0 >= 470.42.01)", DERIVED),
    _bc(495, 11050, RN + " (11.5 GA >= 495.29.05)", DERIVED),
    _bc(510, 11060, RN + " (11.6 GA >= 510.39.01)", DERIVED),
    _bc(515, 11070, RN + " (11.7 GA >= 515.43.04)", DERIVED),
    _bc(520, 11080, RN + " (11.8 GA >= 520.61.05)", DERIVED),
    _bc(525, 12000, RN + " (12.0 GA >= 525.60.13)", DERIVED),
    _bc(530, 12010, RN + " (12.1 GA >= 530.30.02)", DERIVED),
    _bc(535, 12020, FWD_COMPAT + " ('535+ (CUDA 12.2)')", PRIMARY),
    _bc(545, 12030, RN + " (12.3 GA >= 545.23.06)", DERIVED),
    _bc(550, 12040, FWD_COMPAT + " ('12.4 was paired with 550')", PRIMARY),
    _bc(555, 12050, RN + " (12.5 GA >= 555.42.02)", DERIVED),
    _bc(560, 12060, RN + " (12.6 GA >= 560.28.03)", DERIVED),
    _bc(565, 12070, "nvidia-smi 'Driver Version: 565.57.01 CUDA Version: 12.7' in many repos; no NVIDIA doc row, no 12.7 toolkit", SECONDARY),
    _bc(570, 12080, FWD_COMPAT + " ('570+ (CUDA 12.8)')", PRIMARY),
    _bc(575, 12090, RN + " (12.9 GA >= 575.51.03)", DERIVED),
    _bc(580, 13000, FWD_COMPAT + " ('580+ (CUDA 13.0)')", PRIMARY),
    _bc(590, 13010, FWD_COMPAT + " ('590+ (CUDA 13.1)')", PRIMARY),
    _bc(595, 13020, FWD_COMPAT + " ('595+ (CUDA 13.2)')", PRIMARY),
    _bc(610, 13030, FWD_COMPAT + " ('610+ (CUDA 13.3)')", PRIMARY),
    _bc(615, 13040, FWD_COMPAT + " ('615+ (CUDA 13.4)')", PRIMARY),
    _bc(620, 13050, "https://docs.nvidia.com/datacenter/tesla/drivers/620/supported-drivers-and-cuda-toolkit-versions.html (R620 'CUDA 13'; 13.5 driver row not seen)", UNCONFIRMED),
)


def branch_row(driver_version: str) -> Optional[BranchCuda]:
    """The DRIVER_BRANCH_CUDA row of a driver version ("580.95.05" -> R580), or None."""
    try:
        branch = driver_branch(driver_version)
    except ValueError:
        return None
    for row in DRIVER_BRANCH_CUDA:
        if row.branch == branch:
            return row
    return None


def cuda_for_driver(driver_version: str) -> Optional[int]:
    """What cuDriverGetVersion reports for this driver ("580.95.05" -> 13000).

    None when the branch is not in :data:`DRIVER_BRANCH_CUDA`.  Check :func:`branch_row`'s
    ``status`` before relying on it (R565 -> 12070 is secondary, R620 -> 13050 unconfirmed).
    """
    row = branch_row(driver_version)
    return row.cuda if row else None


def cuda_at_least_for_driver(driver_version: str) -> Optional[int]:
    """A lower bound on the driver's CUDA: the newest confirmed branch row at or below it.

    Useful for a branch not in the table (a newer one, or an odd Windows number): a driver at
    or above branch B supports at least what B supports.
    """
    try:
        branch = driver_branch(driver_version)
    except ValueError:
        return None
    best = None
    for row in DRIVER_BRANCH_CUDA:
        if row.branch <= branch and row.status in (PRIMARY, DERIVED):
            best = row.cuda if best is None else max(best, row.cuda)
    return best


# -- forward compatibility (cuda-compat) ---------------------------------------------------------
# "Forward Compatibility is applicable only for systems with: NVIDIA Data Center GPUs; Select NGC
# Server Ready SKUs of RTX cards; Jetson boards." (FWD_COMPAT).  Names are matched conservatively:
# a name in neither list is "unknown" to the rule, never "supported".
FWD_COMPAT_DATACENTER = lazy_re(
    r"\b(Tesla|A100|A800|A30|A40|A10|A16|A2|H100|H200|H800|H20|GH200|B100|B200|GB200|B300|GB300|L4|L40S?|L20|T4|V100|P100|P40|P4)\b",
    re.I)
FWD_COMPAT_CONSUMER = lazy_re(r"\b(GeForce|TITAN)\b", re.I)
# Base driver branches of NVIDIA's forward-compatibility matrix (FWD_COMPAT, 13.4-era edition).
FWD_COMPAT_BASE_BRANCHES = (535, 570, 580, 590, 595, 610, 615)
DATACENTER = "data-center"
CONSUMER = "consumer"


def forward_compat_class(gpu_name: str) -> Optional[str]:
    """DATACENTER (forward compatibility supported), CONSUMER (not: error 804), None (unknown)."""
    if FWD_COMPAT_CONSUMER.search(gpu_name):
        return CONSUMER
    if FWD_COMPAT_DATACENTER.search(gpu_name):
        return DATACENTER
    return None

