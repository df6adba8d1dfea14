"""Fixes as data.  Rendering (shells, in-process hook, report) lives elsewhere.

A fix is either *safe* (``auto=True``: cudafix applies it on activation / at interpreter
start) or *advice* (an exact command the user runs).  Safe fixes are expressed as an
:class:`EnvPatch` (environment edits) and/or :class:`Preload` entries (libraries loaded by
absolute path just before torch, so a loaded soname satisfies later lookups).
"""

from __future__ import annotations

import dataclasses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

from cudafix.model.record import record

# EnvOp.op values
SET = "set"  # name = value
UNSET = "unset"  # remove the variable
PREPEND_PATH = "prepend-path"  # put value first in a ':'-list (removing other occurrences)
REMOVE_PATH = "remove-path"  # drop value from a ':'-list (the variable is unset if it becomes empty)


@record(frozen=True)
class EnvOp:
    """One edit of one environment variable (set, unset, prepend to or remove from a path list)."""

    op: str
    name: str
    value: Optional[str] = None

    def apply(self, env: Dict[str, str]) -> None:
        """Apply to a mapping in place (os.environ or a dict)."""
        if self.op == SET:
            env[self.name] = self.value or ""
        elif self.op == UNSET:
            env.pop(self.name, None)
        elif self.op == PREPEND_PATH:
            parts = [p for p in env.get(self.name, "").split(":") if p and p != self.value]
            env[self.name] = ":".join([self.value or ""] + parts)
        elif self.op == REMOVE_PATH:
            if self.name in env:
                old = env[self.name].split(":")
                parts = [p for p in old if p != self.value]
                if parts != old:
                    if any(parts):
                        env[self.name] = ":".join(parts)
                    else:
                        del env[self.name]
        else:
            raise ValueError("unknown EnvOp %r" % self.op)


@record(frozen=True)
class EnvPatch:
    """An ordered list of EnvOps, applied as a unit."""

    ops: tuple = ()  # tuple of EnvOp

    def apply(self, env: Dict[str, str]) -> None:
        for op in self.ops:
            op.apply(env)

    def names(self) -> List[str]:
        seen: List[str] = []
        for op in self.ops:
            if op.name not in seen:
                seen.append(op.name)
        return seen

    def __bool__(self) -> bool:
        return bool(self.ops)

    def merged(self, other: "EnvPatch") -> "EnvPatch":
        return EnvPatch(tuple(self.ops) + tuple(other.ops))


@record(frozen=True)
class Preload:
    """Load ``path`` (absolute) before torch so that ``soname`` resolves to it."""

    soname: str
    path: str


@record(frozen=True)
class Fix:
    """What to do about a finding: a safe correction (auto) and/or exact commands for the user."""

    summary: str  # one line: what to do / what cudafix does
    auto: bool = False  # True: a safe correction cudafix applies itself
    env: EnvPatch = EnvPatch()
    preload: tuple = ()  # tuple of Preload
    commands: tuple = ()  # exact commands for the user (advice), in order
    # where a safe fix applies (not a Rule's scope, which says when the problem matters):
    applies_in: str = "both"  # "activation" | "process" | "both"

    def to_dict(self) -> Dict[str, Any]:
        return {
            "summary": self.summary,
            "auto": self.auto,
            "applies_in": self.applies_in,
            "env": [dataclasses.asdict(op) for op in self.env.ops],
            "preload": [dataclasses.asdict(p) for p in self.preload],
            "commands": list(self.commands),
        }

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Fix":
        return cls(
            summary=d.get("summary", ""),
            auto=bool(d.get("auto", False)),
            applies_in=d.get("applies_in", "both"),
            env=EnvPatch(tuple(EnvOp(**op) for op in d.get("env", []))),
            preload=tuple(Preload(**p) for p in d.get("preload", [])),
            commands=tuple(d.get("commands", [])),
        )
