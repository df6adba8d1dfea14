"""Environment-variable rules: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, CUDA_LAUNCH_BLOCKING,
CUDA_MODULE_LOADING (https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html;
the reports each rule cites, docs/rules.md; H200 measurements, docs/gpu.md)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List

from cudafix.knowledge import measured
from cudafix.model.findings import ERROR, WARNING, Outcome, Rule
from cudafix.model.fixes import Fix
from cudafix.model.visible_devices import parse_cuda_visible_devices, resolve_visible
from cudafix.rules._util import driver_version, env_value, gpu_label, no_nvidia, nvidia_hardware, ok, parse_int, problem, torch_cuda_mm, unknown
from cudafix.model.snapshot import Snapshot

ENV_DOC = "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html"
LAZY_DOC = "https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/lazy-loading.html"


def _has_cuda_torch(snap: Snapshot) -> bool:
    return any(t.cuda for t in snap.torch)


# -- CUDA_VISIBLE_DEVICES ------------------------------------------------------------------


def check_visible_hides_all(snap: Snapshot) -> Iterable[Outcome]:
    raw = env_value(snap, "CUDA_VISIBLE_DEVICES")
    if raw is None:
        return [ok("CUDA_VISIBLE_DEVICES is unset: every GPU is visible", subject="CUDA_VISIBLE_DEVICES")]
    spec = parse_cuda_visible_devices(raw)
    gpus = snap.gpus.gpus
    why_hidden = None
    if spec.hides_all:
        if not spec.entries:
            why_hidden = "CUDA_VISIBLE_DEVICES='' (set and empty) makes no GPU visible"
        else:
            why_hidden = "CUDA_VISIBLE_DEVICES=%r: the first entry %r is not a GPU index, UUID or MIG id, and CUDA stops parsing at the first invalid entry" % (raw, spec.entries[0].text)
    elif gpus:
        res = resolve_visible(gpus, raw, env_value(snap, "CUDA_DEVICE_ORDER"))
        if res.stopped_at == 0:
            why_hidden = "CUDA_VISIBLE_DEVICES=%r: the first entry %r matches none of the %d GPU(s) (%s), and CUDA stops parsing at the first invalid entry" % (
                raw, res.invalid[0], len(gpus), ", ".join(gpu_label(g) for g in gpus))
        elif res.indices is None:
            return [unknown("which GPUs CUDA_VISIBLE_DEVICES=%r leaves cannot be decided" % raw, res.reason, subject="CUDA_VISIBLE_DEVICES")]
        else:
            return [ok("CUDA_VISIBLE_DEVICES=%r leaves %d of %d GPU(s) visible" % (raw, len(res.indices), len(gpus)), res.reason, subject="CUDA_VISIBLE_DEVICES")]
    else:
        why = snap.gpus.unknown.get("gpus") or "no GPU list in the snapshot"
        return [unknown("CUDA_VISIBLE_DEVICES=%r: whether it matches a GPU is unknown" % raw, "GPUs not known: %s" % why, subject="CUDA_VISIBLE_DEVICES")]
    # Every GPU is hidden.  It only matters where there is something to hide or a CUDA torch.
    if not gpus and not _has_cuda_torch(snap) and not driver_version(snap):
        return [ok("CUDA_VISIBLE_DEVICES hides all GPUs, but there is no NVIDIA GPU, driver or CUDA torch here", why_hidden, subject="CUDA_VISIBLE_DEVICES")]
    if not gpus and nvidia_hardware(snap) is False and "driver" not in snap.assumed:
        # A CUDA torch on a machine without NVIDIA hardware runs on the CPU whatever the variable
        # says (no-driver's note): hiding GPUs that do not exist changes nothing for the user.
        return [ok("CUDA_VISIBLE_DEVICES hides all GPUs, but this machine has no NVIDIA GPU hardware: nothing is hidden",
                   why_hidden, "the PCI bus holds no NVIDIA display/3D device", subject="CUDA_VISIBLE_DEVICES")]
    ev = [why_hidden]
    if gpus:
        ev.append("GPUs present: %s" % ", ".join(gpu_label(g) for g in gpus))
    if _has_cuda_torch(snap):
        t = [t for t in snap.torch if t.cuda][0]
        ev.append("torch %s is a CUDA %s build: torch.cuda.is_available() returns False and work runs on the CPU" % (t.full_version, t.cuda))
    fix = Fix(
        summary="unset CUDA_VISIBLE_DEVICES (or list the GPUs to use, e.g. CUDA_VISIBLE_DEVICES=0)",
        commands=("unset CUDA_VISIBLE_DEVICES",),
    )
    # Advice, not automatic: hiding every GPU can be deliberate (forcing a CPU run).
    return [problem("CUDA_VISIBLE_DEVICES=%r hides every GPU" % raw, ev, fix=fix, subject="CUDA_VISIBLE_DEVICES")]


def check_visible_invalid(snap: Snapshot) -> Iterable[Outcome]:
    raw = env_value(snap, "CUDA_VISIBLE_DEVICES")
    if raw is None:
        return [ok("CUDA_VISIBLE_DEVICES is unset", subject="CUDA_VISIBLE_DEVICES")]
    spec = parse_cuda_visible_devices(raw)
    if spec.hides_all:
        return [ok("CUDA_VISIBLE_DEVICES=%r hides every GPU (reported by cuda-visible-devices-hides-all)" % raw, subject="CUDA_VISIBLE_DEVICES")]
    gpus = snap.gpus.gpus
    if not gpus:
        if spec.stopped_at is not None:
            bad = spec.entries[spec.stopped_at].text
            kept = [e.text for e in spec.entries[: spec.stopped_at]]
            return [problem(
                "CUDA_VISIBLE_DEVICES=%r: entry %r is invalid; CUDA ignores it and everything after it" % (raw, bad),
                ["%r is not a GPU index, UUID or MIG id; CUDA stops parsing at the first invalid entry, so only %s can be visible" % (bad, ", ".join(kept))],
                fix=Fix(summary="remove the invalid entries", commands=("export CUDA_VISIBLE_DEVICES=%s" % ",".join(kept),)),
                subject="CUDA_VISIBLE_DEVICES",
            )]
        why = snap.gpus.unknown.get("gpus") or "no GPU list in the snapshot"
        return [unknown("CUDA_VISIBLE_DEVICES=%r: whether every entry matches a GPU is unknown" % raw, "GPUs not known: %s" % why, subject="CUDA_VISIBLE_DEVICES")]
    res = resolve_visible(gpus, raw, env_value(snap, "CUDA_DEVICE_ORDER"))
    if res.stopped_at == 0:
        return [ok("CUDA_VISIBLE_DEVICES=%r: the first entry matches no GPU (reported by cuda-visible-devices-hides-all)" % raw, subject="CUDA_VISIBLE_DEVICES")]
    if res.stopped_at is None:
        if res.indices is None:
            return [unknown("whether CUDA_VISIBLE_DEVICES=%r is valid cannot be decided" % raw, res.reason, subject="CUDA_VISIBLE_DEVICES")]
        return [ok("every entry of CUDA_VISIBLE_DEVICES=%r matches a GPU" % raw, res.reason, subject="CUDA_VISIBLE_DEVICES")]
    entries = [e.text for e in spec.entries]
    kept = entries[: res.stopped_at]
    dropped = entries[res.stopped_at:]
    ev = [
        "NVIDIA: \"If an invalid index is encountered, only devices with indices that appear before the invalid index in the list are visible\"",
        "%d GPU(s) here: %s" % (len(gpus), ", ".join(gpu_label(g) for g in gpus)),
        "%r matches no GPU; visible: %s; ignored: %s" % (res.invalid[0], ", ".join(kept), ", ".join(dropped)),
    ]
    fix = Fix(summary="list only GPUs that exist", commands=("export CUDA_VISIBLE_DEVICES=%s" % ",".join(kept),))
    return [problem(
        "CUDA_VISIBLE_DEVICES=%r: entry %r matches no GPU; only %d of %d listed device(s) are visible" % (raw, res.invalid[0], len(kept), len(entries)),
        ev, fix=fix, subject="CUDA_VISIBLE_DEVICES",
    )]


# -- CUDA_DEVICE_ORDER ---------------------------------------------------------------------


def check_device_order(snap: Snapshot) -> Iterable[Outcome]:
    gpus = snap.gpus.gpus
    if not gpus:
        why = snap.gpus.unknown.get("gpus")
        if why and not no_nvidia(snap):
            return [unknown("GPU models unknown", why, subject="CUDA_DEVICE_ORDER")]
        return [ok("no NVIDIA GPU: device order does not matter", subject="CUDA_DEVICE_ORDER")]
    models = []
    for g in gpus:
        if g.name not in models:
            models.append(g.name)
    if len(models) < 2:
        return [ok("%d GPU(s), all %s: CUDA and nvidia-smi order agree" % (len(gpus), models[0]), subject="CUDA_DEVICE_ORDER")]
    order = (env_value(snap, "CUDA_DEVICE_ORDER") or "").strip()
    if order.upper() == "PCI_BUS_ID":
        return [ok("CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA indices follow nvidia-smi's PCI order", subject="CUDA_DEVICE_ORDER")]
    shown = "unset" if not order else "=%s" % order
    ev = [
        "GPU models differ: %s" % ", ".join(gpu_label(g) for g in gpus),
        "CUDA_DEVICE_ORDER %s: CUDA numbers GPUs fastest first (a heuristic), nvidia-smi by PCI bus ID, so cuda:0 / --device 0 may not be nvidia-smi's GPU 0" % shown,
    ]
    fix = Fix(summary="number GPUs as nvidia-smi does", commands=("export CUDA_DEVICE_ORDER=PCI_BUS_ID",))
    # Advice only: changing the order changes which GPU existing scripts run on.
    return [problem("mixed GPU models and CUDA_DEVICE_ORDER %s: CUDA device indices differ from nvidia-smi's" % shown, ev, fix=fix, subject="CUDA_DEVICE_ORDER")]


# -- CUDA_LAUNCH_BLOCKING ------------------------------------------------------------------


def check_launch_blocking(snap: Snapshot) -> Iterable[Outcome]:
    raw = env_value(snap, "CUDA_LAUNCH_BLOCKING")
    if raw is None:
        return [ok("CUDA_LAUNCH_BLOCKING is unset: kernels launch asynchronously", subject="CUDA_LAUNCH_BLOCKING")]
    n = parse_int(raw)
    if n is None:
        return [unknown("CUDA_LAUNCH_BLOCKING=%r is not a number; whether CUDA treats it as on is not documented" % raw, subject="CUDA_LAUNCH_BLOCKING")]
    if n == 0:
        return [ok("CUDA_LAUNCH_BLOCKING=%s: kernels launch asynchronously" % raw, subject="CUDA_LAUNCH_BLOCKING")]
    ev = [
        "CUDA_LAUNCH_BLOCKING=%s disables asynchronous kernel launches (a debugging setting; NVIDIA CUDA environment variables)" % raw,
        measured.LAUNCH_BLOCKING.evidence(),
    ]
    fix = Fix(summary="unset CUDA_LAUNCH_BLOCKING once debugging is done", commands=("unset CUDA_LAUNCH_BLOCKING",))
    # Advice only: it is set on purpose while debugging; removing it silently would defeat that.
    return [problem("CUDA_LAUNCH_BLOCKING=%s serialises every CUDA kernel launch" % raw, ev, fix=fix, subject="CUDA_LAUNCH_BLOCKING")]


# -- CUDA_MODULE_LOADING -------------------------------------------------------------------


def check_module_loading(snap: Snapshot) -> Iterable[Outcome]:
    out: List[Outcome] = []
    for name in ("CUDA_MODULE_LOADING", "CUDA_MODULE_DATA_LOADING"):
        raw = env_value(snap, name)
        if raw is None or raw.strip().upper() != "EAGER":
            continue
        t = snap.primary_torch
        mm = torch_cuda_mm(t) if t else None
        if t is None or mm is None:
            out.append(ok("%s=EAGER but there is no CUDA torch build here" % name, subject=name))
            continue
        if mm < (11, 7):
            out.append(ok("%s=EAGER has no effect on torch built with CUDA %s: lazy loading needs a CUDA 11.7+ runtime" % (name, t.cuda), subject=name))
            continue
        dv = driver_version(snap)
        if dv is None:
            out.append(unknown("%s=EAGER: whether lazy loading is available is unknown (driver version unknown)" % name,
                               "lazy loading needs an R515+ user-mode driver library", subject=name))
            continue
        try:
            branch = int(dv.split(".")[0])
        except ValueError:
            out.append(unknown("%s=EAGER: driver version %r unreadable" % (name, dv), subject=name))
            continue
        if branch < 515:
            out.append(ok("%s=EAGER: lazy loading is not available anyway with driver %s (needs R515+)" % (name, dv), subject=name))
            continue
        ev = [
            "lazy loading needs a CUDA 11.7+ runtime and an R515+ driver: torch %s uses CUDA %s, driver %s" % (t.full_version, t.cuda, dv),
            "%s=EAGER loads every kernel of every CUDA library at the first CUDA call" % name,
            measured.MODULE_LOADING_EAGER.evidence(),
        ]
        fix = Fix(summary="unset %s (lazy loading is the default)" % name, commands=("unset %s" % name,))
        # Advice only: EAGER is sometimes set on purpose (benchmarking, to avoid load-time stalls later).
        out.append(problem("%s=EAGER turns off lazy loading: slow first CUDA call and about twice the device memory" % name, ev, fix=fix, subject=name))
    if not out:
        out.append(ok("CUDA_MODULE_LOADING / CUDA_MODULE_DATA_LOADING not EAGER: lazy loading where available", subject="CUDA_MODULE_LOADING"))
    return out


RULES = (
    Rule(
        id="cuda-visible-devices-hides-all",
        severity=ERROR,
        title="CUDA_VISIBLE_DEVICES leaves no GPU visible (empty, -1, or a bad first entry)",
        check=check_visible_hides_all,
        needs=("env", "gpus", "driver", "torch"),
        severity_basis="an error where there are GPUs (or a driver) to hide: torch silently runs on the CPU. On a machine whose PCI bus holds no NVIDIA GPU it hides nothing, so it is ok there (and the startup hook says nothing).",
        cause="CUDA_VISIBLE_DEVICES set to '' hides every GPU; an invalid first entry (-1, an index beyond the GPU count, a UUID that matches nothing) also leaves none, because CUDA stops parsing at the first invalid entry. Often a hard-coded os.environ['CUDA_VISIBLE_DEVICES'] from another machine, or an empty value exported by a script.",
        symptoms=(
            "RuntimeError: No CUDA GPUs are available",
            "torch.cuda.is_available() returns False; work silently runs on the CPU (%s)" % measured.CPU_FALLBACK.evidence(),
            "conda: __cuda virtual package missing (cuInit returns 100/101 for empty or invalid values)",
        ),
        evidence_used="the CUDA_VISIBLE_DEVICES value (unset vs empty), the GPU list (index, UUID) from NVML or /proc/driver/nvidia/gpus, whether torch is a CUDA build",
        fix_text="unset CUDA_VISIBLE_DEVICES, or set it to GPUs that exist (indices as nvidia-smi numbers them, or GPU UUIDs). Not changed automatically: hiding all GPUs can be deliberate.",
        sources=(ENV_DOC, "Grace9994/CoMoSVC#6", "ziplab/PTQD#13", "thuml/Time-Series-Library#768", "conda/conda#11667"),
    ),
    Rule(
        id="cuda-visible-devices-invalid",
        severity=WARNING,
        title="Some CUDA_VISIBLE_DEVICES entries match no GPU (parsing stops at the first bad one)",
        check=check_visible_invalid,
        needs=("env", "gpus"),
        cause="An entry names a GPU index beyond the GPU count, a UUID that matches nothing, or is not an index/UUID at all. CUDA keeps only the devices listed before the first invalid entry, so later GPUs silently disappear.",
        symptoms=(
            "fewer GPUs than expected: torch.cuda.device_count() lower than the CUDA_VISIBLE_DEVICES list",
            "RuntimeError: CUDA error: invalid device ordinal",
        ),
        evidence_used="the CUDA_VISIBLE_DEVICES value, the GPU list (index, UUID), CUDA_DEVICE_ORDER",
        fix_text="list only GPUs that exist (the command keeps the valid entries before the first invalid one).",
        sources=(ENV_DOC, "Grace9994/CoMoSVC#6"),
    ),
    Rule(
        id="device-order",
        severity=WARNING,
        title="Mixed GPU models and CUDA_DEVICE_ORDER unset: CUDA indices differ from nvidia-smi's",
        check=check_device_order,
        needs=("env", "gpus"),
        cause="CUDA numbers devices FASTEST_FIRST by default, nvidia-smi by PCI bus ID. With two or more different GPU models, cuda:0 (and CUDA_VISIBLE_DEVICES=0, --device 0) can be a different card than nvidia-smi's GPU 0.",
        symptoms=(
            "--device 0 seemingly ignored: the job runs on another GPU than the one nvidia-smi shows as 0",
            "the expected GPU stays idle while another one fills up",
        ),
        evidence_used="GPU names from NVML or /proc/driver/nvidia/gpus, CUDA_DEVICE_ORDER",
        fix_text="export CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA and nvidia-smi agree. Advice only: it changes which GPU existing scripts use.",
        sources=(ENV_DOC, "wookayin/gpustat (README: CUDA_DEVICE_ORDER=PCI_BUS_ID)"),
    ),
    Rule(
        id="launch-blocking",
        severity=WARNING,
        title="CUDA_LAUNCH_BLOCKING=1 serialises every kernel",
        check=check_launch_blocking,
        needs=("env",),
        cause="CUDA_LAUNCH_BLOCKING=1 makes every kernel launch synchronous. torch's error messages suggest it for debugging ('For debugging consider passing CUDA_LAUNCH_BLOCKING=1') and it is often left set afterwards.",
        symptoms=(
            "GPU utilisation low, CPU busy; training/inference about 3x slower (%s)" % measured.LAUNCH_BLOCKING.evidence(),
        ),
        evidence_used="the CUDA_LAUNCH_BLOCKING value",
        fix_text="unset CUDA_LAUNCH_BLOCKING when not debugging.",
        sources=(ENV_DOC, "docs/gpu.md (H200 measurement)"),
    ),
    Rule(
        id="module-loading-eager",
        severity=WARNING,
        title="CUDA_MODULE_LOADING=EAGER where lazy loading is available",
        check=check_module_loading,
        needs=("env", "torch", "driver"),
        cause="With EAGER, the CUDA runtime loads every kernel of every library at the first CUDA call instead of on first use. Lazy loading needs a CUDA 11.7+ runtime and an R515+ driver; it is the default on Linux since CUDA 12.2 (torch set LAZY itself from 1.13).",
        symptoms=(
            "first CUDA operation takes seconds and device memory used at start roughly doubles (%s)" % measured.MODULE_LOADING_EAGER.evidence(),
        ),
        evidence_used="CUDA_MODULE_LOADING / CUDA_MODULE_DATA_LOADING, torch.version.cuda, driver version",
        fix_text="unset CUDA_MODULE_LOADING (and CUDA_MODULE_DATA_LOADING).",
        sources=(LAZY_DOC, ENV_DOC, "pytorch/pytorch#85692", "docs/gpu.md (H200 measurement)"),
    ),
)
