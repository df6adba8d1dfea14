"""The corpus of real pasted reports (tests/fixtures/reports/, transcribed from public issues):
the cause each thread settled on must be an error or warning finding, a control must have no
error, and the plan must agree with the fix that worked -- in at least 90% of the cases.  The
misses are listed in docs/from-report.md with their reasons; this test holds the list to what
cudafix really does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from cudafix.paste import diagnosis

REPORTS = Path(__file__).resolve().parent / "fixtures" / "reports"
DOC = Path(__file__).resolve().parent.parent / "docs" / "from-report.md"
KEYS = ("url", "resolution", "resolved-by", "cause", "fix")
FIX_KINDS = ("new-torch", "driver", "torchvision", "env", "none")


def read_case(path: Path) -> Tuple[Dict[str, str], str]:
    head: Dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines(True)
    for i, line in enumerate(lines):
        if line.startswith("# ---"):
            return head, "".join(lines[i + 1:])
        m = re.match(r"^# ([a-z-]+): (.*)$", line.rstrip("\n"))
        assert m, "%s: header line %r" % (path.name, line)
        head[m.group(1)] = m.group(2).strip()
    raise AssertionError("%s: no '# ---' line after the header" % path.name)


def judge(head: Dict[str, str], text: str) -> Tuple[bool, str]:
    """(agrees, why not): the thread's cause and fix against the diagnosis of the paste alone."""
    d = diagnosis.read(text)
    serious = {f.rule for f in d.findings if f.severity in ("error", "warning")}
    errors = {f.rule for f in d.findings if f.severity == "error"}
    plan = d.plan
    torch_change = plan is not None and plan.target is not None
    cause, fix = head["cause"], head["fix"]
    if cause == "none":
        if errors:
            return False, "control with error finding(s): %s" % ", ".join(sorted(errors))
        if torch_change:
            return False, "control, but the plan changes torch to %s" % plan.target
        return True, ""
    if cause not in serious:
        return False, "%s is not an error or warning finding (found: %s)" % (cause, ", ".join(sorted(serious)) or "none")
    certain = d.certainty.get(cause) == diagnosis.CERTAIN
    names = {c.name for c in plan.changes} if plan is not None else set()
    if fix == "env":
        ok = not torch_change
        why = "the fix was outside torch, but the plan changes torch to %s" % (plan.target if plan else None)
    elif not certain:
        # only the error text points at the cause: the plan cannot be made from the text and
        # must not propose a change of its own (the finding says: run `cudafix status` there)
        ok = not torch_change
        why = "a likely cause, yet the plan changes torch to %s" % (plan.target if plan else None)
    elif fix == "torchvision":
        ok = "torchvision" in names
        why = "the plan does not move torchvision (changes: %s)" % ", ".join(sorted(names))
    elif fix == "driver":
        ok = torch_change or bool(plan and any("driver" in b for b in plan.blockers))
        why = "the plan neither picks a torch build for the driver nor names a driver upgrade"
    else:  # new-torch
        ok = torch_change
        why = "the plan does not change torch"
    return ok, ("" if ok else why)


def cases() -> List[Path]:
    return sorted(REPORTS.glob("*.txt"))


def documented_misses() -> Dict[str, str]:
    """file name -> reason, from docs/from-report.md's miss table."""
    out = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| `([^`]+\.txt)` \| (.+?) \|", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_corpus_is_real_and_complete() -> None:
    files = cases()
    assert len(files) >= 40
    for path in files:
        head, text = read_case(path)
        for key in KEYS:
            assert head.get(key), "%s: no %s" % (path.name, key)
        assert head["url"].startswith("https://github.com/"), path.name
        assert head["fix"] in FIX_KINDS, path.name
        assert text.strip(), path.name
    controls = [p for p in files if read_case(p)[0]["cause"] == "none"]
    assert len(controls) >= 3


def test_corpus_accuracy_and_documented_misses() -> None:
    results = {p.name: judge(*read_case(p)) for p in cases()}
    misses = {name: why for name, (ok, why) in results.items() if not ok}
    agree = len(results) - len(misses)
    assert agree / float(len(results)) >= 0.9, "only %d of %d agree: %s" % (agree, len(results), misses)
    # docs/from-report.md lists exactly the cases that miss, each with its reason
    assert set(documented_misses()) == set(misses), misses


@pytest.mark.parametrize("path", cases(), ids=lambda p: p.name)
def test_each_case_runs(path: Path) -> None:
    head, text = read_case(path)
    d = diagnosis.read(text)
    assert d.snapshot.source == "pasted report"
    # every finding from the rules names report lines; every likely one names the line of its error
    for f in d.findings:
        assert any("report line" in e for e in f.evidence) or f.subject.startswith("report line"), (path.name, f)
