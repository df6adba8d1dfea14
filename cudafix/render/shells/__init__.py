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

# The protocol's data lives with the activation plan (cudafix/plans/activation.py): the renderers
# turn it into code.  Re-exported here for the renderer modules.
from cudafix.plans.activation import (  # noqa: E402,F401
    CACHE_FORMAT,
    MANAGED,
    NAME_RE,
    Guard,
    Plan,
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
        from cudafix.render.shells import sh as mod
    elif fam == "fish":
        from cudafix.render.shells import fish as mod
    elif fam == "csh":
        from cudafix.render.shells import csh as mod
    else:
        raise ValueError("unsupported shell %r (one of: %s)" % (shell, ", ".join(sorted(SHELL_FAMILY))))
    return mod
