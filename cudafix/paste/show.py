"""A Diagnosis as text: what the report says (with its lines), what is certain from it, what
is likely from its error text, what needs the env, and the plan.

The machine sections and the plan are the renderers `cudafix status` uses (cudafix.render);
every string from the paste goes through their escaping (render.text: a paste is hostile input).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional

from cudafix.paste import facts as F
from cudafix.paste.build import NEEDS_ENV
from cudafix.paste.diagnosis import CERTAIN, LIKELY, Diagnosis
from cudafix.render.findings import finding_lines
from cudafix.render.text import Out, fit_text

_LABEL = {
    F.TORCH_VERSION: "torch", F.TORCH_CUDA: "torch built for CUDA", F.TORCH_HIP: "torch built for ROCm",
    F.CUDA_AVAILABLE: "torch.cuda.is_available()", F.DRIVER_VERSION: "NVIDIA driver", F.DRIVER_CUDA: "driver's CUDA",
    F.GPU: "GPU", F.NVCC: "nvcc (CUDA toolkit)", F.CUDNN: "cuDNN", F.PYTHON_VERSION: "Python", F.PLATFORM: "platform",
    F.WSL: "WSL 2", F.OS: "OS", F.MODULE_LOADING: "CUDA_MODULE_LOADING", F.PACKAGE: "package",
    F.CUDA_HOME: "CUDA_HOME (extensions)", F.EXT_CUDA: "extension ops' CUDA",
}


def _fact_value(name: str, value: str) -> str:
    if name == F.GPU:
        index, _, gpu = value.partition("|")
        return ("%s %s" % (index, gpu)) if index else gpu
    if name == F.PACKAGE:
        parts = (value.split("|") + ["", "", "", ""])[:5]
        extra = " ".join(p for p in (parts[3], parts[4]) if p)
        return "%s %s (%s%s)" % (parts[0], parts[1], parts[2], ", " + extra if extra else "")
    if name == F.TORCH_CUDA and value == "none":
        return "None (a CPU build)"
    return value


def facts_section(out: Out, d: Diagnosis, origin: str) -> None:
    r = d.report
    out.add(out.style("cudafix: a pasted report, %s" % origin, "bold"))
    out.add("  %d lines; read: %s" % (r.lines, ", ".join(r.sources) or "nothing cudafix recognises"))
    out.section("Read from the report")
    shown = 0
    seen = set()
    for f in r.facts:
        key = (f.name, f.value)
        if key in seen:
            continue
        seen.add(key)
        out.add("  line %-5d %-26s %s  (%s)" % (f.line, _LABEL.get(f.name, f.name), _fact_value(f.name, f.value), f.source))
        shown += 1
        if shown >= 60:
            out.add("  ... (%d facts in all)" % len(r.facts))
            break
    if not r.facts:
        out.add("  no facts")
    for s in r.symptoms[:10]:
        out.add("  line %-5d %-26s %s" % (s.line, "error text", s.text[:160]))
    if r.notes:
        out.section("Notes")
        for n in r.notes:
            out.add("  " + n)


def findings_part(out: Out, d: Diagnosis) -> None:
    plan = d.plan
    certain = [f for f in d.findings if d.certainty.get(f.rule) == CERTAIN]
    likely = [f for f in d.findings if d.certainty.get(f.rule) == LIKELY]
    out.section("Certain from the report (%d finding%s)" % (len(certain), "" if len(certain) == 1 else "s"))
    for f in certain:
        out.lines.extend(finding_lines(out, f, plan.step_for(f.rule, f.subject) if plan is not None else None))
    if not certain:
        out.add("  none: no rule found a problem from the facts the report states")
    if likely:
        out.section("Likely: an error text points at it, or facts the report lacks decide it (%s)" % NEEDS_ENV)
        for f in likely:
            out.lines.extend(finding_lines(out, f))
    out.section("Needs the env (%d rule%s): %s" % (len(d.undecided), "" if len(d.undecided) == 1 else "s", NEEDS_ENV))
    line = "  "
    for rid in d.undecided:
        if len(line) + len(rid) > 78:
            out.add(line.rstrip(", "))
            line = "  "
        line += rid + ", "
    if line.strip():
        out.add(line.rstrip(", "))


def render(d: Diagnosis, origin: str, color: bool = False, width: Optional[int] = None, machine: bool = True) -> str:
    """`status --from-report` (``machine``: with the Driver, GPUs and PyTorch sections) and
    `check --from-report`."""
    from cudafix.render.machine import driver_section, gpus_section, torch_section

    out = Out(color)
    facts_section(out, d, origin)
    if machine:
        driver_section(out, d.snapshot)
        gpus_section(out, d.snapshot)
        torch_section(out, d.snapshot)
    findings_part(out, d)
    _plan(out, d)
    return fit_text(out.text(), width) if width else out.text()


def _plan(out: Out, d: Diagnosis) -> None:
    """The planner's plan; "nothing to do" from a report only means its facts decide nothing."""
    from cudafix.render.report import plan_section

    if d.plan is not None and d.plan.nothing_to_do:
        out.section("Plan (cudafix fix)")
        out.add("  nothing that the report's facts decide%s; %s" % (
            " (the likely causes above included)" if any(v == LIKELY for v in d.certainty.values()) else "", NEEDS_ENV))
        return
    plan_section(out, d.plan, d.plan_error)


def plan_only(d: Diagnosis, origin: str, color: bool = False, width: Optional[int] = None) -> str:
    """`fix --from-report`: the plan, and what it cannot know."""
    out = Out(color)
    out.add(out.style("cudafix: the plan for a pasted report, %s" % origin, "bold"))
    out.add("  for that env, not this one; %s before running it" % NEEDS_ENV)
    _plan(out, d)
    return fit_text(out.text(), width) if width else out.text()


def explain_lines(d: Diagnosis) -> List[str]:
    """The rules the report's findings and error texts point at (`explain --from-report`)."""
    ids: List[str] = []
    for f in d.findings:
        if f.severity in ("error", "warning") and f.rule not in ids:
            ids.append(f.rule)
    for s in d.report.symptoms:
        for rid in s.rules:
            if rid not in ids:
                ids.append(rid)
    return ids
