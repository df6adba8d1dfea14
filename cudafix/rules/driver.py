"""Driver rules (placeholder; the rule-catalogue work fills this in)."""

RULES: tuple = ()
