"""Rendering of a Snapshot and its rule runs: the human report and the JSON documents.

Pure functions from data to text.  Nothing here probes, prints or exits: cudafix/cli/report.py
decides where the text goes.  Colour is a parameter (the CLI turns it on only for a TTY
without NO_COLOR), so tests can render both forms.
"""

from __future__ import annotations

import os
import shlex
import textwrap
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from cudafix import __version__
from cudafix.model.findings import ERROR, INFO, UNKNOWN, WARNING, Finding, Rule, RuleRun
from cudafix.model.fixes import PREPEND_PATH, REMOVE_PATH, SET, UNSET, Fix
from cudafix.model.snapshot import ArchCoverage, GPU, LibraryResolution, Snapshot
from cudafix.render import extensions as _extensions

STATUS_SCHEMA = "cudafix.status/1"

DASH = "\u2014"  # em dash; the CLI swaps it for "-" where stdout cannot encode it

_SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}
_COLOURS = {
    ERROR: "\033[31m",  # red
    WARNING: "\033[33m",  # yellow
    INFO: "\033[36m",  # cyan
    UNKNOWN: "\033[35m",  # magenta
    "ok": "\033[32m",  # green
    "bold": "\033[1m",
    "dim": "\033[2m",
}
_RESET = "\033[0m"

# Which scope a safe fix applies in, as the report says it.
_SCOPES = {
    "activation": "on `conda activate`",
    "process": "at `import torch`",
    "both": "on `conda activate` and at `import torch`",
}


class _Out:
    """Collects lines; knows whether to colour."""

    def __init__(self, color: bool) -> None:
        self.color = color
        self.lines: List[str] = []

    def style(self, text: str, *names: str) -> str:
        if not self.color or not text:
            return text
        return "".join(_COLOURS[n] for n in names) + text + _RESET

    def add(self, text: str = "") -> None:
        self.lines.append(text)

    def section(self, title: str) -> None:
        if self.lines:
            self.add()
        self.add(self.style(title, "bold"))

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def unknown_text(reason: Optional[str]) -> str:
    """How an undecided value reads: 'unknown — <why>'."""
    return "unknown %s %s" % (DASH, reason) if reason else "unknown"


def shell_value(value: str) -> str:
    """A variable's value as a POSIX shell would need it: '' stays visible."""
    return shlex.quote(value)


def _via(out: _Out, via: Optional[str]) -> str:
    return out.style("(%s)" % via, "dim") if via else ""


def _row(out: _Out, label: str, value: str, via: Optional[str] = None, width: int = 16) -> None:
    line = "  %-*s %s" % (width, label, value)
    if via:
        line += "  " + _via(out, via)
    out.add(line.rstrip())


def _field(
    out: _Out,
    label: str,
    value: Any,
    found_via: Dict[str, str],
    unknown: Dict[str, str],
    key: str,
    shown: List[str],
    absent: str = "not found",
) -> None:
    shown.append(key)
    if value is None or value == "":
        if key in unknown:
            _row(out, label, out.style(unknown_text(unknown[key]), UNKNOWN))
        else:
            _row(out, label, absent)
        return
    _row(out, label, str(value), found_via.get(key))


def _remaining_unknowns(out: _Out, unknown: Dict[str, str], shown: Sequence[str]) -> None:
    for key in sorted(unknown):
        if key not in shown:
            _row(out, key.replace("_", " "), out.style(unknown_text(unknown[key]), UNKNOWN))


def cuda_version_text(v: Optional[int]) -> Optional[str]:
    """cuDriverGetVersion's integer (13000) as CUDA's dotted form (13.0)."""
    if v is None:
        return None
    return "%d.%d" % (v // 1000, (v % 1000) // 10)


def mib_text(n: Optional[int]) -> str:
    if n is None:
        return "?"
    if n >= 1 << 30:
        return "%.1f GiB" % (n / float(1 << 30))
    if n >= 1 << 20:
        return "%.0f MiB" % (n / float(1 << 20))
    if n >= 1 << 10:
        return "%.0f KiB" % (n / 1024.0)
    return "%d B" % n


# -- sections --------------------------------------------------------------------------


def _header(out: _Out, snap: Snapshot, origin: str) -> None:
    py = snap.python
    who = py.executable or "?"
    if py.version:
        who += " (Python %s)" % py.version
    out.add(out.style("cudafix %s status" % __version__, "bold") + ": " + who)
    when = " at %s" % snap.created if snap.created else ""
    out.add("  snapshot: %s%s" % (origin, when))
    if snap.source and snap.source != "probed":
        out.add("  source: %s" % snap.source)
    if snap.assumed:
        parts = ["%s=%s" % (k, _assumed_value(v)) for k, v in sorted(snap.assumed.items())]
        out.add("  " + out.style("what-if: assumed " + "; ".join(parts), WARNING))
        line = no_torch_line(snap)
        if line:
            out.add("  " + out.style(line, WARNING))
    for name in sorted(snap.probe_errors):
        out.add("  " + out.style("probe %s failed: %s" % (name, snap.probe_errors[name]), UNKNOWN))


def no_torch_line(snap: Snapshot) -> Optional[str]:
    """What-if mode in an env without torch: say once that there is no torch to judge."""
    if not snap.assumed or snap.torch or "torch" in snap.probe_errors:
        return None
    where = snap.python.executable or "this environment"
    return "what-if: no torch installed for %s, so no torch build to judge; the driver-vs-GPU rules still run" % where


def _assumed_value(v: Any) -> str:
    if isinstance(v, dict) and "value" in v:  # cudafix.probes.assume: {"value": ..., "replaced": ...}
        return _assumed_value(v["value"])
    if isinstance(v, dict) and "values" in v:
        return _assumed_value(v["values"])
    if isinstance(v, (list, tuple)):
        return ",".join(_assumed_value(x) for x in v)
    if isinstance(v, dict):
        return ",".join("%s:%s" % (k, _assumed_value(x)) for k, x in sorted(v.items()))
    return str(v)


def _driver(out: _Out, snap: Snapshot) -> None:
    d = snap.driver
    out.section("Driver")
    shown: List[str] = []
    fv, un = d.found_via, d.unknown
    _field(out, "kernel module", d.kernel_version, fv, un, "kernel_version", shown, "none loaded")
    lib = None
    if d.libcuda_path:
        lib = d.libcuda_path + (" (%s)" % d.libcuda_version if d.libcuda_version else "")
    shown.append("libcuda_version")
    _field(out, "libcuda", lib, fv, un, "libcuda_path", shown)
    if not d.libcuda_path and d.libcuda_version is None and "libcuda_version" in un and "libcuda_path" not in un:
        _row(out, "libcuda version", out.style(unknown_text(un["libcuda_version"]), UNKNOWN))
    _field(out, "driver CUDA", cuda_version_text(d.cuda_version), fv, un, "cuda_version", shown)
    if d.nvml_version or "nvml_version" in un:
        _field(out, "NVML library", d.nvml_version, fv, un, "nvml_version", shown)
    shown.append("nvml_version")
    for path in d.compat_libcuda:
        _row(out, "cuda-compat", path + " (on the loader path)")
    if d.wsl:
        _row(out, "WSL", "yes", fv.get("wsl"))
    _remaining_unknowns(out, un, shown)


def _gpu_line(out: _Out, g: GPU, cuda_index: Optional[int], visibility_known: bool) -> str:
    cc = "sm_%s" % g.compute_capability.replace(".", "") if g.compute_capability else "sm_?"
    parts = ["%d" % g.index, g.name, cc]
    if g.memory_mib is not None:
        parts.append("%d MiB" % g.memory_mib)
    if g.mig_mode is not None:
        parts.append("MIG %s" % ("on" if g.mig_mode else "off"))
    if g.uuid:
        parts.append(g.uuid)
    if visibility_known:
        parts.append("-> cuda:%d" % cuda_index if cuda_index is not None else out.style("hidden", WARNING))
    return "  " + "  ".join(parts)


def _hardware_row(out: _Out, snap: Snapshot) -> None:
    """What the PCI bus says, independent of the driver (Snapshot.hardware)."""
    hw = snap.hardware
    if hw is None:
        _row(out, "PCI", out.style(unknown_text("not probed (snapshot from an older cudafix)"), UNKNOWN))
    elif hw.unknown and not hw.dxg:
        _row(out, "PCI", out.style(unknown_text(hw.unknown), UNKNOWN))
    else:
        found = ["%s (%s)" % (d.address, d.device_id or "?") for d in hw.nvidia_pci] + (["/dev/dxg (WSL 2)"] if hw.dxg else [])
        _row(out, "PCI", "NVIDIA GPU hardware: " + ", ".join(found) if found else "no NVIDIA GPU hardware (a CPU-only machine)",
             hw.found_via)


def _gpus(out: _Out, snap: Snapshot) -> None:
    out.section("GPUs")
    _gpu_rows(out, snap)
    _hardware_row(out, snap)


def _gpu_rows(out: _Out, snap: Snapshot) -> None:
    info = snap.gpus
    if not info.gpus:
        if info.unknown:
            for key in sorted(info.unknown):
                label = {"gpus": "GPUs", "nvml": "NVML"}.get(key, key.replace("_", " "))
                _row(out, label, out.style(unknown_text(info.unknown[key]), UNKNOWN))
        else:
            _row(out, "GPUs", "none found", info.found_via.get("gpus"))
        return
    order: Dict[int, int] = {}
    if info.visible is not None:
        order = {gpu_i: cuda_i for cuda_i, gpu_i in enumerate(info.visible)}
    for pos, g in enumerate(info.gpus):
        out.add(_gpu_line(out, g, order.get(pos), info.visible is not None))
    via = info.found_via.get("gpus") or (info.gpus[0].found_via if info.gpus else "")
    if via:
        out.add("  " + out.style("(found via %s)" % via, "dim"))
    if info.visible is None:
        reason = info.unknown.get("visible")
        if reason:
            _row(out, "visible to CUDA", out.style(unknown_text(reason), UNKNOWN))
    elif not info.visible:
        _row(out, "visible to CUDA", out.style("none", ERROR), info.found_via.get("visible"))
    for key in sorted(info.unknown):
        if key != "visible":
            _row(out, key.replace("_", " "), out.style(unknown_text(info.unknown[key]), UNKNOWN))


def _arch_line(out: _Out, ac: ArchCoverage) -> str:
    name = os.path.basename(ac.library) or "device code"
    if ac.unknown:
        return "    %s: %s" % (name, out.style(unknown_text(ac.unknown), UNKNOWN))
    sass = " ".join(ac.sass) if ac.sass else "none"
    ptx = " ".join(ac.ptx) if ac.ptx else "none"
    return "    %s: SASS %s; PTX %s" % (name, sass, ptx)


def _torch(out: _Out, snap: Snapshot) -> None:
    out.section("PyTorch")
    if not snap.torch:
        where = snap.python.executable or "this environment"
        _row(out, "torch", "not installed for %s" % where)
    for i, t in enumerate(snap.torch):
        version = t.version or t.dist.version
        if t.cuda:
            build = "CUDA %s" % t.cuda
        elif t.hip:
            build = "ROCm %s" % t.hip
        elif "version" in t.unknown or "cuda" in t.unknown:
            build = "build " + out.style(unknown_text(t.unknown.get("cuda") or t.unknown.get("version")), UNKNOWN)
        else:
            build = "CPU-only build"
        origin = t.dist.origin
        if t.dist.conda_build:
            origin += " %s" % t.dist.conda_build
        if t.dist.conda_channel:
            origin += " (%s)" % t.dist.conda_channel
        line = "  torch %s  %s  %s  %s" % (version, build, origin, t.package_dir or t.dist.location)
        if len(snap.torch) > 1:
            line += "  " + ("[imported first]" if i == 0 else out.style("[shadowed]", WARNING))
        out.add(line.rstrip())
        for ac in t.arch:
            out.add(_arch_line(out, ac))
        for key in sorted(t.unknown):
            if key not in ("version", "cuda") or t.cuda or t.hip:
                out.add("    %s: %s" % (key.replace("_", " "), out.style(unknown_text(t.unknown[key]), UNKNOWN)))
    for tv in snap.torchvision:
        version = tv.version or tv.dist.version
        line = "  torchvision %s" % version
        if tv.cuda:
            line += "  CUDA %s" % tv.cuda
        if tv.requires_torch:
            line += "  requires %s" % tv.requires_torch
        out.add(line)
        for key in sorted(tv.unknown):
            out.add("    %s: %s" % (key.replace("_", " "), out.style(unknown_text(tv.unknown[key]), UNKNOWN)))


def _wrap_list(prefix: str, items: Sequence[str], width: int = 100) -> List[str]:
    return textwrap.wrap(
        ", ".join(items), width=width, initial_indent=prefix, subsequent_indent=" " * len(prefix),
        break_on_hyphens=False, break_long_words=False,
    )


def _toolkits(out: _Out, snap: Snapshot) -> None:
    tk = snap.toolkits
    out.section("Toolkits")
    if not tk.toolkits:
        reason = tk.unknown.get("toolkits")
        _row(out, "CUDA toolkit", out.style(unknown_text(reason), UNKNOWN) if reason else "none found")
    for t in tk.toolkits:
        if t.version:
            version = t.version
        else:
            version = out.style(unknown_text(t.unknown), UNKNOWN) if t.unknown else "version ?"
        line = "  %s  %s" % (t.path, version)
        if t.nvcc:
            line += "  nvcc %s" % t.nvcc
        if t.sources:
            line += "  " + _via(out, ", ".join(t.sources))
        out.add(line)
    if tk.cuda_home:
        _row(out, "extension builds", "use %s" % tk.cuda_home, tk.cuda_home_via, width=16)
    elif "cuda_home" in tk.unknown:
        _row(out, "extension builds", out.style(unknown_text(tk.unknown["cuda_home"]), UNKNOWN))
    if tk.conda_packages:
        items = ["%s %s" % (p.name, p.version) + (" (%s)" % p.build if p.build else "") for p in tk.conda_packages]
        out.lines.extend(_wrap_list("  conda packages:  ", items))
    if tk.nvidia_wheels:
        items = ["%s %s" % (w.name, w.version) for w in tk.nvidia_wheels]
        out.lines.extend(_wrap_list("  pip wheels:      ", items))
    _remaining_unknowns(out, tk.unknown, ("toolkits", "cuda_home"))


def _lib_differs(r: LibraryResolution) -> bool:
    if r.unknown or not r.resolved:
        return True
    if r.expected and os.path.realpath(r.expected) != os.path.realpath(r.resolved):
        return True
    return False


def _lib_line(out: _Out, r: LibraryResolution) -> List[str]:
    if r.unknown:
        return ["  %s: %s" % (r.soname, out.style(unknown_text(r.unknown), UNKNOWN))]
    if not r.resolved:
        return ["  %s: %s  %s" % (r.soname, out.style("not found", ERROR), _via(out, "needed by " + r.requested_by))]
    ver = " %s" % r.resolved_version if r.resolved_version else ""
    lines = ["  %s -> %s%s  %s" % (r.soname, r.resolved, ver, _via(out, r.resolved_via))]
    if r.expected and _lib_differs(r):
        ever = " %s" % r.expected_version if r.expected_version else ""
        lines.append("    " + out.style("torch's own copy: %s%s" % (r.expected, ever), WARNING))
    return [ln.rstrip() for ln in lines]


def _libraries(out: _Out, snap: Snapshot, verbose: bool) -> None:
    li = snap.libraries
    out.section("Libraries")
    res = li.resolutions
    if not res:
        reason = li.unknown.get("resolutions")
        _row(out, "resolution", out.style(unknown_text(reason), UNKNOWN) if reason else "no CUDA libraries to resolve")
    else:
        # One line per soname; a soname requested by several objects shows its worst case.
        by_soname: Dict[str, LibraryResolution] = {}
        for r in res:
            cur = by_soname.get(r.soname)
            if cur is None or (_lib_differs(r) and not _lib_differs(cur)):
                by_soname[r.soname] = r
        odd = [r for r in by_soname.values() if _lib_differs(r)]
        fine = len(by_soname) - len(odd)
        shown = list(by_soname.values()) if verbose else odd
        for r in shown:
            out.lines.extend(_lib_line(out, r))
        if not verbose:
            out.add("  %d of %d sonames resolve to torch's own copies%s" % (
                fine, len(by_soname), " (-v lists them)" if fine else ""))
    if li.ld_library_path:
        out.lines.extend(_wrap_list("  LD_LIBRARY_PATH: ", li.ld_library_path))
    _remaining_unknowns(out, li.unknown, ("resolutions",))


def _environment(out: _Out, snap: Snapshot) -> None:
    out.section("Environment")
    if snap.env:
        for name in sorted(snap.env):
            out.add("  %s=%s" % (name, shell_value(snap.env[name])))
    else:
        out.add("  none of the CUDA/torch variables is set")
    jc = snap.jit_cache
    if jc.path or jc.unknown:
        parts = [jc.path or out.style(unknown_text(jc.unknown.get("path")), UNKNOWN)]
        if jc.disabled:
            parts.append(out.style("disabled", WARNING))
        if jc.maxsize is not None and jc.maxsize_via == "driver default":
            # Which driver release moved the default is not documented (unknown.maxsize_default);
            # the rules treat it as unknown and raise the cache when a PTX JIT needs it.
            parts.append("max: driver default (1 GiB per NVIDIA's current docs, 256 MiB per older ones)")
        elif jc.maxsize is not None:
            parts.append("max %s%s" % (mib_text(jc.maxsize), " (%s)" % jc.maxsize_via if jc.maxsize_via else ""))
        if jc.writable is not None:
            parts.append("writable" if jc.writable else out.style("not writable", WARNING))
        if jc.used_bytes is not None:
            parts.append("%s used" % mib_text(jc.used_bytes))
        _row(out, "JIT cache", ", ".join(parts))
        for key in sorted(jc.unknown):
            if key not in ("path", "maxsize_default"):  # maxsize_default: said in the row above
                _row(out, "JIT cache " + key.replace("_", " "), out.style(unknown_text(jc.unknown[key]), UNKNOWN))
    if snap.python.conda_prefix:
        _row(out, "conda env", snap.python.conda_prefix)


# -- findings --------------------------------------------------------------------------


def fix_lines(fix: Fix) -> List[str]:
    """A fix as the user reads it: summary, and for a safe fix what cudafix changes.  Commands and
    shell lines for the user are in the Plan section (cudafix.render.plan), each printed once."""
    lines = ["fix: %s" % fix.summary] if fix.summary else []
    if not fix.auto:
        return lines
    for op in fix.env.ops:
        if op.op == SET:
            if not (op.name in fix.summary and (op.value or "") in fix.summary):  # said once
                lines.append("  sets %s to %s" % (op.name, shell_value(op.value or "")))
        elif op.op == UNSET:
            lines.append("  unsets %s" % op.name)
        elif op.op == PREPEND_PATH:
            lines.append("  put %s first in %s" % (op.value, op.name))
        elif op.op == REMOVE_PATH:
            lines.append("  remove %s from %s" % (op.value, op.name))
        else:
            lines.append("  %s %s %s" % (op.op, op.name, op.value or ""))
    for p in fix.preload:
        lines.append("  preload %s (for %s)" % (p.path, p.soname))
    lines.append("auto-fix: cudafix applies this %s" % _SCOPES.get(fix.scope, fix.scope))
    return lines


def _finding_lines(out: _Out, f: Finding) -> List[str]:
    tag = out.style("%-7s" % f.severity, f.severity, "bold")
    head = "  %s %s" % (tag, f.rule)
    if f.subject:
        head += " [%s]" % f.subject
    head += ": %s" % f.message
    if f.auto:
        head += "  " + out.style("[auto-fix]", "ok")
    lines = [head]
    pad = " " * 10
    for ev in f.evidence:
        lines.append(pad + "- " + ev)
    if f.fix:
        lines.extend(pad + ln for ln in fix_lines(f.fix))
    return lines


def unknowns(runs: Iterable[RuleRun]) -> List[Dict[str, str]]:
    """Rules that could not decide (or crashed), with the reason, in registry order."""
    out: List[Dict[str, str]] = []
    for run in runs:
        if run.error:
            out.append({"rule": run.rule.id, "subject": "", "message": "rule could not run: %s" % run.error})
            continue
        for o in run.outcomes:
            if o.verdict == UNKNOWN:
                out.append({"rule": run.rule.id, "subject": o.subject, "message": o.message})
    return out


def sorted_findings(runs: Iterable[RuleRun]) -> List[Finding]:
    found = [f for run in runs for f in run.findings()]
    return sorted(found, key=lambda f: _SEVERITY_ORDER.get(f.severity, 3))


def counts(findings: Sequence[Finding]) -> Dict[str, int]:
    c = {ERROR: 0, WARNING: 0, INFO: 0}
    for f in findings:
        c[f.severity] = c.get(f.severity, 0) + 1
    return c


def _plural(n: int, word: str) -> str:
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def summary_line(runs: Sequence[RuleRun]) -> str:
    fs = sorted_findings(runs)
    c = counts(fs)
    unk = unknowns(runs)
    ok = sum(1 for r in runs if r.verdict == "ok")
    return "%s, %s, %s, %d unknown (%s checked, %d ok)" % (
        _plural(c[ERROR], "error"), _plural(c[WARNING], "warning"), _plural(c[INFO], "note"),
        len(unk), _plural(len(runs), "rule"), ok,
    )


def _findings(out: _Out, runs: Sequence[RuleRun]) -> None:
    out.section("Findings: " + summary_line(runs))
    fs = sorted_findings(runs)
    for f in fs:
        out.lines.extend(_finding_lines(out, f))
    for u in unknowns(runs):
        head = "  %s %s" % (out.style("%-7s" % UNKNOWN, UNKNOWN), u["rule"])
        if u["subject"]:
            head += " [%s]" % u["subject"]
        out.add(head + ": " + u["message"])
    if not fs and not runs:
        out.add("  no rules were run")
    elif not fs:
        out.add("  " + out.style("no problems found", "ok"))


# -- public entry points ---------------------------------------------------------------


def render_status(snap: Snapshot, runs: Sequence[RuleRun], origin: str = "probed", color: bool = False,
                  verbose: bool = False) -> str:
    """The whole stack on one screen: Driver, GPUs, PyTorch, Toolkits, Libraries, Environment, Findings."""
    out = _Out(color)
    _header(out, snap, origin)
    _driver(out, snap)
    _gpus(out, snap)
    _torch(out, snap)
    _extensions.render(out, snap, runs, verbose)
    _toolkits(out, snap)
    _libraries(out, snap, verbose)
    _environment(out, snap)
    _findings(out, runs)
    _plan(out, snap, runs)
    return out.text()


def _plan(out: _Out, snap: Snapshot, runs: Sequence[RuleRun]) -> None:
    """One plan for every finding (cudafix.plans.planner): `cudafix fix` prints and applies it."""
    try:
        from cudafix.plans.planner import make_plan
        from cudafix.render.plan import plan_lines

        lines = plan_lines(make_plan(snap, runs))
    except Exception as exc:  # the plan must never take the report down
        lines = ["  unknown \u2014 no plan: %s: %s" % (type(exc).__name__, exc)]
    out.section("Plan (cudafix fix)")
    out.lines.extend(lines)


def render_check(runs: Sequence[RuleRun], color: bool = False, snap: Optional[Snapshot] = None) -> str:
    """Only the findings (and what could not be decided): the `cudafix check` output."""
    out = _Out(color)
    if snap is not None and snap.assumed:
        parts = ["%s=%s" % (k, _assumed_value(v)) for k, v in sorted(snap.assumed.items())]
        out.add(out.style("what-if: assumed " + "; ".join(parts), WARNING))
        line = no_torch_line(snap)
        if line:
            out.add(out.style(line, WARNING))
    _findings(out, runs)
    return out.text()


def status_document(snap: Snapshot, runs: Sequence[RuleRun]) -> Dict[str, Any]:
    """The `--json` document: schema cudafix.status/1."""
    return {
        "schema": STATUS_SCHEMA,
        "snapshot": snap.to_dict(),
        "findings": [f.to_dict() for f in sorted_findings(runs)],
        "unknown": unknowns(runs),
        "verdicts": {r.rule.id: r.verdict for r in runs},
        "plan": _plan_dict(snap, runs),
    }


def _plan_dict(snap: Snapshot, runs: Sequence[RuleRun]) -> Optional[Dict[str, Any]]:
    """The `cudafix fix` plan as data (None if it could not be made)."""
    try:
        from cudafix.plans.planner import make_plan

        return make_plan(snap, runs).to_dict()
    except Exception:  # the plan must never take the report down
        return None


def render_rule_list(rules: Sequence[Rule], color: bool = False) -> str:
    out = _Out(color)
    if not rules:
        out.add("no rules are registered")
        return out.text()
    width = max(len(r.id) for r in rules)
    for r in rules:
        auto = "  " + out.style("[auto-fix]", "ok") if r.auto else ""
        out.add("%-*s  %-7s  %s%s" % (width, r.id, r.severity, r.title, auto))
    return out.text()


def _paragraphs(text: str, indent: str = "  ", width: int = 96) -> List[str]:
    lines: List[str] = []
    for para in textwrap.dedent(text).strip().split("\n\n"):
        body = " ".join(para.split())
        lines.extend(textwrap.wrap(body, width=width, initial_indent=indent, subsequent_indent=indent,
                                   break_on_hyphens=False, break_long_words=False) or [indent.rstrip()])
        lines.append("")
    return lines[:-1]


def render_explain(rule: Rule, color: bool = False) -> str:
    """`cudafix explain RULE`: cause, how it shows up, evidence used, fix, sources."""
    out = _Out(color)
    auto = "fixed automatically" if rule.auto else "advice (you run the fix)"
    out.add("%s  (%s; %s)" % (out.style(rule.id, "bold"), rule.severity, auto))
    out.add("  " + rule.title)
    blocks: Tuple[Tuple[str, Any], ...] = (
        ("Cause", rule.cause),
        ("How it shows up", rule.symptoms),
        ("Evidence used", rule.evidence_used),
        ("Fix", rule.fix_text),
        ("Sources", rule.sources),
    )
    for title, body in blocks:
        out.section(title)
        if not body:
            out.add("  (not documented)")
        elif isinstance(body, str):
            out.lines.extend(_paragraphs(body))
        elif title == "How it shows up":
            # exact error texts: never re-wrapped
            for s in body:
                out.add("  " + s)
        else:
            for s in body:
                out.add("  - " + s)
    return out.text()
