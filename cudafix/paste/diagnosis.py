"""A pasted report -> findings and the plan, with what is certain from the text and what is not.

    from cudafix.paste import diagnose
    findings, plan = diagnose(open("issue.txt").read())

The same rules and the same planner as `cudafix status`, run on the partial snapshot the text
states (cudafix.paste.build); the error texts in it add what they are symptoms of.  ``read``
gives everything (the facts with their lines, the runs, the notes) for the CLI and for bots.
"""

from __future__ import annotations

import dataclasses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple, Union

    from cudafix.plans.planner import FixPlan

from cudafix.model.findings import OK, PROBLEM, UNKNOWN, WARNING, INFO, Finding, RuleRun
from cudafix.model.record import record
from cudafix.model.snapshot import Snapshot
from cudafix.model import versions
from cudafix.paste import facts as F
from cudafix.paste.build import NEEDS_ENV
from cudafix.paste.facts import Report

CERTAIN = "certain from the report"
LIKELY = "likely, not certain from the report"
# the facts each rule need is decided by (cudafix.model.findings.Rule.needs -> fact names)
NEED_FACTS = {
    "torch": (F.TORCH_VERSION, F.TORCH_CUDA, F.PACKAGE + ":torch", F.PACKAGE + ":pytorch"),
    "torchvision": (F.PACKAGE + ":torchvision",),
    "driver": (F.DRIVER_VERSION, F.DRIVER_CUDA),
    "gpus": (F.GPU,),
    "hardware": (F.GPU,),
}
# facts that must agree within one machine and one env: a second value means two dumps
_SINGLE = ((F.DRIVER_VERSION, "driver"), (F.TORCH_VERSION, "torch"), (F.PYTHON_VERSION, "Python"))


@record
class Diagnosis:
    """Everything `status --from-report` shows."""

    report: Report
    snapshot: Snapshot
    runs: List[RuleRun]
    findings: List[Finding]  # the rules' findings, then the error texts' (severity order)
    certainty: Dict[str, str]  # rule id -> CERTAIN | LIKELY for every finding
    plan: Optional[Any] = None  # the FixPlan
    plan_error: Optional[str] = None
    undecided: List[str] = dataclasses.field(default_factory=list)  # rule ids that need the env

    def to_dict(self) -> Dict[str, Any]:
        return {
            "report": self.report.to_dict(),
            "findings": [dict(f.to_dict(), certainty=self.certainty.get(f.rule, "")) for f in self.findings],
            "undecided": list(self.undecided),
            "needs_env": NEEDS_ENV,
            "plan": self.plan.to_dict() if self.plan is not None else None,
            "plan_error": self.plan_error,
        }


def _conflicts(report: Report) -> None:
    """Two values of a one-per-machine fact: say so (the first is judged)."""
    for name, label in _SINGLE:
        fs = report.all(name)
        if name == F.TORCH_VERSION:
            fs = fs + [f for f in report.all(F.PACKAGE) if f.value.split("|")[0] in ("torch", "pytorch")]
        first = fs[0] if fs else None
        for f in fs[1:]:
            a, b = first.value.split("|")[1] if first.name == F.PACKAGE else first.value, f.value.split("|")[1] if f.name == F.PACKAGE else f.value
            if name == F.PYTHON_VERSION:
                same = a.startswith(b) or b.startswith(a)
            elif name == F.TORCH_VERSION:
                same = versions.public(a) == versions.public(b) and (not versions.local(a) or not versions.local(b) or versions.local(a) == versions.local(b))
            else:
                same = a == b
            if not same:
                report.conflicts.setdefault(name, []).append(f)
                what = ("two torch installs in one env, or two envs or machines in one paste" if name == F.TORCH_VERSION
                        else "two machines or environments in one paste")
                report.notes.append("lines %d and %d give two %s versions (%s, %s): %s; cudafix judged the first (line %d)"
                                    % (first.line, f.line, label, a, b, what, first.line))
                break


def read_report(data: Union[str, bytes]) -> Report:
    """The facts, the error texts and the notes of a paste (no rules run)."""
    from cudafix.paste import parse, symptoms, text

    lines, notes = text.lines_of(data)
    facts, sources = parse.read(lines)
    report = Report(facts=facts, sources=sources, notes=notes, lines=len(lines))
    report.symptoms = symptoms.find(lines)
    _conflicts(report)
    if not facts and not report.symptoms:
        report.notes.append("nothing in the text is a CUDA/torch report cudafix can read (collect_env, nvidia-smi, nvcc "
                            "--version, pip/conda list, yolo checks, or a CUDA error)")
    return report


def fact_lines(report: Report, needs: Tuple[str, ...]) -> List[int]:
    names = {n for need in needs for n in NEED_FACTS.get(need, ())}
    return sorted({f.line for f in report.facts
                   if (f.name + ":" + f.value.split("|")[0] if f.name == F.PACKAGE else f.name) in names})


def _symptom_findings(report: Report, runs: List[RuleRun], snap: Snapshot) -> Tuple[List[Finding], Dict[int, List[str]]]:
    """Findings for error texts whose rules the facts could not decide; and, for rules that did
    find the problem, the lines of their symptoms (added to their evidence)."""
    by_id = {r.rule.id: r for r in runs}
    out: List[Finding] = []
    confirm: Dict[int, List[str]] = {}
    done = set()
    for s in report.symptoms:
        hit = [by_id[r] for r in s.rules if r in by_id]
        found = [r for r in hit if r.verdict == PROBLEM]
        if found:
            for r in found:
                confirm.setdefault(id(r), []).append("the report's error at line %d is a symptom of it: %s" % (s.line, s.text[:160]))
            continue
        open_ = [r for r in hit if r.verdict == UNKNOWN]
        for r in open_ or hit:
            if (r.rule.id, s.line) in done or r.rule.id in {f.rule for f in out}:
                continue
            done.add((r.rule.id, s.line))
            if open_:
                missing = [n for n in r.rule.needs if n in snap.probe_errors]
                why = ("the report does not show: %s" % ", ".join(missing) if missing else
                       "; ".join(o.message for o in r.outcomes if o.verdict == UNKNOWN)[:200] or "its facts are not in the report")
                out.append(Finding(
                    rule=r.rule.id, severity=WARNING, scope=r.rule.scope, subject="report line %d" % s.line,
                    message="the error at line %d is a symptom of: %s" % (s.line, r.rule.title),
                    evidence=("report line %d: %s" % (s.line, s.text[:200]),
                              "not decided from the report's facts (%s): %s" % (why, NEEDS_ENV),
                              "`cudafix explain %s` lists its cause and fix" % r.rule.id)))
            else:
                out.append(Finding(
                    rule=r.rule.id, severity=INFO, scope=r.rule.scope, subject="report line %d" % s.line,
                    message="the error at line %d reads like %s, but the report's facts rule that out" % (s.line, r.rule.id),
                    evidence=("report line %d: %s" % (s.line, s.text[:200]),) + tuple(
                        o.message for o in r.outcomes if o.verdict == OK)[:2]))
    return out, confirm


# Rules whose "ok" says a package list holds nothing wrong: a paste lists only some packages
# (collect_env's [pip3] lines are filtered), so there their "ok" is unknown.
WHOLE_LIST_RULES = ("mixed-cuda-sources",)


def _partial_lists(runs: List[RuleRun]) -> List[RuleRun]:
    from cudafix.model.findings import Outcome

    out = []
    for r in runs:
        if r.rule.id in WHOLE_LIST_RULES and r.verdict == OK:
            r = RuleRun(r.rule, [Outcome(UNKNOWN, "the report lists only some of the env's packages: %s" % NEEDS_ENV)])
        out.append(r)
    return out


# A finding whose own evidence says a fact it used is unknown (driver-minor-compat: "whether one of
# the extension modules needs the PTX JIT is unknown") is not certain from the text: it is shown
# as likely, and the plan is not made from it.
_UNSURE = ("is unknown", "not in the report", NEEDS_ENV)


def _unsure(f: Finding) -> bool:
    return any(m in e for e in f.evidence for m in _UNSURE)


def _for_plan(runs: List[RuleRun]) -> List[RuleRun]:
    from cudafix.model.findings import Outcome

    out = []
    for r in runs:
        if r.verdict == PROBLEM and any(_unsure(f) for f in r.findings()):
            r = RuleRun(r.rule, [Outcome(UNKNOWN, "decided on facts the report does not state: %s" % NEEDS_ENV)])
        out.append(r)
    return out


def analyse(report: Report, rule_set: Optional[Tuple[Any, ...]] = None) -> Diagnosis:
    """Run the rules and the planner on what ``report`` states."""
    from cudafix import rules
    from cudafix.paste.build import snapshot
    from cudafix.plans.planner import plan_or_error

    snap = snapshot(report)
    runs = _partial_lists(rules.run(snap, rule_set))
    extra, confirm = _symptom_findings(report, runs, snap)
    plan, plan_error = plan_or_error(snap, _for_plan(runs))
    findings: List[Finding] = []
    certainty: Dict[str, str] = {}
    for r in runs:
        more = tuple(confirm.get(id(r), ()))
        lines = fact_lines(report, r.rule.needs)
        for f in r.findings():
            ev = f.evidence + more + (("from report line%s %s" % ("" if len(lines) == 1 else "s", ", ".join(map(str, lines))),) if lines else ())
            unsure = _unsure(f)
            if unsure and f.severity == "error":
                # an error only where the env confirms it: from the text it is a likely cause
                f = dataclasses.replace(f, severity=WARNING)
                ev = ev + ("an error if the facts the report lacks confirm it: %s" % NEEDS_ENV,)
            findings.append(dataclasses.replace(f, evidence=ev))
            if certainty.get(f.rule) != LIKELY:
                certainty[f.rule] = LIKELY if unsure else CERTAIN
    for f in extra:
        findings.append(f)
        certainty.setdefault(f.rule, LIKELY)
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order.get(f.severity, 3))
    undecided = [r.rule.id for r in runs if r.verdict == UNKNOWN and r.rule.id not in certainty]
    return Diagnosis(report=report, snapshot=snap, runs=runs, findings=findings, certainty=certainty,
                     plan=plan, plan_error=plan_error, undecided=undecided)


def read(data: Union[str, bytes]) -> Diagnosis:
    """Everything: the report's facts, the runs, the findings with their certainty, the plan."""
    return analyse(read_report(data))


def diagnose(data: Union[str, bytes]) -> "Tuple[List[Finding], Optional[FixPlan]]":
    """(findings, plan) for a pasted report: the API for issue bots and CI jobs (docs/from-report.md)."""
    d = read(data)
    return d.findings, d.plan
