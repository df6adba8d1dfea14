"""The report's findings: each problem with its evidence and fix, the summary line, `explain`."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, Sequence, Tuple, Optional

from cudafix.model.findings import ERROR, INFO, UNKNOWN, WARNING, Finding, Rule, RuleRun
from cudafix.model.fixes import PREPEND_PATH, REMOVE_PATH, SET, UNSET, Fix
from cudafix.render.text import APPLIES_IN, SEVERITY_ORDER, Out, fit_lines, plural, shell_value


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
    lines.append("auto-fix: cudafix applies this %s" % APPLIES_IN.get(fix.applies_in, fix.applies_in))
    return lines


def finding_lines(out: Out, f: Finding, step: Optional[int] = None) -> List[str]:
    """``step``: the number of the plan step that answers it (its own fix text is not printed)."""
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
    if f.fix and f.fix.auto:  # what cudafix corrects itself, then the plan step that answers the cause
        lines.extend(pad + ln for ln in fix_lines(f.fix))
    if step is not None:
        lines.append(pad + "fix: \u2192 plan step %d (cudafix fix)" % step)
    elif f.fix and not f.fix.auto:
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
    return sorted(found, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))


def counts(findings: Sequence[Finding]) -> Dict[str, int]:
    c = {ERROR: 0, WARNING: 0, INFO: 0}
    for f in findings:
        c[f.severity] = c.get(f.severity, 0) + 1
    return c


def summary_line(runs: Sequence[RuleRun]) -> str:
    fs = sorted_findings(runs)
    c = counts(fs)
    unk = unknowns(runs)
    ok = sum(1 for r in runs if r.verdict == "ok")
    return "%s, %s, %s, %d unknown (%s checked, %d ok)" % (
        plural(c[ERROR], "error"), plural(c[WARNING], "warning"), plural(c[INFO], "note"),
        len(unk), plural(len(runs), "rule"), ok,
    )


def findings_section(out: Out, runs: Sequence[RuleRun], plan=None, title: str = "Findings") -> None:
    """Every finding in full: its message, evidence and fix (`status -v`, under ``title``).
    ``plan``: the env's plan (cudafix.plans.planner.FixPlan): a finding it answers points there."""
    out.section(title + ": " + summary_line(runs))
    fs = sorted_findings(runs)
    for f in fs:
        out.lines.extend(finding_lines(out, f, plan.step_for(f.rule, f.subject) if plan is not None else None))
    for u in unknowns(runs):
        head = "  %s %s" % (out.style("%-7s" % UNKNOWN, UNKNOWN), u["rule"])
        if u["subject"]:
            head += " [%s]" % u["subject"]
        out.add(head + ": " + u["message"])
    if not fs and not runs:
        out.add("  no rules were run")
    elif not fs and unknowns(runs):
        # not "no problems found": what could not be decided is listed just above
        out.add("  no problem found among the rules that could decide")
    elif not fs:
        out.add("  " + out.style("no problems found", "ok"))


def render_rule_list(rules: Sequence[Rule], color: bool = False) -> str:
    out = Out(color)
    if not rules:
        out.add("no rules are registered")
        return out.text()
    width = max(len(r.id) for r in rules)
    for r in rules:
        auto = "  " + out.style("[auto-fix]", "ok") if r.auto else ""
        out.add("%-*s  %-7s  %s%s" % (width, r.id, r.severity, r.title, auto))
    out.lines = fit_lines(out.lines, hang=width + 11 if width + 11 <= 50 else 4)  # under the title; an id starts each entry
    return out.text()


def paragraphs(text: str, indent: str = "  ", width: int = 80) -> List[str]:
    import textwrap  # here, as in render.text.wrap_list: only the text reports wrap

    lines: List[str] = []
    for para in textwrap.dedent(text).strip().split("\n\n"):
        body = " ".join(para.split())
        lines.extend(textwrap.wrap(body, width=width, initial_indent=indent, subsequent_indent=indent,
                                   break_on_hyphens=False, break_long_words=False) or [indent.rstrip()])
        lines.append("")
    return lines[:-1]


def render_explain(rule: Rule, color: bool = False) -> str:
    """`cudafix explain RULE`: cause, how it shows up, evidence used, fix, sources."""
    out = Out(color)
    auto = "cudafix corrects it automatically" if rule.auto else "you run the fix: cudafix fix"
    out.add("%s  (%s; %s)" % (out.style(rule.id, "bold"), rule.severity, auto))
    out.add("  " + rule.title)
    blocks: Tuple[Tuple[str, Any], ...] = (
        ("Cause", rule.cause),
        ("How it shows up", rule.symptoms),
        ("Evidence used", rule.evidence_used),
        ("Fix", rule.fix_text),
        ("Sources", rule.sources),
    )
    quoted = set()  # exact error texts and sources: never re-wrapped (a user searches for them verbatim)
    for title, body in blocks:
        out.section(title)
        if not body:
            out.add("  (not documented)")
        elif isinstance(body, str):
            out.lines.extend(paragraphs(body))
        elif title == "How it shows up":
            for s in body:
                quoted.add(len(out.lines))
                out.add("  " + s)
        else:
            for s in body:
                quoted.add(len(out.lines))
                out.add("  - " + s)
    out.lines = [w for i, ln in enumerate(out.lines) for w in ([ln] if i in quoted else fit_lines([ln]))]
    return out.text()
