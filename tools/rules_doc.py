"""Generate docs/rules.md from the rule registry (id, severity, meaning, auto-fix, symptoms, sources).

    python -m tools.rules_doc            # rewrite docs/rules.md
    python -m tools.rules_doc --check    # exit 1 if docs/rules.md is out of date

tests/test_rules_doc.py fails when the committed file differs from what this prints.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence

from tools import docfile
from tools.docfile import repo_path

HEADER = """# cudafix rules

Generated from the rule registry by `python -m tools.rules_doc`; do not edit by hand.
Rule ids are a public contract (the JSON `rule` field, `cudafix explain RULE`, `--only` / `--skip`).

- **severity**: the default severity of the rule's findings: what happens to the user.  A finding may
  state a different one; the rule's **Severity** line says when (e.g. `cuda-home-mismatch` is an error
  only where the env builds CUDA extensions).
- **auto-fix**: yes when cudafix applies a safe correction itself (on `conda activate` and/or at
  `import torch`); otherwise the finding carries advice: an exact command to run.
"""


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(registry: Optional[Sequence] = None) -> str:
    if registry is None:
        from cudafix.fleet.checks import FLEET_RULES
        from cudafix.rules import REGISTRY

        registry = tuple(REGISTRY) + FLEET_RULES  # fleet-* rules compare nodes: `cudafix fleet` judges them
    lines: List[str] = [HEADER, "| rule | severity | auto-fix | what it detects |", "| --- | --- | --- | --- |"]
    for r in registry:
        lines.append("| [`%s`](#%s) | %s | %s | %s |" % (r.id, r.id, r.severity, "yes" if r.auto else "no", _md(r.title)))
    lines.append("")
    for r in registry:
        lines.append("## %s" % r.id)
        lines.append("")
        lines.append("**%s** — severity `%s`, auto-fix: %s." % (r.title, r.severity, "yes" if r.auto else "no (advice)"))
        lines.append("")
        lines.append("**Cause.** %s" % r.cause)
        lines.append("")
        if r.symptoms:
            lines.append("**How it shows up:**")
            lines.append("")
            for s in r.symptoms:
                lines.append("- `%s`" % s.replace("`", "'"))
            lines.append("")
        lines.append("**Evidence used.** %s" % r.evidence_used)
        lines.append("")
        if r.severity_basis:
            lines.append("**Why this severity.** %s" % r.severity_basis)
            lines.append("")
        scope = getattr(r, "scope", "runtime")
        if r.id.startswith("fleet-"):
            lines.append("**Judged** across nodes by `cudafix fleet` (docs/fleet.md), never on one snapshot.")
        else:
            lines.append("**Needs** the probes %s (when one failed the verdict is unknown); **scope** %s." % (
                ", ".join("`%s`" % n for n in getattr(r, "needs", ())) or "(none declared)",
                {"build": "build: reported by activation, `status` and `check`, never by the startup hook",
                 "distributed": "distributed: matters to processes that run NCCL collectives; reported by activation, "
                                "`status`, `check` and `fleet`, never by the startup hook"}.get(
                    scope, "runtime: its errors and warnings reach the startup hook at `import torch`")))
        lines.append("")
        lines.append("**Fix.** %s" % r.fix_text)
        lines.append("")
        if r.sources:
            lines.append("**Sources:** %s" % "; ".join(r.sources))
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def default_path() -> str:
    return repo_path("docs", "rules.md")


def main(argv: Optional[Sequence[str]] = None) -> int:
    return docfile.main("tools.rules_doc", __doc__, render, default_path(), argv)


if __name__ == "__main__":
    sys.exit(main())
