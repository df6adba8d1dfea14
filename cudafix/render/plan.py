"""A plan (cudafix.plans.planner.FixPlan) as the user reads it: the report's "Plan" section and
`cudafix fix`.  Every command line is printed once, exactly as it runs."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List

from cudafix.plans.planner import INSTALL, OTHER, SHELL, UNINSTALL, FixPlan


SHOWN_SKIPPED = 3  # rejected candidates named in the text plan (the JSON plan has them all)


def _labelled(indent: str, groups) -> List[str]:
    """One line per item, under its label in the plan's column ("keep    ...", "blocked ...")."""
    return ["%s%-7s %s" % (indent, label, item) for label, items in groups for item in items]


def plan_lines(plan: FixPlan, indent: str = "  ") -> List[str]:
    out: List[str] = []
    if not plan.steps and not plan.blockers:
        if plan.unresolved:
            out.append(indent + "no step cudafix can name for the open findings below")
        else:
            # not "healthy": that is the verdict's word (render.verdict), said only where it was earned
            out.append(indent + "nothing to do%s" % (" (cudafix corrects the rest itself, below)" if plan.automatic else ""))
        out += ["%sopen    %s" % (indent, u) for u in plan.unresolved]
        out += ["%sauto    %s" % (indent, a) for a in plan.automatic]
        return out
    removed = [c for c in plan.changes if c.after == "(removed)"]
    for c in plan.changes:
        if c.after != "(removed)":
            out.append("%schange  %s %s -> %s" % (indent, c.name, c.before or "(none)", c.after))
    if removed:
        out.append("%sremove  %d CUDA wheel%s the replaced torch needed: %s" % (
            indent, len(removed), "" if len(removed) == 1 else "s", ", ".join(c.name for c in removed)))
    out.extend(_labelled(indent, (("keep", plan.keeps), ("why", plan.why), ("not", plan.skipped[:SHOWN_SKIPPED]))))
    if len(plan.skipped) > SHOWN_SKIPPED:
        out.append("%snot     %d more builds rejected (cudafix fix --json lists each)" % (
            indent, len(plan.skipped) - SHOWN_SKIPPED))
    number = {s.text: i for i, s in enumerate(plan.steps, 1)}  # "plan step N" in the findings
    runs = [s for s in plan.steps if s.kind in (INSTALL, UNINSTALL, OTHER)]
    if runs:
        out.append(indent + "run (%s):" % ("pip of the env's own interpreter" if plan.owner == "pip" else
                                          "conda, on this env's prefix" if plan.owner == "conda" else "in order"))
        out.extend("%s  %d. $ %s" % (indent, number[s.text], s.text) for s in runs)
    shell = [s for s in plan.steps if s.kind == SHELL]
    if shell:
        out.append(indent + "shell (sh, bash, zsh):")
        out.extend("%s  %d.   %s" % (indent, number[s.text], s.text) for s in shell)
    out.extend(_labelled(indent, (("blocked", plan.blockers), ("open", plan.unresolved), ("auto", plan.automatic))))
    out.extend(_labelled(indent, (("note", plan.notes),)))
    return out
