"""The first screen (issue 35): the answer on line 1, then one line per finding, then the plan.

What a user reads first decides whether they keep reading, so `status` and `check` open with the
verdict: ``healthy``, or ``N problems — the first: ... Fix: cudafix fix (K steps)``; "healthy" only
where a torch was found and every rule could decide.  A machine without an NVIDIA driver says so
next, once.  Findings follow one line each, with the plan step that answers them; the evidence is
under `status -v` (render.findings) and `cudafix explain RULE`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Sequence, Tuple

from cudafix.model.findings import ERROR, INFO, UNKNOWN, WARNING, Finding, RuleRun
from cudafix.model.snapshot import Snapshot
from cudafix.render.findings import sorted_findings, summary_line, unknowns
from cudafix.render.text import DASH, WIDTH, Out, plural, visible_len


def assumed_value(v: Any) -> str:
    if isinstance(v, dict) and "value" in v:  # cudafix.probes.machine.assume: {"value": ..., "replaced": ...}
        return assumed_value(v["value"])
    if isinstance(v, dict) and "values" in v:
        return assumed_value(v["values"])
    if isinstance(v, (list, tuple)):
        return ",".join(assumed_value(x) for x in v)
    if isinstance(v, dict):
        return ",".join("%s:%s" % (k, assumed_value(x)) for k, x in sorted(v.items()))
    return str(v)


def problems(runs: Sequence[RuleRun]) -> List[Finding]:
    """What the verdict counts: errors and warnings, worst first (notes are not problems)."""
    return [f for f in sorted_findings(runs) if f.severity in (ERROR, WARNING)]


def no_driver(snap: Snapshot) -> bool:
    """No NVIDIA driver at all: no kernel module, no libcuda, no WSL driver, no GPU reported."""
    d = snap.driver
    return not (d.kernel_version or d.libcuda_path or d.libcuda_version or d.cuda_version or d.wsl
                or snap.gpus.gpus or (snap.hardware is not None and snap.hardware.dxg))


def no_driver_line(snap: Snapshot) -> Optional[str]:
    """The one line a machine without the driver gets (its unknown driver/GPU rows collapse into it)."""
    if not no_driver(snap):
        return None
    hw = snap.hardware
    if hw is not None and hw.nvidia_pci:
        where = ", but NVIDIA GPU hardware on its PCI bus (%s)" % ", ".join(p.address for p in hw.nvidia_pci)
    elif hw is not None and not hw.unknown:
        where = "; no NVIDIA GPU on its PCI bus either"
    else:
        where = " (no kernel module, no libcuda.so.1)"
    return "no NVIDIA driver on this machine%s" % where


def no_torch(snap: Snapshot) -> bool:
    """No torch found in the inspected env (not: the torch probe failed)."""
    return not snap.torch and "torch" not in snap.probe_errors


def _names(message: str, subject: str) -> bool:
    """Whether ``message`` names ``subject`` as a word of its own ("GPU" is not named by "GPU0")."""
    import re

    return re.search(r"(?<![\w.-])%s(?![\w-])" % re.escape(subject), message) is not None


def _headline(message: str) -> str:
    """A finding's message up to its first ": " (the rest is the consequence), if that says enough."""
    head = message.split(": ", 1)[0]
    return head if len(head) >= 24 else message


def verdict_lines(snap: Optional[Snapshot], runs: Sequence[RuleRun], plan: Any = None, plan_error: Optional[str] = None,
                  fix_command: str = "cudafix fix") -> List[str]:
    """Line 1 is the answer; the lines after it say what the answer rests on (what-if, no driver)."""

    probs = problems(runs)
    unk = unknowns(runs)
    notes = [f for f in sorted_findings(runs) if f.severity == INFO]
    lines: List[str] = []
    first = ""
    torchless = snap is not None and no_torch(snap)
    if torchless:
        first = "no torch installed for %s: no PyTorch CUDA stack to check" % (snap.python.executable or "this environment")
    if probs:
        f = probs[0]
        subject = " [%s]" % f.subject if f.subject and not _names(f.message, f.subject) else ""
        first += "%s%s %s the first: %s%s: %s." % ("; " if torchless else "", plural(len(probs), "problem"), DASH, f.rule,
                                                     subject, _headline(f.message))
    elif torchless:
        pass
    elif unk:
        first = "no problem among the checks that could decide; %s could not (below)" % plural(len(unk), "check")
    elif not runs:
        first = "nothing checked: no rules were run"
    else:
        first = "healthy" + (" (%s below)" % plural(len(notes), "note") if notes else "")
    if probs:
        if plan is None:
            first += " Fix: unknown %s no plan: %s" % (DASH, plan_error or "not made")
        elif plan.blockers:
            first += " Fix: %s first, then %s" % (plan.blockers[0], fix_command)
        elif plan.steps:
            # the bare command, or (for --python, --from, --assume-*) the exact line on the next one
            first += (" Fix: cudafix fix (%s)" if fix_command == "cudafix fix" else " Fix (%s):") % plural(len(plan.steps), "step")
        else:
            first += " Fix: no step cudafix can name (Plan, below)"
    lines.append(first)
    if probs and plan is not None and plan.steps and not plan.blockers and fix_command != "cudafix fix":
        lines.append("  $ %s" % fix_command)
    if snap is None:  # the rule runs alone (conda's health check): nothing more to say
        return lines
    if snap.assumed:
        parts = ["%s=%s" % (k, assumed_value(v)) for k, v in sorted(snap.assumed.items())]
        lines.append("  what-if: assumed " + "; ".join(parts))
    line = no_driver_line(snap)
    if line:
        lines.append("  " + line)
    return lines


def _one_line(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns at a word, with an ellipsis (the whole line: `status -v`)."""
    if visible_len(text) <= width:
        return text
    cut = text[:width - 1]
    if " " in cut[width * 3 // 4:]:  # at a word, unless that loses more than a quarter of the line
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "\u2026"


def _tagged(out: Out, text: str, severity: str) -> str:
    """The row with its severity column coloured (``text`` starts "  <severity padded to 7>")."""
    return text[:2] + out.style(text[2:9], severity, "bold") + text[9:] if out.color else text


def finding_rows(out: Out, runs: Sequence[RuleRun], plan: Any = None, width: Optional[int] = WIDTH) -> List[str]:
    """One line per finding (severity, rule, subject, the plan step that answers it, the message)
    and one per group of unknown verdicts that share a reason; ``width`` None: nothing cut."""
    rows: List[str] = []
    for f in sorted_findings(runs):
        step = plan.step_for(f.rule, f.subject) if plan is not None else None
        # on the first screen a subject the message names is not said twice; whole (`check`): always
        subject = " [%s]" % f.subject if f.subject and not (width and _names(f.message, f.subject)) else ""
        tail = (" \u2192 step %d" % step) if step is not None else (" [auto-fix]" if f.auto else "")
        text = "  %-7s %s%s%s: %s" % (f.severity, f.rule, subject, tail, f.message)
        rows.append(_tagged(out, _one_line(text, width) if width else text, f.severity))
    groups: Dict[str, List[Tuple[str, str]]] = {}
    for u in unknowns(runs):
        # the same reason about another file is the same reason: grouped with its subject taken out
        reason = u["message"]
        if u["subject"] and reason.startswith(u["subject"]):
            reason = reason[len(u["subject"]):].lstrip(" :") or reason
        groups.setdefault(reason, []).append((u["rule"], u["subject"]))
    if not width:  # whole (`check`, a CI log): one line per unknown, as grep finds it
        return rows + [_tagged(out, "  %-7s %s%s: %s" % (UNKNOWN, u["rule"], " [%s]" % u["subject"] if u["subject"] else "",
                                                       u["message"]), UNKNOWN) for u in unknowns(runs)]
    for reason, ids in groups.items():
        # one line per reason: the reason first, then which checks it left undecided
        rules_ = list(dict.fromkeys(r for r, _ in ids))
        subjects = [sub for _, sub in ids if sub]
        if len(ids) == 1:
            rule, subject = ids[0]
            text = "  %-7s %s: %s" % (UNKNOWN, rule, reason)
            if subject and subject not in reason:  # the reason first: a long file name must not hide it
                whole = text + " (%s)" % subject
                text = whole if not width or visible_len(whole) <= width else text + " (-v: which)"
        else:
            who = "%s, %d files" % (rules_[0], len(ids)) if len(rules_) == 1 else plural(len(ids), "check")
            text = "  %-7s %s: %s (%s)" % (UNKNOWN, who, reason, ", ".join(subjects if len(rules_) == 1 else rules_))
            if width and visible_len(text) > width:  # the list whole or not at all (-v has each)
                text = "  %-7s %s: %s (-v lists them)" % (UNKNOWN, who, reason)
        rows.append(_tagged(out, _one_line(text, width) if width else text, UNKNOWN))
    return rows


def first_screen(out: Out, snap: Optional[Snapshot], runs: Sequence[RuleRun], plan: Any, plan_error: Optional[str],
                 fix_command: str, width: Optional[int]) -> None:
    """The verdict and the findings, one line each (``width`` None: whole): what `status` and
    `check` open with; the caller adds the plan after them."""
    from cudafix.render.text import fit_lines

    head = verdict_lines(snap, runs, plan, plan_error, fix_command)
    style = ERROR if problems(runs) else "ok" if head[0].startswith("healthy") else WARNING
    wrapped = fit_lines([head[0]], hang=4) if width else [head[0]]
    out.lines.extend(out.style(ln, style, "bold") for ln in wrapped)
    out.lines.extend(head[1:])
    for name in sorted(snap.probe_errors if snap is not None else ()):
        out.add("  " + out.style("probe %s failed: %s" % (name, snap.probe_errors[name]), UNKNOWN))
    out.section("Findings: " + summary_line(runs))
    rows = finding_rows(out, runs, plan, width)
    if rows:
        out.lines.extend(rows)
    elif snap is not None and no_torch(snap):
        out.add("  no problem outside torch (there is no torch to check)")
    else:
        out.add("  " + out.style("no problems found", "ok") if runs else "  no rules were run")
