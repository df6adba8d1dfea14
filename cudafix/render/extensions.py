"""The "Extension modules" section of `cudafix status`: one line per package (``-v``: per file)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence, Tuple

from cudafix.model.findings import ERROR, UNKNOWN, WARNING, RuleRun
from cudafix.model.snapshot import ExtensionModule, Snapshot

EXT_RULES = ("ext-arch-unsupported", "ext-ptx-unsupported", "ext-ptx-jit", "ext-cuda-major", "ext-torch-symbols")
_RANK = {ERROR: 3, WARNING: 2, UNKNOWN: 1, "ok": 0}


def verdicts(runs: Sequence[RuleRun]) -> Dict[str, Tuple[str, List[str]]]:
    """file basename -> (worst verdict: error|warning|unknown|ok, the rule ids behind it)."""
    out: Dict[str, Tuple[str, List[str]]] = {}
    for run in runs:
        if run.rule.id not in EXT_RULES:
            continue
        for o in run.outcomes:
            if o.verdict == "problem":
                v = o.severity or run.rule.severity
            elif o.verdict == UNKNOWN:
                v = UNKNOWN
            else:
                v = "ok"
            cur = out.get(o.subject, ("ok", []))
            ids = cur[1] + ([run.rule.id] if v != "ok" else [])
            out[o.subject] = (v if _RANK.get(v, 0) > _RANK.get(cur[0], 0) else cur[0], ids)
    return out


def _archs(mods: Sequence[ExtensionModule]) -> str:
    sass: List[str] = []
    ptx: List[str] = []
    for m in mods:
        sass += [s for s in m.sass if s not in sass]
        ptx += [p for p in m.ptx if p not in ptx]
    if not sass and not ptx:
        return "no device code"
    key = lambda a: (int("".join(c for c in a.split("_", 1)[1] if c.isdigit()) or 0), a)  # noqa: E731
    return "SASS %s; PTX %s" % (" ".join(sorted(sass, key=key)) or "none", " ".join(sorted(ptx, key=key)) or "none")


def _runtime(mods: Sequence[ExtensionModule]) -> str:
    kinds = []
    for m in mods:
        if m.cudart_linkage == "shared":
            k = "CUDA %s" % m.cudart
        elif m.cudart_linkage == "static":
            k = "static runtime"
        else:
            continue
        if k not in kinds:
            kinds.append(k)
    return ", ".join(kinds) or "-"


def render(out, snap: Snapshot, runs: Sequence[RuleRun], verbose: bool, width: Optional[int] = None) -> None:
    """Append the section to ``out`` (cudafix.render.text.Out); ``width``: wrap a package's line
    there, between its entries (None: one line each)."""
    info = snap.extensions
    if not info.scanned:
        return
    out.section("Extension modules")
    if not info.modules:
        out.add("  none with CUDA code or torch symbols (%d shared objects examined)" % info.files_seen)
        return
    v = verdicts(runs)
    groups: Dict[str, List[ExtensionModule]] = {}
    for m in info.modules:
        key = m.package or ("unowned: " + os.path.dirname(m.path))
        groups.setdefault(key, []).append(m)
    for key, mods in groups.items():
        worst = max((v.get(os.path.basename(m.path), ("ok", []))[0] for m in mods), key=lambda s: _RANK.get(s, 0))
        ids = sorted({i for m in mods for i in v.get(os.path.basename(m.path), ("ok", []))[1]})
        version = mods[0].package_version or ""
        label = ("%s %s" % (key, version)).strip()
        verdict = out.style(worst, worst if worst != "ok" else "ok") + (" (%s)" % ", ".join(ids) if ids else "")
        if not verbose:
            from cudafix.render.text import wrap_atoms

            # broken only between entries: an arch, a runtime ("CUDA 13", "static runtime"), the verdict
            first = "  %s  %d file%s  " % (label, len(mods), "" if len(mods) == 1 else "s")
            runtime = _runtime(mods).split(", ")
            runtime = [r + "," for r in runtime[:-1]] + runtime[-1:]
            runtime[0] = " " + runtime[0]  # a leading space: two between columns, as before
            atoms = _archs(mods).split(" ") + runtime + [" " + verdict]
            out.lines.extend(wrap_atoms(first, atoms, len(label) + 4, width) if width else [first + " ".join(atoms)])
            continue
        out.add("  %s  %s" % (label, mods[0].owner_via or mods[0].location))
        for m in mods:
            mv = v.get(os.path.basename(m.path), ("ok", []))
            extra = ""
            if m.torch_linked and m.checked_against:
                extra = "  torch symbols: %d checked, %d missing" % (m.torch_symbols_checked, m.missing_torch_symbols_count)
            out.add("    %s: %s; %s; %s%s" % (m.path, _archs([m]), _runtime([m]), out.style(mv[0], mv[0] if mv[0] != "ok" else "ok"), extra))
    out.add(out.style("  (%d shared objects examined under %d directories)" % (info.files_seen, len(info.roots)), "dim"))
