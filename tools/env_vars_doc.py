"""Generate docs/env-vars.md from the variable table (cudafix/knowledge/env_vars.py).

    python -m tools.env_vars_doc            # rewrite docs/env-vars.md
    python -m tools.env_vars_doc --check    # exit 1 if docs/env-vars.md is out of date

tests/test_env_vars.py fails when the committed file differs from what this prints.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence

from cudafix.knowledge import env_vars, knobs
from tools import docfile
from tools.docfile import repo_path

HEADER = """# Environment variables cudafix reads

Generated from `cudafix/knowledge/env_vars.py` by `python -m tools.env_vars_doc`; do not
edit by hand.

Readers:

- **probe**: recorded in the snapshot (`cudafix snapshot`, the `env` field); any other variable
  starting with %s is recorded too.
- **hook**: part of the startup hook's fingerprint: a change makes the hook recompute at the next
  `import torch` (docs/hook.md).
- **activation**: part of the activation cache's key: a change makes the next `conda activate`
  recompute (docs/activation.md).

**Managed** variables are the only ones an activation may set or unset and a deactivation may
restore; their names are compiled into the activate.d / deactivate.d scripts
(docs/security.md).
"""


KNOBS_HEADER = """## cudafix's own settings

From `cudafix/knowledge/knobs.py`.  One rule for every on/off setting, wherever it is read (the
startup hook, the import-torch check, the activate.d scripts of every shell): **off** when unset
or one of %s in any letter case (no blanks trimmed); any other value (`1`, `yes`, `true`, `on`)
is **on**.  A choice's default is in bold.
"""


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    lines: List[str] = [HEADER % ", ".join("`%s`" % p for p in env_vars.PROBE_PREFIXES)]
    lines.append("| variable | read by | managed | why | source |")
    lines.append("| --- | --- | --- | --- | --- |")
    for v in env_vars.TABLE:
        lines.append("| `%s` | %s | %s | %s | %s |" % (
            v.name, ", ".join(v.readers), "yes" if v.managed else "", _md(v.why), _md(v.source)))
    lines.append("")
    lines.append(KNOBS_HEADER % ", ".join("`%s`" % (w or "empty") for w in knobs.FALSE_WORDS))
    lines.append("| setting | kind | values | read by | what it does |")
    lines.append("| --- | --- | --- | --- | --- |")
    for k in knobs.KNOBS:
        if k.kind == knobs.FLAG:
            values = "on / off"
        elif k.values:
            values = " \\| ".join(("**%s**" if v == k.default else "%s") % v for v in k.values)
        else:
            values = k.kind
        lines.append("| `%s` | %s | %s | %s | %s |" % (k.name, k.kind, values, _md(k.read_by), _md(k.meaning)))
    return "\n".join(lines) + "\n"


def default_path() -> str:
    return repo_path("docs", "env-vars.md")


def main(argv: Optional[Sequence[str]] = None) -> int:
    return docfile.main("tools.env_vars_doc", __doc__, render, default_path(), argv)


if __name__ == "__main__":
    sys.exit(main())
