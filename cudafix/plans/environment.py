"""The environment plan: the safe corrections of an env's findings, decided once.

A finding's fix is *safe* when its rule lets cudafix apply it (``Fix.auto``); where it applies is
``Fix.applies_in``.  This module turns the findings into one :class:`EnvironmentPlan`, and each
automatic path takes its part of it, in the findings' order:

- ``conda activate`` (cudafix/activation/plan.py): the environment ops on variables activation
  manages (knowledge/env_vars.py ``managed``), of fixes that apply in activation;
- ``import torch`` (cudafix/hook/plan.py): the environment ops of fixes that apply in the process,
  never on the loader's variables (read once, at exec: knowledge/env_vars.py ``LOADER_VARS``), and
  the preloads of every safe fix (a preload only ever acts in the process);
- `cudafix warm`'s child: the process part, applied to the environment it runs in (cli/warm.py).

What a path does with its part (the shell code, the cache entry, the words) stays that path's.
"""

from __future__ import annotations

from typing import Iterable, Tuple

from cudafix.knowledge import env_vars
from cudafix.model.findings import Finding
from cudafix.model.fixes import PREPEND_PATH, REMOVE_PATH, SET, UNSET, EnvOp, Preload
from cudafix.model.record import record

ACTIVATION = "activation"
PROCESS = "process"
BOTH = "both"
_ENV_OPS = (SET, UNSET, PREPEND_PATH, REMOVE_PATH)


def manageable(name: str) -> bool:
    """Whether activation may set / unset / back up this variable."""
    return name in env_vars.MANAGED


@record(frozen=True)
class SafeFix:
    """One finding's safe correction, split by where it applies."""

    finding: Finding
    activation_ops: Tuple[EnvOp, ...] = ()  # applied by conda activate
    process_ops: Tuple[EnvOp, ...] = ()  # applied at import torch
    preloads: Tuple[Preload, ...] = ()  # loaded by absolute path at import torch


@record(frozen=True)
class EnvironmentPlan:
    """The safe corrections of all findings, in the findings' order."""

    fixes: Tuple[SafeFix, ...] = ()

    def for_activation(self) -> Tuple[SafeFix, ...]:
        return tuple(s for s in self.fixes if s.activation_ops)

    def for_process(self) -> Tuple[SafeFix, ...]:
        return tuple(s for s in self.fixes if s.process_ops or s.preloads)


def safe_fix(f: Finding) -> SafeFix:
    fix = f.fix
    if not (fix and fix.auto):
        return SafeFix(f)
    ops = fix.env.ops
    act = tuple(op for op in ops if manageable(op.name)) if fix.applies_in in (ACTIVATION, BOTH) else ()
    proc = tuple(op for op in ops if op.op in _ENV_OPS and op.name and op.name not in env_vars.LOADER_VARS) \
        if fix.applies_in in (PROCESS, BOTH) else ()
    return SafeFix(f, act, proc, tuple(fix.preload))


def environment_plan(findings: Iterable[Finding]) -> EnvironmentPlan:
    return EnvironmentPlan(tuple(safe_fix(f) for f in findings))
