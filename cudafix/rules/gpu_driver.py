"""The driver vs the GPU itself: a driver branch that cannot drive the GPU's architecture.

Independent of torch: it is judged in an env without torch and in what-if mode
(`cudafix check --assume-driver 470.57.02 --assume-gpu "NVIDIA H100"`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List, Optional, Tuple

from cudafix.knowledge import arch_drivers as ad
from cudafix.knowledge import cuda_driver
from cudafix.knowledge import gpus as gpu_table
from cudafix.model.findings import ERROR, Outcome, Rule
from cudafix.model.fixes import Fix
from cudafix.model.snapshot import Snapshot
from cudafix.rules._util import driver_version, gpu_label, hardware_evidence, major_minor, nvidia_hardware, ok, problem, unknown


def _driver_fix(rows: List[ad.ArchDrivers], too_new: bool) -> Fix:
    if too_new:
        last = min(r.last_branch for r in rows if r.last_branch is not None)
        archs = ", ".join(sorted({r.arch for r in rows}))
        return Fix(summary="install a driver of branch R%d or older: R%d is the last branch that supports %s" % (last, last, archs))
    need = max(rows, key=lambda r: r.min_branch or 0)
    return Fix(summary="upgrade the NVIDIA driver to branch R%d or newer (e.g. >= %s, the minimum of CUDA %s, the first toolkit for %s)" % (
        need.min_branch, need.min_driver, need.first_cuda, need.arch))


def _arch_row(g) -> "Tuple[Optional[str], Optional[ad.ArchDrivers]]":
    """(compute capability "X.Y", its architecture's driver row): the GPU's own value, else the
    product table's (cited per row) for a name-only GPU (/proc/driver/nvidia/gpus)."""
    cc_text = g.compute_capability or gpu_table.compute_capability(g.name)
    mm = major_minor(cc_text) if cc_text else None
    if mm is None:
        return None, None
    cc = "%d.%d" % mm
    return cc, ad.row_for_cc(cc)


def check_driver_gpu(snap: Snapshot) -> Iterable[Outcome]:
    dv = driver_version(snap)
    gpus = snap.gpus.gpus
    hw = snap.hardware
    if (not gpus and hw is not None and hw.nvidia_pci and dv and snap.gpus.found_via.get("gpus") == "NVML"
            and "driver" not in snap.assumed and "gpus" not in snap.assumed):
        # NVML answered and listed nothing, yet the PCI bus holds NVIDIA GPUs: the loaded driver
        # ignores them (a branch too new or too old for the architecture, an open kernel module
        # on a pre-Turing GPU); the kernel log names the reason.
        n = len(hw.nvidia_pci)
        return [problem(
            "driver %s is loaded but drives none of the %d NVIDIA GPU%s on the PCI bus" % (dv, n, "" if n == 1 else "s"),
            [hardware_evidence(snap),
             "NVML (driver %s) lists no GPU: the driver ignores %s" % (dv, "it" if n == 1 else "them"),
             "the kernel log says why (`dmesg | grep NVRM`): e.g. \"supported through the NVIDIA 580.xx Legacy drivers\" (a branch past the architecture's last, %s), or an open kernel module on a GPU without GSP (before Turing)" % ad.MATRIX,
             "in a container: the GPUs may simply not be passed in (docker run --gpus all)"],
            fix=Fix(summary="install a driver branch that supports this GPU (the kernel log names it; Maxwell/Pascal/Volta: R580 or older, proprietary kernel module), then reboot",
                    commands=("sudo dmesg | grep NVRM",)),
            subject="GPU")]
    if not gpus:
        if nvidia_hardware(snap):
            why = snap.gpus.unknown.get("gpus") or "no GPU list"
            return [unknown("which NVIDIA GPU model this is is unknown, so whether the driver drives it is unknown", why, hardware_evidence(snap), subject="GPU")]
        return [ok("no NVIDIA GPU listed: no driver-vs-GPU question", subject="GPU")]
    if not dv:
        return [ok("no NVIDIA driver: nothing to compare with the GPU (see no-driver)", subject="GPU")]
    if not cuda_driver.is_driver_version(dv):
        return [unknown("driver version %r unreadable" % dv, subject="GPU")]
    branch = cuda_driver.driver_branch(dv)
    via = snap.driver.found_via.get("kernel_version") or snap.driver.found_via.get("libcuda_version") or ""
    out: List[Outcome] = []
    bad_old: List[ad.ArchDrivers] = []
    bad_new: List[ad.ArchDrivers] = []
    bad_gpus: List[str] = []
    evidence: List[str] = ["driver %s (branch R%d%s)" % (dv, branch, "; %s" % via if via else "")]
    for g in gpus:
        # /proc/driver/nvidia/gpus (the hook's probe, no NVML) names the GPU but gives no compute
        # capability: the product table (knowledge.gpus, cited per row) fills it from the name.
        cc, row = _arch_row(g)
        if cc is None:
            out.append(unknown("%s: compute capability unknown, so its architecture is unknown" % gpu_label(g), subject="GPU%d" % g.index))
            continue
        if row is None:
            out.append(unknown("%s: compute capability %s is not in cudafix's architecture/driver table" % (gpu_label(g), cc), subject="GPU%d" % g.index))
            continue
        verdict = ad.drives(row, branch)
        if verdict is None:
            out.append(unknown("%s (%s): whether driver branch R%d drives it is unknown (no first branch on record)" % (gpu_label(g), row.arch, branch), subject="GPU%d" % g.index))
        elif verdict:
            out.append(ok("driver branch R%d drives %s (%s: R%s%s)" % (
                branch, gpu_label(g), row.arch, row.min_branch or "?", "..R%d" % row.last_branch if row.last_branch else "+"), subject="GPU%d" % g.index))
        else:
            too_new = row.last_branch is not None and branch > row.last_branch
            (bad_new if too_new else bad_old).append(row)
            bad_gpus.append(gpu_label(g))
            if too_new:
                evidence.append("%s is %s: NVIDIA's last driver branch for %s is R%d (%s)" % (gpu_label(g), row.arch, row.arch, row.last_branch, ad.MATRIX))
            else:
                evidence.append("%s is %s (compute capability %s): first supported by CUDA %s, whose minimum driver is %s (branch R%d)" % (
                    gpu_label(g), row.arch, cc, row.first_cuda, row.min_driver, row.min_branch))
    if bad_gpus:
        evidence.append("the driver does not drive the GPU at all: no CUDA device, whatever torch or toolkit is installed")
        evidence.extend(_torch_too(snap))
        what = "too new for" if bad_new and not bad_old else "too old for"
        fix = _driver_fix(bad_new if bad_new and not bad_old else bad_old, too_new=bool(bad_new) and not bad_old)
        return [problem("driver %s (R%d) is %s %s: it cannot drive %s" % (
            dv, branch, what, ", ".join(bad_gpus), "this GPU" if len(bad_gpus) == 1 else "these GPUs"),
            evidence, fix=fix, subject="GPU")] + [o for o in out if o.verdict != "ok"]
    return out


def _torch_too(snap: Snapshot) -> List[str]:
    """torch's CUDA runtime on this driver, when it fails here too (one cause: driver-too-old
    leaves it to this finding when the upgrade the GPU needs runs torch)."""
    from cudafix.knowledge import compat
    from cudafix.model import cuda as cudaver

    cuda = compat.torch_cuda(snap)
    a = compat.runtime(compat.driver_of(snap), cuda)
    need = upgrade_cuda(snap)
    if not a.fails or need is None or not compat.runtime(compat.Driver(need), cuda).runs:
        return []
    return ["torch %s (CUDA %s) fails on this driver as well (%s); the upgrade this GPU needs covers it" % (
        snap.primary_torch.full_version, cudaver.version_text(cuda or 0), a.why)]


def upgrade_cuda(snap: Snapshot) -> Optional[int]:
    """The CUDA release (13000) whose minimum driver every GPU that this driver is too old for
    needs (the driver-gpu-unsupported fix); None when no GPU needs a newer driver or it is unknown."""
    from cudafix.model import cuda as cudaver

    dv = driver_version(snap)
    if not dv or not cuda_driver.is_driver_version(dv):
        return None
    branch = cuda_driver.driver_branch(dv)
    need = None
    for g in snap.gpus.gpus:
        _cc, row = _arch_row(g)
        if row is not None and ad.drives(row, branch) is False and not (row.last_branch is not None and branch > row.last_branch):
            need = max(need or 0, cudaver.version_int(row.first_cuda))
    return need


RULES = (
    Rule(
        id="driver-gpu-unsupported",
        severity=ERROR,
        title="The driver branch cannot drive the GPU's architecture (too old, or past its last branch)",
        check=check_driver_gpu,
        needs=("driver", "gpus"),
        cause="Each GPU architecture is driven from the first driver branch of the first CUDA toolkit that supports it (Hopper and Ada: CUDA 11.8, R520; Blackwell: CUDA 12.8, R570; Ampere: CUDA 11.0, R450), and NVIDIA ends support after a last branch (Maxwell, Pascal, Volta: R580; Kepler: R470). Outside that range the driver does not drive the GPU: no CUDA device at all, whatever torch build is installed. The same shows on a real machine as a loaded driver whose NVML lists none of the NVIDIA GPUs on the PCI bus (the kernel log names why: a legacy-only GPU, or an open kernel module on a GPU without GSP).",
        symptoms=(
            "torch.cuda.is_available() returns False",
            "No devices were found",
        ),
        evidence_used="the driver version (kernel module, else libcuda; or --assume-driver), each GPU's compute capability (NVML, or --assume-gpu), the NVIDIA GPUs on the PCI bus (/sys/bus/pci/devices), NVIDIA's architecture matrix and the toolkit release notes' minimum drivers (cudafix/knowledge/arch_drivers.py)",
        fix_text="upgrade the driver to at least the architecture's first branch (e.g. >= 520.61.05 for Hopper, >= 570.26 for Blackwell); for Maxwell/Pascal/Volta stay on R580 or older, for Kepler on R470 or older.",
        sources=(ad.MATRIX, ad.RN, ad.AIE23, "https://github.com/zzzhouuu/truenas-nvidia-drivers/issues/20",
                 "https://github.com/NixOS/nixos-hardware/issues/1828"),
    ),
)
