"""The report's machine sections: header, driver, GPUs, PyTorch, toolkits, libraries, environment."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional

from cudafix import __version__
from cudafix.knowledge import jit_cache
from cudafix.model.findings import ERROR, UNKNOWN, WARNING
from cudafix.model.snapshot import ArchCoverage, GPU, LibraryResolution, Snapshot
from cudafix.model import cuda as cudaver
from cudafix.render.verdict import assumed_value, no_driver  # noqa: F401  (assumed_value: re-exported)
from cudafix.render.text import (
    Out, field, mib_text, remaining_unknowns, row, shell_value, unknown_text, via_text, wrap_list,
)


def header_section(out: Out, snap: Snapshot, origin: str) -> None:
    py = snap.python
    who = py.executable or "?"
    if py.version:
        who += " (Python %s)" % py.version
    out.add(out.style("cudafix %s status" % __version__, "bold") + ": " + who)
    when = " at %s" % snap.created if snap.created else ""
    out.add("  snapshot: %s%s" % (origin, when))
    if snap.source and snap.source != "probed":
        out.add("  source: %s" % snap.source)
    # what-if assumptions and failed probes: said with the verdict (render.verdict), once


def driver_section(out: Out, snap: Snapshot, verbose: bool = False) -> None:
    d = snap.driver
    out.section("Driver")
    if not verbose and no_driver(snap):  # one line, said with the verdict too; -v: where cudafix looked
        row(out, "none", "no kernel module, no libcuda.so.1 (-v: where cudafix looked)")
        return
    shown: List[str] = []
    fv, un = d.found_via, d.unknown
    field(out, "kernel module", d.kernel_version, fv, un, "kernel_version", shown, "none loaded")
    lib = None
    if d.libcuda_path:
        lib = d.libcuda_path + (" (%s)" % d.libcuda_version if d.libcuda_version else "")
    shown.append("libcuda_version")
    field(out, "libcuda", lib, fv, un, "libcuda_path", shown)
    if not d.libcuda_path and d.libcuda_version is None and "libcuda_version" in un and "libcuda_path" not in un:
        row(out, "libcuda version", out.style(unknown_text(un["libcuda_version"]), UNKNOWN))
    field(out, "driver CUDA", cudaver.version_text_or_none(d.cuda_version), fv, un, "cuda_version", shown)
    if d.nvml_version or "nvml_version" in un:
        field(out, "NVML library", d.nvml_version, fv, un, "nvml_version", shown)
    shown.append("nvml_version")
    for path in d.compat_libcuda:
        row(out, "cuda-compat", path + " (on the loader path)")
    if d.wsl:
        row(out, "WSL", "yes", fv.get("wsl"))
    remaining_unknowns(out, un, shown)


def gpu_line(out: Out, g: GPU, cuda_index: Optional[int], visibility_known: bool) -> str:
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


def hardware_row(out: Out, snap: Snapshot) -> None:
    """What the PCI bus says, independent of the driver (Snapshot.hardware)."""
    hw = snap.hardware
    if hw is None:
        row(out, "PCI", out.style(unknown_text("not probed (snapshot from an older cudafix)"), UNKNOWN))
    elif hw.unknown and not hw.dxg:
        row(out, "PCI", out.style(unknown_text(hw.unknown), UNKNOWN))
    else:
        found = ["%s (%s)" % (d.address, d.device_id or "?") for d in hw.nvidia_pci] + (["/dev/dxg (WSL 2)"] if hw.dxg else [])
        row(out, "PCI", "NVIDIA GPU hardware: " + ", ".join(found) if found else "no NVIDIA GPU hardware (a CPU-only machine)",
             hw.found_via)


def gpus_section(out: Out, snap: Snapshot, verbose: bool = False) -> None:
    out.section("GPUs")
    if not verbose and no_driver(snap):
        row(out, "GPUs", "none reported (no driver to ask)")
    else:
        gpu_rows(out, snap)
    hardware_row(out, snap)


def gpu_rows(out: Out, snap: Snapshot) -> None:
    info = snap.gpus
    if not info.gpus:
        if info.unknown:
            for key in sorted(info.unknown):
                label = {"gpus": "GPUs", "nvml": "NVML"}.get(key, key.replace("_", " "))
                row(out, label, out.style(unknown_text(info.unknown[key]), UNKNOWN))
        else:
            row(out, "GPUs", "none found", info.found_via.get("gpus"))
        return
    order: Dict[int, int] = {}
    if info.visible is not None:
        order = {gpu_i: cuda_i for cuda_i, gpu_i in enumerate(info.visible)}
    for pos, g in enumerate(info.gpus):
        out.add(gpu_line(out, g, order.get(pos), info.visible is not None))
    via = info.found_via.get("gpus") or (info.gpus[0].found_via if info.gpus else "")
    if via:
        out.add("  " + out.style("(found via %s)" % via, "dim"))
    if info.visible is None:
        reason = info.unknown.get("visible")
        if reason:
            row(out, "visible to CUDA", out.style(unknown_text(reason), UNKNOWN))
    elif not info.visible:
        row(out, "visible to CUDA", out.style("none", ERROR), info.found_via.get("visible"))
    for key in sorted(info.unknown):
        if key != "visible":
            row(out, key.replace("_", " "), out.style(unknown_text(info.unknown[key]), UNKNOWN))


def arch_line(out: Out, ac: ArchCoverage) -> str:
    name = os.path.basename(ac.library) or "device code"
    if ac.unknown:
        return "    %s: %s" % (name, out.style(unknown_text(ac.unknown), UNKNOWN))
    sass = " ".join(ac.sass) if ac.sass else "none"
    ptx = " ".join(ac.ptx) if ac.ptx else "none"
    return "    %s: SASS %s; PTX %s" % (name, sass, ptx)


def torch_section(out: Out, snap: Snapshot) -> None:
    out.section("PyTorch")
    if not snap.torch:
        where = snap.python.executable or "this environment"
        row(out, "torch", "not installed for %s" % where)
    for i, t in enumerate(snap.torch):
        version = t.full_version
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
            out.add(arch_line(out, ac))
        for key in sorted(t.unknown):
            if key not in ("version", "cuda") or t.cuda or t.hip:
                out.add("    %s: %s" % (key.replace("_", " "), out.style(unknown_text(t.unknown[key]), UNKNOWN)))
    for tv in snap.torchvision:
        version = tv.full_version
        line = "  torchvision %s" % version
        if tv.cuda:
            line += "  CUDA %s" % tv.cuda
        if tv.requires_torch:
            line += "  requires %s" % tv.requires_torch
        out.add(line)
        for key in sorted(tv.unknown):
            out.add("    %s: %s" % (key.replace("_", " "), out.style(unknown_text(tv.unknown[key]), UNKNOWN)))


def toolkits_section(out: Out, snap: Snapshot) -> None:
    tk = snap.toolkits
    out.section("Toolkits")
    if not tk.toolkits:
        reason = tk.unknown.get("toolkits")
        row(out, "CUDA toolkit", out.style(unknown_text(reason), UNKNOWN) if reason else "none found")
    for t in tk.toolkits:
        if t.version:
            version = t.version
        else:
            version = out.style(unknown_text(t.unknown), UNKNOWN) if t.unknown else "version ?"
        line = "  %s  %s" % (t.path, version)
        if t.nvcc:
            line += "  nvcc %s" % t.nvcc
        if t.sources:
            line += "  " + via_text(out, ", ".join(t.sources))
        out.add(line)
    if tk.cuda_home:
        row(out, "extension builds", "use %s" % tk.cuda_home, tk.cuda_home_via, width=16)
    elif "cuda_home" in tk.unknown:
        row(out, "extension builds", out.style(unknown_text(tk.unknown["cuda_home"]), UNKNOWN))
    if tk.conda_packages:
        items = ["%s %s" % (p.name, p.version) + (" (%s)" % p.build if p.build else "") for p in tk.conda_packages]
        out.lines.extend(wrap_list("  conda packages:  ", items))
    if tk.nvidia_wheels:
        items = ["%s %s" % (w.name, w.version) for w in tk.nvidia_wheels]
        out.lines.extend(wrap_list("  pip wheels:      ", items))
    remaining_unknowns(out, tk.unknown, ("toolkits", "cuda_home"))


def lib_differs(r: LibraryResolution) -> bool:
    if r.unknown or not r.resolved:
        return True
    if r.expected and r.expected != r.resolved:  # both are real paths (the probe resolved them)
        return True
    return False


def lib_line(out: Out, r: LibraryResolution) -> List[str]:
    if r.unknown:
        return ["  %s: %s" % (r.soname, out.style(unknown_text(r.unknown), UNKNOWN))]
    if not r.resolved:
        return ["  %s: %s  %s" % (r.soname, out.style("not found", ERROR), via_text(out, "needed by " + r.requested_by))]
    ver = " %s" % r.resolved_version if r.resolved_version else ""
    lines = ["  %s -> %s%s  %s" % (r.soname, r.resolved, ver, via_text(out, r.resolved_via))]
    if r.expected and lib_differs(r):
        ever = " %s" % r.expected_version if r.expected_version else ""
        lines.append("    " + out.style("torch's own copy: %s%s" % (r.expected, ever), WARNING))
    return [ln.rstrip() for ln in lines]


def libraries_section(out: Out, snap: Snapshot, verbose: bool) -> None:
    li = snap.libraries
    out.section("Libraries")
    res = li.resolutions
    if not res and not snap.torch and "torch" not in snap.probe_errors:
        row(out, "resolution", "none (no torch installed, so no CUDA libraries of its to resolve)")
    elif not res:
        reason = li.unknown.get("resolutions")
        row(out, "resolution", out.style(unknown_text(reason), UNKNOWN) if reason else "no CUDA libraries to resolve")
    else:
        # One line per soname; a soname requested by several objects shows its worst case.
        by_soname: Dict[str, LibraryResolution] = {}
        for r in res:
            cur = by_soname.get(r.soname)
            if cur is None or (lib_differs(r) and not lib_differs(cur)):
                by_soname[r.soname] = r
        odd = [r for r in by_soname.values() if lib_differs(r)]
        fine = len(by_soname) - len(odd)
        shown = list(by_soname.values()) if verbose else odd
        for r in shown:
            out.lines.extend(lib_line(out, r))
        if not verbose:
            out.add("  %d of %d sonames resolve to torch's own copies%s" % (
                fine, len(by_soname), " (-v lists them)" if fine else ""))
    if li.ld_library_path:
        out.lines.extend(wrap_list("  LD_LIBRARY_PATH: ", li.ld_library_path))
    remaining_unknowns(out, li.unknown, ("resolutions",))


def environment_section(out: Out, snap: Snapshot, verbose: bool = False) -> None:
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
        if jc.maxsize_via == "driver default":
            # Which driver release moved the default is not documented (knowledge/jit_cache.py);
            # the rules treat it as unknown and raise the cache when a PTX JIT needs it.
            # the hedge in full under -v only: it is the same on every machine (issue 35)
            parts.append("max: " + (jit_cache.DEFAULT_UNKNOWN_NOTE if verbose else "driver default (-v: its size)"))
        elif jc.maxsize is not None:
            parts.append("max %s%s" % (mib_text(jc.maxsize), " (%s)" % jc.maxsize_via if jc.maxsize_via else ""))
        if jc.writable is not None:
            parts.append("writable" if jc.writable else out.style("not writable", WARNING))
        if jc.used_bytes is not None:
            parts.append("%s used" % mib_text(jc.used_bytes))
        row(out, "JIT cache", ", ".join(parts))
        for key in sorted(jc.unknown):
            if key not in ("path", "maxsize_default"):  # maxsize_default: said in the row above
                row(out, "JIT cache " + key.replace("_", " "), out.style(unknown_text(jc.unknown[key]), UNKNOWN))
    if snap.python.conda_prefix:
        row(out, "conda env", snap.python.conda_prefix)
