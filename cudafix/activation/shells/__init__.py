"""Shell renderers: one module per shell family, each owning its ``quote()``.

Every renderer turns the activation plan and its cache guard (cudafix/activation/plan.py, which
also states the protocol the code implements; docs/activation.md) into code for its shell.

Values are always quoted by the shell's own rules; a plan holds only :data:`MANAGED` names, and
the restore code walks that fixed list (compiled in), using ``_CUDAFIX_VARS`` only to ask whether
a managed name is listed.  No value is ever evaluated as code.
"""

from __future__ import annotations

# The protocol's data lives with the activation plan (cudafix/activation/plan.py): the renderers
# turn it into code.  Re-exported here for the renderer modules.
from cudafix.activation.plan import (  # noqa: E402,F401
    CACHE_FORMAT,
    MANAGED,
    NAME_RE,
    Guard,
    ActivationPlan,
    encode_state,
    managed_words,
    manageable,
    names_of,
    one_line,
)

FAMILIES = ("sh", "fish", "csh")
SHELL_FAMILY = {"sh": "sh", "bash": "sh", "zsh": "sh", "dash": "sh", "ash": "sh", "fish": "fish", "csh": "csh", "tcsh": "csh"}


def renderer(shell: str):
    """The renderer module for a shell name (sh, bash, zsh, dash, ash, fish, csh, tcsh)."""
    fam = SHELL_FAMILY.get(shell)
    if fam == "sh":
        from cudafix.activation.shells import sh as mod
    elif fam == "fish":
        from cudafix.activation.shells import fish as mod
    elif fam == "csh":
        from cudafix.activation.shells import csh as mod
    else:
        raise ValueError("unsupported shell %r (one of: %s)" % (shell, ", ".join(sorted(SHELL_FAMILY))))
    return mod
