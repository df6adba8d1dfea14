"""Generated files: write them, or check that the committed copy is what the generator prints.

One helper for every generator in tools (docs/rules.md, docs/env-vars.md,
docs/accuracy.md, knowledge/gpu_names.py); each test of "the file is current" runs ``--check``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def repo_path(*parts: str) -> str:
    return os.path.join(REPO, *parts)


def write_or_check(path: str, text: str, check: bool, regenerate: str) -> int:
    """``check``: 0 when ``path`` holds exactly ``text``, else 1 with one line naming
    ``regenerate`` (the command that rewrites it).  Otherwise write ``text`` and return 0."""
    if check:
        try:
            with open(path, encoding="utf-8") as fh:
                current = fh.read()
        except OSError:
            current = None
        if current != text:
            print("%s is out of date: run %s" % (path, regenerate), file=sys.stderr)
            return 1
        return 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return 0


def main(module: str, doc: str, render: Callable[[], str], default_output: str,
         argv: Optional[Sequence[str]] = None) -> int:
    """The command line of a generator that takes no input: ``python -m tools.X [--check] [--output F]``."""
    prog = "python -m " + module
    ap = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    ap.add_argument("--output", default=default_output)
    args = ap.parse_args(argv)
    return write_or_check(args.output, render(), args.check, prog)
