"""Every severity of the NCCL rules states what was measured or cited (issue 21), and docs/rules.md
(generated from the rule records) says so per rule."""

from __future__ import annotations

import pathlib
import re

from cudafix.fleet.checks import FLEET_RULES
from cudafix.rules import REGISTRY

DOC = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "rules.md").read_text()


def test_every_nccl_rule_states_its_severitys_basis():
    nccl = [r for r in tuple(REGISTRY) + tuple(FLEET_RULES) if "nccl" in r.id]
    assert {r.id for r in nccl} >= {"nccl-shadowed", "nccl-interface-missing", "nccl-slow-path", "nccl-debug-verbose", "fleet-nccl-mismatch"}
    for r in nccl:
        basis = r.severity_basis
        assert basis and r.severity in basis, r.id  # names the severity it justifies
        assert re.search(r"\b(measured|cited)\b", basis), r.id
        section = DOC.split("## %s\n" % r.id, 1)[1].split("\n## ", 1)[0]
        assert "**Why this severity.** " + basis in section, r.id
