"""docs/rules.md is generated from the registry and must be up to date."""

from __future__ import annotations

from cudafix import rules
from tools import rules_doc


def test_rules_md_is_up_to_date():
    with open(rules_doc.default_path(), encoding="utf-8") as fh:
        current = fh.read()
    assert current == rules_doc.render(), "docs/rules.md is stale: run python -m tools.rules_doc"


def test_rules_md_lists_every_rule_with_severity_and_autofix():
    text = rules_doc.render()
    for r in rules.REGISTRY:
        assert "| [`%s`](#%s) | %s | %s |" % (r.id, r.id, r.severity, "yes" if r.auto else "no") in text
        assert "\n## %s\n" % r.id in text


def test_check_mode_detects_a_stale_file(tmp_path):
    out = tmp_path / "rules.md"
    out.write_text("stale\n")
    assert rules_doc.main(["--check", "--output", str(out)]) == 1
    assert rules_doc.main(["--output", str(out)]) == 0
    assert rules_doc.main(["--check", "--output", str(out)]) == 0
