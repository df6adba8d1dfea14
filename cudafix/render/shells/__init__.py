"""Shell renderers: one module per shell family, each owning its ``quote()``.

Every renderer turns the same data into code for its shell:

- :class:`Plan` — the final value (or ``None``: unset) of each variable activation changes,
  and the one summary line (or ``None``);
- a cache guard — the variable values and file stamps the plan was computed from.

and renders the same protocol (docs/activation.md):

- activation exports, per managed variable NAME, ``_CUDAFIX_OLD_NAME`` (``u`` = was unset,
  ``s:<value>`` = was set, possibly empty) and ``_CUDAFIX_NEW_NAME`` (what cudafix set, same
  encoding), and ``_CUDAFIX_VARS`` (the names, space separated);
- restoring (deactivation, and the first step of every activation) puts NAME back to its old
  state only when it still holds what cudafix set; a value the user changed is kept.

Values are always quoted by the shell's own rules; a plan holds only :data:`MANAGED` names, and
the restore code walks that fixed list (compiled in), using ``_CUDAFIX_VARS`` only to ask whether
a managed name is listed.  No value is ever evaluated as code.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional, Sequence, Tuple

from cudafix.knowledge import env_vars

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# The only variables activation may set / unset and deactivation may restore: the table's managed
# rows (cudafix/knowledge/env_vars.py).  The restore code has this list compiled in and never takes
# a name from the environment, so a parent environment's _CUDAFIX_VARS cannot make it touch PATH,
# LD_PRELOAD, a read-only variable (UID, EUID) or anything else (docs/security-activation.md).
MANAGED = env_vars.MANAGED

# Format of the cache files: the static activate scripts only accept a cache of this format.
CACHE_FORMAT = "1"

FAMILIES = ("sh", "fish", "csh")
SHELL_FAMILY = {"sh": "sh", "bash": "sh", "zsh": "sh", "dash": "sh", "ash": "sh", "fish": "fish", "csh": "csh", "tcsh": "csh"}


def manageable(name: str) -> bool:
    """Whether activation may set / unset / back up this variable."""
    return name in MANAGED


@dataclasses.dataclass(frozen=True)
class Plan:
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


def renderer(shell: str):
    """The renderer module for a shell name (sh, bash, zsh, dash, ash, fish, csh, tcsh)."""
    fam = SHELL_FAMILY.get(shell)
    if fam == "sh":
        from cudafix.render.shells import sh as mod
    elif fam == "fish":
        from cudafix.render.shells import fish as mod
    elif fam == "csh":
        from cudafix.render.shells import csh as mod
    else:
        raise ValueError("unsupported shell %r (one of: %s)" % (shell, ", ".join(sorted(SHELL_FAMILY))))
    return mod


def names_of(changes: Sequence[Tuple[str, Optional[str]]]) -> str:
    return " ".join(n for n, _v in changes)


def managed_words() -> str:
    """The managed names, space separated, as the restore code of every shell lists them."""
    for name in MANAGED:  # compiled into shell code: must be a plain name
        if not NAME_RE.match(name):
            raise ValueError("bad managed variable name %r" % name)
    return " ".join(MANAGED)
