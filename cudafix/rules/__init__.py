"""The rule registry.  Rule ids are a public contract: never rename one.

Each rule module exposes ``RULES: Tuple[Rule, ...]``; REGISTRY concatenates them in report
order.  Rules are pure functions of the Snapshot.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List, Optional, Tuple

from cudafix.model.findings import UNKNOWN, Finding, Outcome, Rule, RuleRun
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


# Facts a what-if (--assume-driver / --assume-gpu) replaces: a failed probe of them no longer matters.
_ASSUMED_BY = {"driver": "driver", "gpus": "gpus"}


def missing_facts(rule: Rule, snapshot: Snapshot) -> List[str]:
    """Why ``rule`` cannot be judged on ``snapshot``: one reason per needed probe that failed."""
    out: List[str] = []
    for need in rule.needs:
        if _ASSUMED_BY.get(need) in snapshot.assumed:
            continue
        err = snapshot.probe_errors.get(need)
        if err:
            out.append("the %s probe failed: %s" % (need, err))
    return out


def run_one(rule: Rule, snapshot: Snapshot) -> RuleRun:
    """One rule on one snapshot; never ``ok`` by default (a failed needed probe or no outcome is unknown)."""
    missing = missing_facts(rule, snapshot)
    if missing:
        return RuleRun(rule, [Outcome(UNKNOWN, "not judged: %s" % "; ".join(missing))])
    try:
        outcomes = list(rule.check(snapshot))
    except Exception as exc:  # a buggy rule must not take the report down
        return RuleRun(rule, [], error="%s: %s" % (type(exc).__name__, exc))
    if not outcomes:
        outcomes = [Outcome(UNKNOWN, "the rule reached no verdict on this snapshot")]
    return RuleRun(rule, outcomes)


def run(snapshot: Snapshot, rules: Optional[Tuple[Rule, ...]] = None) -> List[RuleRun]:
    return [run_one(rule, snapshot) for rule in (rules if rules is not None else REGISTRY)]


def findings(runs: List[RuleRun]) -> List[Finding]:
    order = {"error": 0, "warning": 1, "info": 2}
    out = [f for r in runs for f in r.findings()]
    return sorted(out, key=lambda f: order.get(f.severity, 3))
