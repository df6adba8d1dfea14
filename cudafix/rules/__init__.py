"""The rule registry.  Rule ids are a public contract: never rename one.

Each rule module exposes ``RULES: Tuple[Rule, ...]``; REGISTRY concatenates them in report
order.  Rules are pure functions of the Snapshot.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

from cudafix.model.findings import Finding, Rule, RuleRun
from cudafix.model.snapshot import Snapshot


def _registry() -> Tuple[Rule, ...]:
    from cudafix.rules import _modules

    rules: List[Rule] = []
    for mod in _modules.MODULES:
        rules.extend(mod.RULES)
    ids = [r.id for r in rules]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise RuntimeError("duplicate rule ids: %s" % ", ".join(dupes))
    return tuple(rules)


REGISTRY: Tuple[Rule, ...] = _registry()
BY_ID = {r.id: r for r in REGISTRY}


class UnknownRuleError(ValueError):
    pass


def select(only: Optional[Iterable[str]] = None, skip: Optional[Iterable[str]] = None) -> Tuple[Rule, ...]:
    only_l = [s for s in (only or ()) if s]
    skip_l = [s for s in (skip or ()) if s]
    for rid in only_l + skip_l:
        if rid not in BY_ID:
            raise UnknownRuleError("unknown rule %r (see `cudafix explain --list`)" % rid)
    rules = REGISTRY
    if only_l:
        rules = tuple(r for r in rules if r.id in only_l)
    return tuple(r for r in rules if r.id not in skip_l)


def run(snapshot: Snapshot, rules: Optional[Tuple[Rule, ...]] = None) -> List[RuleRun]:
    runs: List[RuleRun] = []
    for rule in rules if rules is not None else REGISTRY:
        try:
            outcomes = list(rule.check(snapshot))
            runs.append(RuleRun(rule, outcomes))
        except Exception as exc:  # a buggy rule must not take the report down
            runs.append(RuleRun(rule, [], error="%s: %s" % (type(exc).__name__, exc)))
    return runs


def findings(runs: List[RuleRun]) -> List[Finding]:
    order = {"error": 0, "warning": 1, "info": 2}
    out = [f for r in runs for f in r.findings()]
    return sorted(out, key=lambda f: order.get(f.severity, 3))
