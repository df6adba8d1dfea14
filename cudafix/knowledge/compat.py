"""Does this binary run here, and how?  The one CUDA compatibility model.

Every rule, the planner, warm, verify and fleet ask this module; none of them compares CUDA or
driver versions itself (tests/test_compat.py holds that).  Two questions, answered from NVIDIA's
documents:

- :func:`runtime` -- a CUDA runtime of release X.Y (shared ``libcudart.so`` or a copy linked
  statically into a module) on this driver: **native** when the driver's CUDA is at least X.Y;
  **minor-version compatibility** when the driver is of the same major and at least that major's
  floor (CUDA 11.x >= 450.80.02, 12.x >= 525.60.13, 13.x >= R580); **forward compatibility**
  when a cuda-compat libcuda of X.Y or newer is in use; else it **fails** with
  ``cudaErrorInsufficientDriver``.  CUDA 10.x and older have no minor-version compatibility.
  (MINOR_DOC, FWD_DOC; RUNTIME_API_DOC for the error.)
- :func:`device_code` -- a binary's device code on a GPU of compute capability X.Y: SASS that
  runs on it (same major, minor <= the GPU's; ``a`` targets only on exactly X.Y; ``f`` targets in
  the family: cudafix.knowledge.arch) runs as is; else PTX whose target the GPU can compile runs
  only after the driver's JIT (a stall at the module's first load) -- and only when the driver
  JIT-compiles that PTX's **ISA version**: a driver accepts PTX up to the ISA of its own CUDA
  release (PTX_ISA_TABLE), newer PTX fails at load with ``CUDA_ERROR_UNSUPPORTED_PTX_VERSION``
  (222).  Minor-version compatibility never lifts that limit; forward compatibility does
  (MINOR_DOC, "Application Considerations").  No SASS and no usable PTX: "no kernel image".

An answer has three states (:data:`RUNS`, :data:`FAILS`, :data:`UNKNOWN`): a fact the model
lacks (the driver's CUDA, a driver release below a floor it cannot place, a PTX ISA not read)
makes it :data:`UNKNOWN`, never :data:`RUNS`.  A failure carries the error text the CUDA runtime
really prints (its ``cudaGetErrorString``), measured on an H200 (docs/compat.md).
"""

from __future__ import annotations

import dataclasses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Mapping, Optional, Sequence, Tuple

    from cudafix.model.snapshot import Snapshot

from cudafix.knowledge import arch as karch
from cudafix.knowledge import cuda_driver
from cudafix.model.record import record

MINOR_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
FWD_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"
PTX_DOC = "https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes-ptx-release-history"
PTX_MAP_DOC = ("https://nvidia.github.io/cuda-python/cuda-bindings/latest/module/generated/"
               "cuda.bindings.utils.get_minimal_required_cuda_ver_from_ptx_ver.html")
RUNTIME_API_DOC = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
H200_PROOF = "measured on an H200, driver 580.159.04 (CUDA 13.0): docs/compat.md"

# -- answers ---------------------------------------------------------------------------------

RUNS = "runs"
FAILS = "fails"
UNKNOWN = "unknown"

# how a runtime runs on a driver
NATIVE = "native"
MINOR = "minor-version compatibility"
FORWARD = "forward compatibility"
# how device code runs on a GPU
SASS = "sass"
PTX_JIT = "ptx-jit"
# how it fails
INSUFFICIENT_DRIVER = "insufficient-driver"
UNSUPPORTED_PTX = "unsupported-ptx"
NO_KERNEL_IMAGE = "no-kernel-image"
JIT_DISABLED = "jit-disabled"

# The runtime's own texts (cudaGetErrorString), as a user sees them after "CUDA error: ".
ERRORS: "Dict[str, str]" = {
    INSUFFICIENT_DRIVER: "CUDA driver version is insufficient for CUDA runtime version",
    UNSUPPORTED_PTX: "the provided PTX was compiled with an unsupported toolchain.",
    NO_KERNEL_IMAGE: "no kernel image is available for execution on the device",
    JIT_DISABLED: "no kernel image is available for execution on the device",
}
ERROR_CODES: "Dict[str, int]" = {INSUFFICIENT_DRIVER: 35, UNSUPPORTED_PTX: 222, NO_KERNEL_IMAGE: 209, JIT_DISABLED: 209}


@record(frozen=True)
class Driver:
    """What the model needs to know of the driver."""

    cuda: Optional[int]  # cuDriverGetVersion (13000), None when unknown
    release: Optional[str] = None  # "580.159.04"; None when unknown
    forward_cuda: Optional[int] = None  # the CUDA of a cuda-compat libcuda in use (FWD_DOC), if any
    windows: bool = False


@record(frozen=True)
class Answer:
    """One verdict of the model: ``state`` (RUNS / FAILS / UNKNOWN), ``how`` it runs or fails,
    the ``error`` a user sees when it fails, ``why`` (the rule applied, with the facts),
    ``source`` (the citation) and ``caveats`` of the way it runs."""

    state: str
    how: str
    why: str
    source: str
    error: str = ""
    caveats: Tuple[str, ...] = ()
    entry: Optional[str] = None  # the device-code entry used (sm_90, compute_90)

    @property
    def runs(self) -> bool:
        return self.state == RUNS

    @property
    def fails(self) -> bool:
        return self.state == FAILS


def driver_cuda(snap: "Snapshot") -> "Tuple[Optional[int], str]":
    """The CUDA version the driver supports (cuDriverGetVersion encoding) and how it is known:
    cuDriverGetVersion when probed; else derived from the kernel module / libcuda version and
    the branch table (knowledge.cuda_driver), saying so."""
    d = snap.driver
    if d.cuda_version:
        return d.cuda_version, d.found_via.get("cuda_version") or "cuDriverGetVersion"
    version = d.kernel_version or d.libcuda_version
    if not version:
        return None, ""
    row = cuda_driver.branch_row(version)
    if row is not None:
        return row.cuda, "driver branch R%d table (%s)" % (row.branch, row.status)
    lower = cuda_driver.cuda_at_least_for_driver(version)
    if lower is not None:
        return lower, "at least, from the newest known branch below %s" % version
    return None, ""


def torch_cuda(snap: "Snapshot") -> Optional[int]:
    """The CUDA release of the snapshot's torch build (13000), None for a CPU build or none."""
    from cudafix.model.versions import release

    t = snap.primary_torch
    rel = release(t.cuda) if t is not None and t.cuda else ()
    return rel[0] * 1000 + rel[1] * 10 if len(rel) >= 2 else None


def driver_of(snap: "Snapshot") -> Driver:
    """The snapshot's driver as this model takes it."""
    return Driver(driver_cuda(snap)[0], snap.driver.kernel_version or snap.driver.libcuda_version, None,
                  (snap.python.platform or "").startswith("win"))


def _v(n: int) -> str:
    return "%d.%d" % (n // 1000, (n % 1000) // 10)


# -- PTX ISA ---------------------------------------------------------------------------------

# PTX ISA version -> the oldest CUDA release whose driver JIT-compiles it (NVIDIA's PTX ISA
# release history, PTX_DOC, as cuda-python encodes it: PTX_MAP_DOC).  7.x maps to 11.x minor for
# minor; 8.0-8.5 to 12.0-12.5 (CUDA 12.6 also writes 8.5); 8.6-8.8 to 12.7-12.9; 9.x to 13.x.
PTX_ISA_TABLE: "Tuple[Tuple[Tuple[int, int], int], ...]" = (
    ((6, 0), 9000), ((6, 1), 9010), ((6, 2), 9020),
    ((6, 3), 10000), ((6, 4), 10010), ((6, 5), 10020),
    ((7, 0), 11000), ((7, 1), 11010), ((7, 2), 11020), ((7, 3), 11030), ((7, 4), 11040),
    ((7, 5), 11050), ((7, 6), 11060), ((7, 7), 11070), ((7, 8), 11080),
    ((8, 0), 12000), ((8, 1), 12010), ((8, 2), 12020), ((8, 3), 12030), ((8, 4), 12040),
    ((8, 5), 12050), ((8, 6), 12070), ((8, 7), 12080), ((8, 8), 12090),
    ((9, 0), 13000), ((9, 1), 13010),
    # 9.2 ... 9.5: the `.version` NVIDIA's nvcc wheels write, 13.2.86 / 13.3.73 / 13.4.92 / 13.5.37
    # (`nvcc -ptx`, 2026-12-06; 9.2 and 9.5 also read back from their fatbins: docs/compat.md).
    ((9, 2), 13020), ((9, 3), 13030), ((9, 4), 13040), ((9, 5), 13050),
)


def parse_isa(text: str) -> Optional[Tuple[int, int]]:
    """"9.2" -> (9, 2); None for anything else."""
    parts = str(text).strip().split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def isa_min_cuda(isa: str) -> Optional[int]:
    """The oldest CUDA (driver) that JIT-compiles PTX of this ISA version (13020 for "9.2"); None
    when the ISA is not in the table (newer than the table knows: unknown, never "old enough")."""
    key = parse_isa(isa)
    for k, cuda in PTX_ISA_TABLE:
        if k == key:
            return cuda
    return None


def toolkit_isa(cuda: int) -> Optional[str]:
    """The PTX ISA a CUDA toolkit writes (the newest the table maps to that release or older)."""
    same = [(k, c) for k, c in PTX_ISA_TABLE if c // 1000 == cuda // 1000]
    if not same or cuda > max(c for _k, c in same):
        return None  # a release newer than the table: its ISA is not known (never guessed low)
    best = None
    for k, c in same:
        if c <= cuda:
            best = k
    return None if best is None else "%d.%d" % best


# -- a CUDA runtime on a driver --------------------------------------------------------------


def minor_floor(major: int, windows: bool = False) -> Optional[str]:
    """The lowest driver that runs CUDA ``major``.x under minor-version compatibility (MINOR_DOC);
    None where there is none (CUDA 10.x and older)."""
    return cuda_driver.minor_compat_floor(major, "windows" if windows else "linux")


def runtime(driver: Driver, cuda: Optional[int]) -> Answer:
    """How a CUDA runtime of release ``cuda`` (13020) runs on ``driver``."""
    if cuda is None:
        return Answer(UNKNOWN, "", "the CUDA runtime's version is unknown", MINOR_DOC)
    need = _v(cuda)
    if driver.cuda is None:
        return Answer(UNKNOWN, "", "the driver's CUDA version is unknown; CUDA %s needs a driver for CUDA >= %s or, "
                      "under minor-version compatibility, one of its major's floor" % (need, need), MINOR_DOC)
    have = _v(driver.cuda)
    if driver.cuda >= cuda:
        return Answer(RUNS, NATIVE, "the driver supports CUDA %s >= %s" % (have, need), MINOR_DOC)
    if driver.forward_cuda is not None and driver.forward_cuda >= cuda:
        return Answer(RUNS, FORWARD, "a forward-compatibility libcuda for CUDA %s runs CUDA %s on the driver of CUDA %s" % (
            _v(driver.forward_cuda), need, have), FWD_DOC,
            caveats=("forward compatibility runs only on data-center GPUs (and select NGC-ready RTX) with a supported kernel driver (else Error 804)",))
    major = cuda // 1000
    fail = Answer(FAILS, INSUFFICIENT_DRIVER, "", MINOR_DOC + "; " + RUNTIME_API_DOC + " (cudaErrorInsufficientDriver)",
                  error=ERRORS[INSUFFICIENT_DRIVER])
    if driver.cuda // 1000 != major:
        return dataclasses.replace(fail, why="the driver supports CUDA %s: minor-version compatibility never crosses a CUDA major (CUDA %s)" % (have, need))
    floor = minor_floor(major, driver.windows)
    if floor is None:
        return dataclasses.replace(fail, why="CUDA %d.x has no minor-version compatibility: the driver must support CUDA %s itself (it supports %s)" % (
            major, need, have))
    caveats = (
        "under minor-version compatibility the driver cannot JIT PTX newer than CUDA %s (error 222: %s)" % (have, ERRORS[UNSUPPORTED_PTX]),
        "APIs that need a newer driver return cudaErrorCallRequiresNewerDriver",
    )
    minor = Answer(RUNS, MINOR, "", MINOR_DOC, caveats=caveats)
    if driver.release:
        try:
            at_least = cuda_driver.driver_at_least(driver.release, floor)
        except ValueError:
            return Answer(UNKNOWN, "", "driver release %r unreadable" % driver.release, MINOR_DOC)
        if at_least:
            return dataclasses.replace(minor, why="driver %s (CUDA %s) >= %s, the minor-version compatibility floor of CUDA %d.x, runs CUDA %s" % (
                driver.release, have, floor, major, need))
        return dataclasses.replace(fail, why="driver %s is below %s, the minor-version compatibility floor of CUDA %d.x" % (driver.release, floor, major))
    # Only the driver's CUDA is known: a branch newer than the floor's (CUDA X.1 or later, or a
    # floor that is a whole branch, as R580 for 13.x) is past it; an X.0 driver may be below it.
    whole_branch = "." not in floor
    if driver.cuda % 1000 >= 10 or whole_branch:
        return dataclasses.replace(minor, why="a driver for CUDA %s is at or past %s, the minor-version compatibility floor of CUDA %d.x, and runs CUDA %s" % (
            have, floor, major, need))
    return Answer(UNKNOWN, "", "driver release unknown: a CUDA %s driver may be below %s, the minor-version compatibility floor of CUDA %d.x" % (
        have, floor, major), MINOR_DOC)


# -- device code on a GPU --------------------------------------------------------------------


def jit_limit(driver: Driver) -> Optional[int]:
    """The newest CUDA release whose PTX this driver JIT-compiles (its own, or a forward-compat
    libcuda's): minor-version compatibility does not raise it (MINOR_DOC)."""
    if driver.cuda is None:
        return None
    return max(driver.cuda, driver.forward_cuda or 0)


def ptx_jit(driver: Driver, entry: str, isa: Optional[str]) -> Answer:
    """Whether the driver JIT-compiles ``entry`` (compute_XY) whose PTX ISA is ``isa``."""
    limit = jit_limit(driver)
    if not isa:
        return Answer(UNKNOWN, PTX_JIT, "%s: its PTX ISA version was not read; the driver JIT-compiles PTX up to CUDA %s's" % (
            entry, _v(limit) if limit else "?"), PTX_DOC, entry=entry)
    need = isa_min_cuda(isa)
    if need is None:
        return Answer(UNKNOWN, PTX_JIT, "%s: PTX ISA %s is not in cudafix's table (%s)" % (entry, isa, PTX_DOC), PTX_DOC, entry=entry)
    if limit is None:
        return Answer(UNKNOWN, PTX_JIT, "%s: PTX ISA %s needs a driver for CUDA >= %s; the driver's CUDA is unknown" % (
            entry, isa, _v(need)), PTX_DOC, entry=entry)
    if limit >= need:
        return Answer(RUNS, PTX_JIT, "%s: PTX ISA %s (CUDA %s) is JIT-compiled by the driver (CUDA %s) at the module's first load" % (
            entry, isa, _v(need), _v(limit)), PTX_DOC, entry=entry,
            caveats=("the JIT result is cached in CUDA_CACHE_PATH up to CUDA_CACHE_MAXSIZE",))
    return Answer(FAILS, UNSUPPORTED_PTX, "%s: PTX ISA %s was written by a CUDA %s toolkit; the driver (CUDA %s) JIT-compiles PTX up to "
                  "CUDA %s's, and minor-version compatibility does not lift that" % (entry, isa, _v(need), _v(driver.cuda or 0), _v(limit)),
                  PTX_DOC + "; " + MINOR_DOC + "; " + H200_PROOF, error=ERRORS[UNSUPPORTED_PTX], entry=entry)


def device_code(driver: Driver, cc: Optional[str], sass: Sequence[str], ptx: Sequence[str],
                ptx_isa: "Mapping[str, str]", jit_disabled: bool = False) -> Answer:
    """How a GPU of compute capability ``cc`` runs a binary's device code."""
    if cc is None:
        return Answer(UNKNOWN, "", "the GPU's compute capability is unknown", karch.SOURCE)
    try:
        karch.parse_cc(cc)
    except ValueError:
        return Answer(UNKNOWN, "", "the GPU's compute capability %r cannot be read as X.Y" % (cc,), karch.SOURCE)
    f = karch.fit(sass, (), cc)
    if f.kind == "sass":
        return Answer(RUNS, SASS, "compute capability %s runs its %s SASS" % (cc, f.entry), karch.SOURCE, entry=f.entry)
    f = karch.fit((), ptx, cc)
    if f.kind != "ptx":
        return Answer(FAILS, NO_KERNEL_IMAGE, "neither SASS nor PTX for compute capability %s (SASS %s; PTX %s)" % (
            cc, " ".join(sass) or "none", " ".join(ptx) or "none"), karch.SOURCE, error=ERRORS[NO_KERNEL_IMAGE])
    if jit_disabled:
        return Answer(FAILS, JIT_DISABLED, "compute capability %s has only %s PTX and the PTX JIT is disabled" % (cc, f.entry),
                      "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html",
                      error=ERRORS[JIT_DISABLED], entry=f.entry)
    # Several PTX entries may fit; the driver JIT-compiles the best one (closest to the GPU).
    return ptx_jit(driver, f.entry or "", ptx_isa.get(f.entry or ""))


def summary(ans: Answer) -> str:
    """One line: the answer, as evidence."""
    head = {RUNS: "runs", FAILS: "fails", UNKNOWN: "unknown"}[ans.state]
    how = (" (%s)" % ans.how) if ans.how and ans.state == RUNS else ""
    err = (": '%s'" % ans.error) if ans.error else ""
    return "%s%s%s -- %s [%s]" % (head, how, err, ans.why, ans.source)
