"""GPU architecture rules: does torch carry code each visible GPU can run, natively (SASS) or
through the driver's PTX JIT, and can the JIT cache hold it (https://docs.nvidia.com/cuda/cuda-programming-guide/01-introduction/cuda-platform.html;
https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html; the reports each rule cites, docs/rules.md)."""

from __future__ import annotations


TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List, Optional, Tuple

from cudafix.model.findings import ERROR, INFO, WARNING, Outcome, Rule
from cudafix.model.fixes import SET, UNSET, EnvOp, EnvPatch, Fix
from cudafix.knowledge import arch as karch
from cudafix.knowledge import jit_cache
from cudafix.rules._util import (
    env_value,
    fmt_bytes,
    gpu_label,
    no_nvidia,
    ok,
    parse_int,
    problem,
    recommend_commands,
    torch_label,
    unknown,
)
from cudafix.model.snapshot import Snapshot
from cudafix.rules import _companions as _companions_mod
from cudafix.rules._torchfit import Coverage, GpuFit, _fits, _gpu_cc, _is_main  # noqa: F401  (the arch rules' view of torch's code)

CACHE_MAX = jit_cache.MAX_BYTES
ENV_DOC = jit_cache.ENV_DOC
# An unset CUDA_CACHE_MAXSIZE is judged against both documented defaults (knowledge/jit_cache.py).
DEFAULT_LOW, DEFAULT_HIGH = jit_cache.DEFAULT_OLDER_DOCS_BYTES, jit_cache.DEFAULT_CURRENT_DOCS_BYTES


def _cov_text(covs: List[Coverage]) -> List[str]:
    out = []
    for c in covs:
        out.append("%s: SASS %s; PTX %s (%s)" % (c.library.rsplit("/", 1)[-1], " ".join(c.sass) or "none",
                                                 " ".join(c.ptx) or "none", c.how))
    return out


def _no_gpu_outcome(snap: Snapshot, what: str) -> Outcome:
    if snap.gpus.gpus and not snap.visible_gpus():
        return ok("no visible GPU (CUDA_VISIBLE_DEVICES): nothing to run %s on" % what, subject="arch")
    why = snap.gpus.unknown.get("gpus")
    if why and not no_nvidia(snap):
        return unknown("GPU list unknown: %s" % why, subject="arch")
    return ok("no NVIDIA GPU: no device code needed", subject="arch")


# -- arch-unsupported ----------------------------------------------------------------------


def check_arch_unsupported(snap: Snapshot) -> Iterable[Outcome]:
    t, covs, fits, blocked = _fits(snap)
    if t is None:
        return [ok("no CUDA torch build", subject="arch")]
    if not fits:
        return [_no_gpu_outcome(snap, "torch's kernels")]
    out: List[Outcome] = []
    for f in fits:
        label = gpu_label(f.gpu)
        if f.kind == "unknown":
            out.append(unknown("%s: whether %s has code for it is unknown" % (label, torch_label(t)), f.why, subject="GPU%d" % f.gpu.index))
            continue
        if f.kind in ("sass", "ptx") and f.aux_missing:
            sm = karch.cc_to_sm(f.cc or "0.0")
            libs = ", ".join(p.rsplit("/", 1)[-1] for p in f.aux_missing)
            # Info only: the core library runs on this GPU; which operations live in the auxiliary
            # library (and whether they are reached) is not known from the binary alone.
            out.append(problem(
                "%s: %s carries no code for %s; kernels of that library cannot run on it" % (label, libs, sm),
                _cov_text(covs) + ["torch's core CUDA library runs on %s; %s has neither %s-compatible SASS nor usable PTX" % (label, libs, sm)],
                fix=None, severity=INFO, subject="GPU%d" % f.gpu.index,
            ))
            continue
        if f.kind in ("sass", "ptx"):
            how = "; ".join("%s: %s %s" % (e[0].rsplit("/", 1)[-1], e[2], "SASS" if e[1] == "sass" else "PTX (JIT)") for e in f.entries)
            out.append(ok("%s runs %s (%s)" % (label, torch_label(t), how), f.why, subject="GPU%d" % f.gpu.index))
            continue
        sm = karch.cc_to_sm(f.cc or "0.0")
        ev = _cov_text(covs) + [
            "%s is CC %s: SASS sm_XY runs only on the same major with minor >= Y; PTX compute_XY is JIT-compiled for CC >= X.Y" % (label, f.cc),
        ]
        if blocked:
            ev.append(blocked)
        if f.why:
            ev.append(f.why)
        cmds, notes = recommend_commands(snap)
        summary = "install a torch build with native %s code that fits the driver and Python %s" % (sm, snap.python.version or "?")
        if not cmds and notes:
            summary += "; " + notes[0]
        out.append(problem(
            "%s has no compatible kernels in %s: CUDA error: no kernel image is available for execution on the device" % (label, torch_label(t)),
            ev + _companions_mod.companion_evidence(snap, "arch-unsupported"), fix=Fix(summary=summary, commands=cmds), subject="GPU%d" % f.gpu.index,
        ))
    return out


# -- arch-ptx-jit / JIT cache --------------------------------------------------------------


def _cache_state(snap: Snapshot) -> Tuple[Optional[int], str]:
    """(effective CUDA_CACHE_MAXSIZE in bytes or None when it depends on the driver, description)."""
    jc = snap.jit_cache
    raw = env_value(snap, "CUDA_CACHE_MAXSIZE")
    if raw is not None and parse_int(raw) is not None:
        return min(parse_int(raw) or 0, CACHE_MAX), "CUDA_CACHE_MAXSIZE=%s (%s)" % (raw, fmt_bytes(min(parse_int(raw) or 0, CACHE_MAX)))
    if jc.maxsize is not None and (jc.maxsize_via or "") not in ("", "driver default"):
        return jc.maxsize, "%s (%s)" % (fmt_bytes(jc.maxsize), jc.maxsize_via)
    return None, "driver default (256 MiB in older CUDA docs, 1 GiB in current ones)"


def _cache_disabled(snap: Snapshot) -> bool:
    return bool(snap.jit_cache.disabled or parse_int(env_value(snap, "CUDA_CACHE_DISABLE")))


def _holds(size: Optional[int], need: Optional[int]) -> Optional[bool]:
    """Whether a cache of ``size`` (None: driver default) holds ``need`` bytes; None if undecidable."""
    if need is None:
        return None
    if size is None:
        if need <= DEFAULT_LOW:
            return True
        if need > DEFAULT_HIGH:
            return False
        return None
    return size >= need


def _jit_reasons(snap: Snapshot) -> Tuple[List[GpuFit], List[str], Optional[int]]:
    """GPUs that need the PTX JIT, other reasons for JIT, and the total PTX to hold (None: unknown)."""
    t, covs, fits, _ = _fits(snap)
    jit = [f for f in fits if f.kind == "ptx"]
    other: List[str] = []
    force = [n for n in ("CUDA_FORCE_PTX_JIT", "CUDA_FORCE_JIT") if parse_int(env_value(snap, n))]
    if force and t is not None and any(c.ptx for c in covs):
        other.append("%s=%s: the driver ignores SASS and JIT-compiles the embedded PTX" % (force[0], env_value(snap, force[0])))
    need: Optional[int] = 0
    for f in jit:
        if f.ptx_need is None:
            need = None
            break
        need += f.ptx_need
    if not jit:
        need = None if other else 0
    return jit, other, need


def check_arch_ptx_jit(snap: Snapshot) -> Iterable[Outcome]:
    t, covs, fits, _ = _fits(snap)
    if t is None:
        return [ok("no CUDA torch build", subject="arch")]
    if not fits:
        return [_no_gpu_outcome(snap, "torch's kernels")]
    out: List[Outcome] = []
    size, size_text = _cache_state(snap)
    disabled = _cache_disabled(snap)
    for f in fits:
        label = gpu_label(f.gpu)
        if f.kind == "unknown":
            out.append(unknown("%s: whether it needs the PTX JIT is unknown" % label, f.why, subject="GPU%d" % f.gpu.index))
            continue
        if f.kind != "ptx":
            out.append(ok("%s: %s" % (label, "native SASS, no JIT" if f.kind == "sass" else "no usable code (arch-unsupported)"), subject="GPU%d" % f.gpu.index))
            continue
        ptx = sorted({e[2] for e in f.entries if e[1] == "ptx" and e[2]})
        ev = _cov_text(covs) + [
            "%s is CC %s: no SASS of its major in %s; the driver JIT-compiles %s PTX for it at first use of each kernel" % (label, f.cc, torch_label(t), "/".join(ptx)),
        ]
        holds = _holds(None if disabled else size, f.ptx_need)
        if f.ptx_need is not None:
            ev.append("the JIT cache must hold about %s (the size of that PTX; compiled code is of the same order)" % fmt_bytes(f.ptx_need))
            if f.ptx_need > CACHE_MAX:
                ev.append("that is more than CUDA_CACHE_MAXSIZE's 4 GiB maximum: every start recompiles part of it")
        else:
            ev.append("PTX size not recorded (no fatbin scan): the cache needs room for every kernel's compiled code; 4 GiB is the largest CUDA_CACHE_MAXSIZE")
        if disabled:
            ev.append("the JIT cache is disabled (CUDA_CACHE_DISABLE): every process start recompiles (see jit-cache-too-small)")
        else:
            verdict = {True: "holds it", False: "is too small", None: "may be too small"}[holds]
            ev.append("effective cache: %s at %s: %s" % (size_text, snap.jit_cache.path or "~/.nv/ComputeCache", verdict))
        cmds, notes = recommend_commands(snap)
        ops = ()
        if not disabled and holds is not True and (size is None or size < CACHE_MAX):
            # Safe: CUDA_CACHE_MAXSIZE is only an upper bound on the driver's on-disk JIT cache in the
            # user's own cache dir, read at CUDA init; raising it to NVIDIA's documented maximum
            # (4 GiB) can only avoid recompiles.  Nothing is preallocated.
            ops = (EnvOp(SET, "CUDA_CACHE_MAXSIZE", str(CACHE_MAX)),)
        summary = "install a torch build with native %s code" % karch.cc_to_sm(f.cc or "0.0")
        if ops:
            summary = "JIT cache raised to 4 GiB (CUDA_CACHE_MAXSIZE=%d); %s" % (CACHE_MAX, summary)
        if not cmds and notes:
            summary += "; " + notes[0]
        fix = Fix(summary=summary, auto=bool(ops), env=EnvPatch(ops), commands=cmds, applies_in="both")
        need_txt = (", cache needed ~%s" % fmt_bytes(f.ptx_need)) if f.ptx_need is not None else ""
        out.append(problem(
            "%s runs %s only through PTX JIT from %s: long stall at first use of each kernel%s" % (label, torch_label(t), "/".join(ptx), need_txt),
            ev, fix=fix, subject="GPU%d" % f.gpu.index,
        ))
    return out


def check_jit_cache_too_small(snap: Snapshot) -> Iterable[Outcome]:
    t = snap.primary_torch
    if t is None or not t.cuda:
        return [ok("no CUDA torch build: no JIT", subject="CUDA_CACHE")]
    jit, other, need = _jit_reasons(snap)
    _, _, fits, _ = _fits(snap)
    if not jit and not other:
        if any(f.kind == "unknown" for f in fits):
            return [unknown("whether the PTX JIT is needed is unknown", *[f.why for f in fits if f.kind == "unknown"], subject="CUDA_CACHE")]
        return [ok("no PTX JIT needed: every visible GPU has SASS", subject="CUDA_CACHE")]
    who = ["%s needs the PTX JIT" % gpu_label(f.gpu) for f in jit] + other
    size, size_text = _cache_state(snap)
    if _cache_disabled(snap):
        raw = env_value(snap, "CUDA_CACHE_DISABLE")
        # Safe: re-enabling the driver's JIT cache (in the user's own cache dir) only avoids
        # recompiling the same PTX at every start; it changes no result.
        fix = Fix(summary="enable the JIT cache (unset CUDA_CACHE_DISABLE)", auto=raw is not None,
                  env=EnvPatch((EnvOp(UNSET, "CUDA_CACHE_DISABLE"),)) if raw is not None else EnvPatch(), applies_in="both")
        return [problem("the JIT cache is disabled%s: every process start JIT-compiles again" % (" (CUDA_CACHE_DISABLE=%s)" % raw if raw is not None else ""),
                        who + ["CUDA_CACHE_DISABLE=1 turns off the on-disk cache of JIT-compiled code"], fix=fix, subject="CUDA_CACHE")]
    if need is not None and need > CACHE_MAX:
        cmds, notes = recommend_commands(snap)
        return [problem("the PTX to JIT (%s) exceeds the 4 GiB maximum JIT cache: part of it recompiles at every start" % fmt_bytes(need),
                        who + ["CUDA_CACHE_MAXSIZE maximum is 4294967296 (4 GiB); binaries larger than the cache are not cached"],
                        fix=Fix(summary="install a torch build with native code for the GPU" + ("; " + notes[0] if notes and not cmds else ""), commands=cmds),
                        subject="CUDA_CACHE")]
    holds = _holds(size, need)
    if holds is True:
        return [ok("the JIT cache (%s) holds the %s of PTX to compile" % (size_text, fmt_bytes(need)), *who, subject="CUDA_CACHE")]
    if jit and not other:
        return [ok("cache size for the GPU's PTX JIT is reported and raised by arch-ptx-jit (%s)" % size_text, *who, subject="CUDA_CACHE")]
    # Safe: see arch-ptx-jit; an upper bound on the user's own on-disk cache.
    fix = Fix(summary="raise the JIT cache to 4 GiB (CUDA_CACHE_MAXSIZE=%d)" % CACHE_MAX, auto=True,
              env=EnvPatch((EnvOp(SET, "CUDA_CACHE_MAXSIZE", str(CACHE_MAX)),)), applies_in="both")
    return [problem("the JIT cache (%s) %s the %s of PTX to JIT" % (size_text, "cannot hold" if holds is False else "may not hold", fmt_bytes(need)),
                    who, fix=fix, subject="CUDA_CACHE")]


def check_jit_cache_unwritable(snap: Snapshot) -> Iterable[Outcome]:
    t = snap.primary_torch
    if t is None or not t.cuda:
        return [ok("no CUDA torch build: no JIT", subject="CUDA_CACHE_PATH")]
    jit, other, _ = _jit_reasons(snap)
    _, _, fits, _ = _fits(snap)
    if not jit and not other:
        if any(f.kind == "unknown" for f in fits):
            return [unknown("whether the PTX JIT is needed is unknown", subject="CUDA_CACHE_PATH")]
        return [ok("no PTX JIT needed: the JIT cache is not used", subject="CUDA_CACHE_PATH")]
    jc = snap.jit_cache
    path = jc.path or "~/.nv/ComputeCache"
    if jc.writable is None:
        return [unknown("whether the JIT cache %s is writable is unknown" % path, jc.unknown.get("writable", ""), subject="CUDA_CACHE_PATH")]
    if jc.writable:
        return [ok("the JIT cache %s is writable" % path, subject="CUDA_CACHE_PATH")]
    who = ["%s needs the PTX JIT" % gpu_label(f.gpu) for f in jit] + other
    cmd = 'export CUDA_CACHE_PATH="${XDG_CACHE_HOME:-$HOME/.cache}/nv-compute-cache"'
    return [problem("the JIT cache %s is not writable: JIT-compiled code is never kept, every start recompiles" % path,
                    who + ["%s cannot be written by this user" % path],
                    fix=Fix(summary="point CUDA_CACHE_PATH at a persistent directory you own", commands=(cmd,)),
                    subject="CUDA_CACHE_PATH")]


RULES = (
    Rule(
        id="arch-unsupported",
        severity=ERROR,
        title="A visible GPU has neither compatible SASS nor usable PTX in the torch build",
        check=check_arch_unsupported,
        needs=("torch", "driver", "gpus"),
        cause="Release wheels carry SASS for a fixed arch list and (since 2.6) no PTX. A GPU newer than the list (Blackwell sm_120 on <= cu124, Hopper sm_90 on cu113) or older (Pascal/Volta on cu128+) has nothing to run. torch.cuda.is_available() still returns True; the first kernel fails.",
        symptoms=(
            "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation. The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.",
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "Found GPU0 NVIDIA GeForce GTX 1080 Ti which is of cuda capability 6.1. PyTorch no longer supports this GPU because it is too old. The minimum cuda capability supported by this library is 7.5.",
        ),
        evidence_used="the SASS and PTX entries really present in torch's CUDA libraries (.nv_fatbin scan; else the published arch list), each visible GPU's compute capability, CUDA_DISABLE_PTX_JIT, the driver's CUDA (no PTX JIT under minor-version compatibility)",
        fix_text="install a torch build with native code for the GPU that fits the driver and the env's Python (`cudafix fix`: the exact command of the env's own pip, or conda in a conda env).",
        sources=("pytorch/pytorch#167244", "pytorch/pytorch#150733", "astral-sh/uv#14742", "pytorch/pytorch#172352", "lllyasviel/Fooocus#3862"),
    ),
    Rule(
        id="arch-ptx-jit",
        severity=WARNING,
        title="A GPU runs torch only through PTX JIT: long stall at first use; JIT cache sizing",
        check=check_arch_ptx_jit,
        needs=("torch", "driver", "gpus", "jit_cache"),
        auto=True,
        cause="The build has no SASS for the GPU's major, only older PTX (e.g. conda torch 1.10 cu113: compute_37 PTX, SASS up to sm_86, on an sm_90 H100/H200). The driver JIT-compiles every kernel at first use and caches the result in CUDA_CACHE_PATH up to CUDA_CACHE_MAXSIZE (max 4 GiB); a cache too small, disabled or not persistent (containers) repeats the stall at every start.",
        symptoms=(
            "first .cuda() / first inference 'stuck' for minutes with GPU memory allocated (0:02:01.451538; took: 137.26 s)",
            "GPU utilisation near 0 % while the CPU is busy at start",
        ),
        evidence_used="SASS/PTX entries and PTX sizes from torch's .nv_fatbin, each visible GPU's compute capability, CUDA_CACHE_MAXSIZE / CUDA_CACHE_DISABLE / CUDA_CACHE_PATH",
        fix_text="automatic: CUDA_CACHE_MAXSIZE raised to its 4 GiB maximum so the JIT runs once; advice: install a torch build with native code for the GPU (`cudafix fix`).",
        sources=("pytorch/pytorch#537", "pytorch/pytorch#12283", "pytorch/pytorch#45822", "FORTH-ModelBasedTracker/HandTracker#7", ENV_DOC),
    ),
    Rule(
        id="jit-cache-too-small",
        severity=WARNING,
        title="PTX JIT is needed and the JIT cache cannot hold its output (too small or disabled)",
        check=check_jit_cache_too_small,
        needs=("torch", "gpus", "jit_cache"),
        auto=True,
        cause="JIT-compiled kernels are kept only if they fit CUDA_CACHE_MAXSIZE (binaries larger than the cache are not cached; max 4 GiB) and CUDA_CACHE_DISABLE is not set. Otherwise every process recompiles.",
        symptoms=(
            "every run stalls at start, not only the first one",
        ),
        evidence_used="whether any visible GPU (or CUDA_FORCE_PTX_JIT) needs the PTX JIT, PTX sizes, CUDA_CACHE_MAXSIZE, CUDA_CACHE_DISABLE",
        fix_text="automatic: CUDA_CACHE_DISABLE unset / CUDA_CACHE_MAXSIZE raised to 4 GiB; beyond 4 GiB only a native build helps.",
        sources=(ENV_DOC, "FORTH-ModelBasedTracker/HandTracker#7", "dl-container-registry/furnari-flow#3"),
    ),
    Rule(
        id="jit-cache-unwritable",
        severity=WARNING,
        title="PTX JIT is needed and the JIT cache directory is not writable",
        check=check_jit_cache_unwritable,
        needs=("torch", "gpus", "jit_cache"),
        cause="The driver writes JIT output to CUDA_CACHE_PATH (default ~/.nv/ComputeCache). A read-only or foreign home (containers running as another user, HOME=/) means nothing is kept.",
        symptoms=(
            "every run stalls at start, not only the first one",
        ),
        evidence_used="whether any visible GPU needs the PTX JIT, CUDA_CACHE_PATH and whether it is writable",
        fix_text="point CUDA_CACHE_PATH at a persistent directory you own (a volume in containers).",
        sources=(ENV_DOC, "dl-container-registry/furnari-flow#3"),
    ),
)
