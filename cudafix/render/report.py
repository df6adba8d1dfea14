"""Rendering of a Snapshot and its rule runs: the human report and the JSON documents.

Pure functions from data to text.  Nothing here probes, prints or exits: cudafix/cli/report.py
decides where the text goes.  Colour is a parameter (the CLI turns it on only for a TTY
without NO_COLOR), so tests can render both forms.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Sequence

from cudafix.model.findings import ERROR, WARNING, RuleRun
from cudafix.model.snapshot import Snapshot
from cudafix.render.findings import (  # noqa: F401 (the report's public names, one import for callers)
    counts, findings_section, fix_lines, render_explain, render_rule_list, sorted_findings, summary_line, unknowns,
)
from cudafix.render.text import DASH, WIDTH, Out, fit_text  # noqa: F401

# The text sections (render.machine, render.extensions, render.plan) are imported by the functions
# that write them: `status --json` writes none (issue 23).

STATUS_SCHEMA = "cudafix.status/1"


def render_status(snap: Snapshot, runs: Sequence[RuleRun], origin: str = "probed", color: bool = False,
                  verbose: bool = False, plan=None, plan_error: Optional[str] = None, width: Optional[int] = None,
                  fix_command: str = "cudafix fix") -> str:
    """The verdict first (render.verdict: line 1 is the answer, then one line per finding and the
    plan), then the facts: Driver, GPUs, PyTorch, Toolkits, Libraries, Environment; with
    ``verbose``, every finding's evidence last.  ``width``: wrap to that many columns (the CLI: 80;
    render.text.fit_lines); None: one line per fact.  ``fix_command``: the `cudafix fix` line that
    plans for this same snapshot (with the --python / --from / --assume-* options it came from)."""
    from cudafix.render import extensions as _extensions
    from cudafix.render.machine import (
        driver_section, environment_section, gpus_section, header_section, libraries_section, toolkits_section, torch_section,
    )
    from cudafix.render.verdict import first_screen

    out = Out(color)
    first_screen(out, snap, runs, plan, plan_error, fix_command, width)
    if runs and not verbose and (sorted_findings(runs) or unknowns(runs)):
        out.add(out.style("  more: cudafix status -v (evidence), cudafix explain RULE (cause, fix)", "dim"))
    if plan_error or (plan is not None and not (plan.nothing_to_do and not plan.automatic)):
        plan_section(out, plan, plan_error)
    out.add()
    header_section(out, snap, origin)
    driver_section(out, snap, verbose)
    gpus_section(out, snap, verbose)
    torch_section(out, snap)
    _extensions.render(out, snap, runs, verbose, width)
    toolkits_section(out, snap)
    libraries_section(out, snap, verbose)
    environment_section(out, snap, verbose)
    if verbose:
        findings_section(out, runs, plan, title="Evidence")
    return fit_text(out.text(), width) if width else out.text()


def plan_section(out: Out, plan, error: Optional[str]) -> None:
    """The one plan for every finding (cudafix.plans.planner, made by the caller): `cudafix fix`
    prints and applies it."""
    from cudafix.render.plan import plan_lines

    out.section("Plan (cudafix fix)")
    out.lines.extend(plan_lines(plan) if plan is not None else ["  unknown \u2014 no plan: %s" % error])


def render_check(runs: Sequence[RuleRun], color: bool = False, snap: Optional[Snapshot] = None, plan=None,
                 strict: bool = False, width: Optional[int] = None, fix_command: str = "cudafix fix") -> str:
    """The `cudafix check` output: the verdict, the findings one entry each (whole: a CI log keeps
    them), and the plan's steps, the same answer as `cudafix status` and `cudafix fix`.  With
    ``strict``, a run that fails only by --strict ends naming each warning and unknown that failed it."""
    from cudafix.render.verdict import first_screen

    out = Out(color)
    first_screen(out, snap, runs, plan, None, fix_command, None)
    if plan is not None and not (plan.nothing_to_do and not plan.automatic):  # as `status` (open findings' advice too)
        plan_section(out, plan, None)
    if strict:
        failed = strict_failures(runs)
        if failed and not counts(sorted_findings(runs))[ERROR]:
            out.section(out.style("--strict: exit 1 because of %d warning/unknown verdict%s:" % (
                len(failed), "" if len(failed) == 1 else "s"), WARNING))
            out.lines.extend("  " + ln for ln in failed)
    return fit_text(out.text(), width) if width else out.text()


def strict_failures(runs: Sequence[RuleRun]) -> list:
    """One line per warning finding and per unknown verdict: what `check --strict` fails on."""
    lines = ["warning %s%s" % (f.rule, " [%s]" % f.subject if f.subject else "")
             for f in sorted_findings(runs) if f.severity == WARNING]
    lines += ["unknown %s%s" % (u["rule"], " [%s]" % u["subject"] if u["subject"] else "") for u in unknowns(runs)]
    return lines


def _with_step(d: Dict[str, Any], plan) -> Dict[str, Any]:
    """A finding's JSON with ``answered_by``: the number of the plan step that answers it (or null)."""
    d["answered_by"] = plan.step_for(d.get("rule", ""), d.get("subject", "")) if plan is not None else None
    return d


def status_document(snap: Snapshot, runs: Sequence[RuleRun], plan=None) -> Dict[str, Any]:
    """The `--json` document: schema cudafix.status/1."""
    return {
        "schema": STATUS_SCHEMA,
        "snapshot": snap.to_dict(),
        "findings": [_with_step(f.to_dict(), plan) for f in sorted_findings(runs)],
        "unknown": unknowns(runs),
        "verdicts": {r.rule.id: r.verdict for r in runs},
        "plan": plan.to_dict() if plan is not None else None,
    }
