"""The activation plan: which safe fixes `conda activate` applies, its summary line, and what it
depends on -- as data the shell renderers (cudafix/activation/shells) turn into code.

Pipeline (cold path, run by the env's own python from activate.d; cudafix/activation/runtime.py):

  environment (with any previous cudafix activation undone: :func:`restored_env`)
    -> probes.take_snapshot -> rules -> findings
    -> :func:`plan_from_findings`   (safe fixes of scope activation/both, as final values)
    -> :func:`guard_for`            (what the plan depends on, testable by shell builtins)
    -> shell code (cudafix.activation.shells.*) printed, and the same code cached per user and env.

The protocol every renderer implements (docs/activation.md):

- activation exports, per managed variable NAME, ``_CUDAFIX_OLD_NAME`` (``u`` = was unset,
  ``s:<value>`` = was set, possibly empty) and ``_CUDAFIX_NEW_NAME`` (what cudafix set, same
  encoding), and ``_CUDAFIX_VARS`` (the names, space separated);
- restoring (deactivation, and the first step of every activation) puts NAME back to its old
  state only when it still holds what cudafix set; a value the user changed is kept.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sysconfig
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from cudafix.knowledge import env_vars
from cudafix.model.fixes import EnvPatch
from cudafix.plans.environment import EnvironmentPlan, environment_plan, manageable  # noqa: F401  (manageable: the shells use it too)

# -- the protocol's data (shared with every shell renderer) ------------------------------------

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# The only variables activation may set / unset and deactivation may restore: the table's managed
# rows (cudafix/knowledge/env_vars.py).  The restore code has this list compiled in and never takes
# a name from the environment, so a parent environment's _CUDAFIX_VARS cannot make it touch PATH,
# LD_PRELOAD, a read-only variable (UID, EUID) or anything else (docs/security.md).
MANAGED = env_vars.MANAGED

# Format of the cache files: the static activate scripts only accept a cache of this format.
CACHE_FORMAT = "1"

@dataclasses.dataclass(frozen=True)
class ActivationPlan:
    """What activation does: final states (value, or None for unset), in order, and one line."""

    changes: Tuple[Tuple[str, Optional[str]], ...] = ()
    summary: Optional[str] = None

    def __post_init__(self) -> None:
        for name, _value in self.changes:
            if not manageable(name):
                raise ValueError("activation cannot manage variable %r" % name)


@dataclasses.dataclass(frozen=True)
class Guard:
    """When a cached plan is still valid, in terms a shell can test with builtins only.

    ``values``: (name, value or None for unset) as seen before activation.
    ``newer``: paths that existed when the plan was computed; the cache is stale once one of
    them is gone or newer than the cache file (whose mtime is set to before the probes ran).
    ``absent``: paths that did not exist; the cache is stale once one appears.
    """

    values: Tuple[Tuple[str, Optional[str]], ...] = ()
    newer: Tuple[str, ...] = ()
    absent: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, _value in self.values:
            if not NAME_RE.match(name):
                raise ValueError("bad variable name %r" % name)


def encode_state(value: Optional[str]) -> str:
    """The backup encoding: ``u`` for unset, ``s:<value>`` for set (empty included)."""
    return "u" if value is None else "s:" + value


def one_line(text: str) -> str:
    """Make text safe as a single terminal line: control characters become '?'."""
    return "".join("?" if (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0) else c for c in text)


def names_of(changes: Sequence[Tuple[str, Optional[str]]]) -> str:
    return " ".join(n for n, _v in changes)


def managed_words() -> str:
    """The managed names, space separated, as the restore code of every shell lists them."""
    for name in MANAGED:  # compiled into shell code: must be a plain name
        if not NAME_RE.match(name):
            raise ValueError("bad managed variable name %r" % name)
    return " ".join(MANAGED)


# Variables the probes and rules read (the table's ACTIVATION rows, cudafix/knowledge/env_vars.py).
# The cache is keyed on their exact values (unset, empty and set are three different keys); the
# names in a snapshot's ``env`` and the names a plan touches are added to these.
KEY_VARS = env_vars.names(env_vars.ACTIVATION)

# Files and directories whose change may change the plan (mtime of a directory changes when an
# entry is added, removed or renamed: a conda / pip (un)install, a toolkit added, a relinked
# /usr/local/cuda, a driver module reloaded).
SYSTEM_WATCH = ("/usr/local", "/etc/ld.so.cache", "/sys/module/nvidia")

SUMMARY_SEVERITIES = ("error", "warning")
MAX_WATCH = 32


# -- undoing a previous activation (the Python twin of the shells' restore code) ----------------

def restored_env(env: Mapping[str, str]) -> Dict[str, str]:
    """``env`` as it will be once the shell's restore code has run (see cudafix.activation.shells)."""
    out = dict(env)
    names = out.get("_CUDAFIX_VARS")
    if names is None:
        return out
    listed = set(names.split(" "))
    for name in MANAGED:  # only the managed variables, whatever _CUDAFIX_VARS lists
        if name not in listed:
            continue
        old = out.get("_CUDAFIX_OLD_" + name, "")
        new = out.get("_CUDAFIX_NEW_" + name, "")
        cur = encode_state(out.get(name))
        if old and cur == new:
            if old.startswith("s:"):
                out[name] = old[2:]
            else:
                out.pop(name, None)
        out.pop("_CUDAFIX_OLD_" + name, None)
        out.pop("_CUDAFIX_NEW_" + name, None)
    out.pop("_CUDAFIX_VARS", None)
    return out


# -- the plan -----------------------------------------------------------------------------------

def _reason(summary: str) -> str:
    """A safe fix's summary may end with a parenthesised reason: the line shows it."""
    m = re.search(r"(\([^()]*\))\s*\.?\s*$", summary or "")
    return m.group(1) if m else ""


def _describe(op, before: Mapping[str, str]) -> str:
    """One change in words, as the activation line says it (never a diff notation)."""
    if op.op == "set":
        return "set %s to %s" % (op.name, op.value or "''")
    if op.op == "unset":
        return "unset %s" % op.name
    if op.op == "prepend-path":
        return "put %s first in %s" % (op.value, op.name)
    if op.op == "remove-path":
        return "removed %s from %s" % (op.value, op.name)
    return "changed %s" % op.name


def _problem(f) -> str:
    """One open finding, named: its rule, subject and message."""
    return "%s%s: %s" % (f.rule, " [%s]" % f.subject if f.subject and f.subject not in f.message else "", f.message)



def plan_from_findings(findings: Sequence, env: Mapping[str, str]) -> ActivationPlan:
    """:func:`plan_from_environment` of the findings' environment plan."""
    return plan_from_environment(environment_plan(findings), env)


def plan_from_environment(environment: EnvironmentPlan, env: Mapping[str, str]) -> ActivationPlan:
    """Apply, in order, the activation part of the environment plan (cudafix/plans/environment.py).

    The plan holds final values, so the shells never compute list edits themselves.  Ops on
    variables activation cannot manage (PATH, CONDA_*, ...) are left out.  The line counts the
    error/warning findings still open: not corrected, or corrected but with advice commands left
    for the user (arch-ptx-jit: the cache is raised, a native build is still the real fix).
    """
    findings = [sf.finding for sf in environment.fixes]  # one per finding, in the findings' order
    cur: Dict[str, str] = dict(env)
    order: List[str] = []
    parts: List[str] = []
    applied = set()
    named = set()  # findings whose message a change already quotes
    for i, sf in enumerate(environment.fixes):  # the activation part of the one environment plan
        f, ops = sf.finding, sf.activation_ops
        if not ops:
            continue
        before = dict(cur)
        EnvPatch(ops).apply(cur)
        changed = [op for op in ops if before.get(op.name) != cur.get(op.name) or ((op.name in before) != (op.name in cur))]
        if not changed:
            continue
        if not f.fix.commands:  # applied, and nothing left for the user to do
            applied.add(i)
        for op in ops:
            if op.name not in order:
                order.append(op.name)
        desc = ", ".join(_describe(op, before) for op in changed)
        reason = _reason(f.fix.summary)
        if not reason:
            reason = "(%s)" % _problem(f)
            named.add(i)
        parts.append(desc + " " + reason)
    changes = tuple((n, cur.get(n)) for n in order if (n in cur) != (n in env) or cur.get(n) != env.get(n))
    # every error/warning still open, named (errors first), not a bare count
    tail = ["%s%s still open" % (f.rule, " [%s]" % f.subject if f.subject else "") if i in named else _problem(f)
            for sev in SUMMARY_SEVERITIES for i, f in enumerate(findings) if i not in applied and f.severity == sev]
    summary = None
    if changes or tail:
        head = "; ".join([p for p in parts if changes] + tail)
        summary = one_line("cudafix: %s \u2014 cudafix status" % head)
    return ActivationPlan(changes=changes, summary=summary)


# -- what the plan depends on -------------------------------------------------------------------

def _site_dirs() -> List[str]:
    out: List[str] = []
    for key in ("purelib", "platlib"):
        try:
            p = sysconfig.get_paths()[key]
        except Exception:
            continue
        if p not in out:
            out.append(p)
    return out


def watch_paths(snapshot, prefix: Optional[str], env: Mapping[str, str]) -> List[str]:
    paths: List[str] = []
    if prefix:
        paths.append(os.path.join(prefix, "conda-meta"))
    paths.extend(_site_dirs())
    paths.extend(SYSTEM_WATCH)
    paths.extend(d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d.startswith("/"))
    if snapshot is not None:
        try:
            paths.extend(t.path for t in snapshot.toolkits.toolkits if t.path)
            if snapshot.driver.libcuda_path:
                paths.append(snapshot.driver.libcuda_path)
        except AttributeError:
            pass
    seen: List[str] = []
    for p in paths:
        if p and p.startswith("/") and p not in seen:
            seen.append(p)
    return seen[:MAX_WATCH]


def guard_for(env: Mapping[str, str], plan: ActivationPlan, snapshot=None, prefix: Optional[str] = None) -> Guard:
    names: List[str] = list(KEY_VARS)
    extra: Iterable[str] = ()
    if snapshot is not None:
        extra = list(getattr(snapshot, "env", {}) or {})
    for n in list(extra) + [n for n, _v in plan.changes]:
        if NAME_RE.match(n) and n not in names:
            names.append(n)
    values = tuple((n, env.get(n)) for n in names)
    newer: List[str] = []
    absent: List[str] = []
    for p in watch_paths(snapshot, prefix, env):
        (newer if os.path.lexists(p) else absent).append(p)
    return Guard(values=values, newer=tuple(newer), absent=tuple(absent))


# -- the cache file -----------------------------------------------------------------------------
