"""Rule results: verdicts, findings, and the Rule record the registry holds."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from cudafix.model.fixes import Fix
from cudafix.model.record import record
from cudafix.model.snapshot import Snapshot

OK = "ok"
PROBLEM = "problem"
UNKNOWN = "unknown"

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)

# What a rule's findings are about (docs/hook.md): RUNTIME problems break, hide or slow what a
# process does after `import torch`, so the startup hook warns about them; BUILD problems matter
# only when building CUDA extensions; DISTRIBUTED problems only to a process that runs NCCL
# collectives (torch.distributed on GPUs).  Activation, `status`, `check` (and `fleet`) show both;
# the hook never does: most processes that import torch build nothing and run no collective.
RUNTIME = "runtime"
BUILD = "build"
DISTRIBUTED = "distributed"
SCOPES = (RUNTIME, BUILD, DISTRIBUTED)


@record(frozen=True)
class Outcome:
    """One verdict of one rule about one subject (a GPU, a library, a variable...)."""

    verdict: str  # OK | PROBLEM | UNKNOWN
    message: str  # one line, exact, no trailing period needed
    evidence: Tuple[str, ...] = ()  # sentences that state the rule applied and the facts used
    fix: Optional[Fix] = None
    severity: Optional[str] = None  # overrides the rule's default severity for this outcome
    subject: str = ""  # what it is about ("GPU0", "libnvJitLink.so.13", "CUDA_HOME")


@record(frozen=True)
class Finding:
    """A PROBLEM outcome, rendered for users (report, JSON, hook warnings)."""

    rule: str
    severity: str
    message: str
    evidence: Tuple[str, ...] = ()
    fix: Optional[Fix] = None
    subject: str = ""
    scope: str = RUNTIME  # RUNTIME | BUILD | DISTRIBUTED: the rule's scope (only RUNTIME findings reach the hook)

    @property
    def auto(self) -> bool:
        return bool(self.fix and self.fix.auto)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "evidence": list(self.evidence),
            "fix": self.fix.to_dict() if self.fix else None,
            "auto": self.auto,
            "subject": self.subject,
            "scope": self.scope,
        }

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Finding":
        return cls(
            rule=d["rule"],
            severity=d["severity"],
            message=d["message"],
            evidence=tuple(d.get("evidence", ())),
            fix=Fix.from_dict(d["fix"]) if d.get("fix") else None,
            subject=d.get("subject", ""),
            scope=d.get("scope", RUNTIME),
        )


if TYPE_CHECKING:  # an annotation only: typing is not imported at run time (issue 23)
    Check = Callable[[Snapshot], Iterable[Outcome]]


@record(frozen=True)
class Rule:
    """One registered rule: its stable id, default severity, check function and `explain` text."""

    id: str  # stable kebab-case, a public contract
    severity: str  # default severity of its problems
    title: str  # one line: what it detects
    check: Check
    auto: bool = False  # whether its fix is applied automatically (documented in docs/rules.md)
    # `cudafix explain` material:
    cause: str = ""
    symptoms: Tuple[str, ...] = ()  # exact error texts users see
    evidence_used: str = ""
    fix_text: str = ""
    sources: Tuple[str, ...] = ()
    # Why each severity it gives is what happens to the user (what was measured or cited), and
    # when a finding's severity differs from ``severity``; docs/rules.md prints it under the rule.
    severity_basis: str = ""
    # The probes (snapshot sections) whose facts the rule needs: when one of them failed
    # (snapshot.probe_errors) the runner answers `unknown` with the probe's error, never `ok`.
    # Names: driver, gpus, hardware, node, torch, torchvision, toolkits, libraries, extensions, jit_cache,
    # env, python.
    needs: Tuple[str, ...] = ()
    scope: str = RUNTIME  # RUNTIME | BUILD | DISTRIBUTED (see SCOPES)


@record
class RuleRun:
    """All outcomes of one rule on one snapshot."""

    rule: Rule
    outcomes: List[Outcome]
    error: Optional[str] = None  # the rule itself crashed: reported as unknown, never raised

    @property
    def verdict(self) -> str:
        if self.error or not self.outcomes:  # a rule that said nothing decided nothing
            return UNKNOWN
        verdicts = {o.verdict for o in self.outcomes}
        if PROBLEM in verdicts:
            return PROBLEM
        if UNKNOWN in verdicts:
            return UNKNOWN
        return OK

    def findings(self) -> List[Finding]:
        return [
            Finding(
                rule=self.rule.id,
                severity=o.severity or self.rule.severity,
                message=o.message,
                evidence=o.evidence,
                fix=o.fix,
                subject=o.subject,
                scope=self.rule.scope,
            )
            for o in self.outcomes
            if o.verdict == PROBLEM
        ]
