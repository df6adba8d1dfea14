"""Developer tools (not used at run time): local conda channel builder (channel), docs/rules.md generator (rules_doc)."""
