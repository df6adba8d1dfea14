"""`cudafix status` and `cudafix check` without click: the common forms of the two commands.

Importing click and building its commands is a fifth of a warm `status` (docs/benchmarks.md, issue 23).
This parses exactly what the click commands of cudafix/cli/report.py accept in their plain
spelling -- ``--json``, ``-v``/``--verbose`` (status), ``--strict`` (check), and ``--from``,
``--example``, ``--python``, ``--assume-driver``, ``--assume-gpu``, ``--only``, ``--skip`` each
followed by its value as the next argument -- and runs the same code the click commands run
(cudafix/cli/analysis.py ``run_status`` / ``run_check``), so output and exit status are the
same by construction (tests/test_cli_fast.py compares the two on every form).

Anything else returns None and goes to click, which then prints what it prints: help, a usage
error, ``--opt=value``, a value that starts with "-" (click takes it, or names it an error),
``--``, an unknown option or an extra argument, shell completion, Windows (click expands
wildcards in arguments there).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Mapping, Optional, Sequence

from cudafix.cli.commands import with_default_command

COMMANDS = ("status", "check")
# option -> (the key click gives the command, repeatable?)
VALUE_OPTIONS = {
    "--from": ("from_file", False),
    "--from-report": ("from_report", False),
    "--example": ("example", False),
    "--python": ("python", False),
    "--assume-driver": ("assume_driver", False),
    "--assume-gpu": ("assume_gpu", True),
    "--only": ("only", True),
    "--skip": ("skip", True),
}
FLAGS = {
    "status": {"--json": "as_json", "-v": "verbose", "--verbose": "verbose"},
    "check": {"--json": "as_json", "--strict": "strict"},
}


def parse(argv: Sequence[str]) -> Optional[Dict[str, Any]]:
    """``{"command": ..., flags..., "opts": {...}}`` as click would give it, or None where click must decide."""
    args = with_default_command(argv)
    command = args[0]
    if command not in COMMANDS:
        return None
    flags = FLAGS[command]
    got: Dict[str, Any] = {name: False for name in flags.values()}
    opts: Dict[str, Any] = {}
    for key, multiple in VALUE_OPTIONS.values():
        opts[key] = () if multiple else None
    rest = args[1:]
    i = 0
    while i < len(rest):
        a = rest[i]
        if a in flags:
            got[flags[a]] = True
            i += 1
            continue
        spec = VALUE_OPTIONS.get(a)
        if spec is None or i + 1 >= len(rest):
            return None  # not ours (or a missing value): click's message
        value = rest[i + 1]
        if value.startswith("-") and value != "-":
            return None
        key, multiple = spec
        opts[key] = opts[key] + (value,) if multiple else value  # a repeated single option: the last wins, as in click
        i += 2
    got["command"] = command
    got["opts"] = opts
    return got


def _click_decides(env: Mapping[str, str]) -> bool:
    # click's shell completion answers when _<PROG>_COMPLETE is set (click/shell_completion.py)
    return os.name == "nt" or any(k.startswith("_") and k.endswith("_COMPLETE") for k in env)


def fast_main(argv: Sequence[str]) -> Optional[int]:
    """Run `status` / `check` for ``argv`` and return the exit status, or None: then click runs."""
    if _click_decides(os.environ):
        return None
    parsed = parse(argv)
    if parsed is None:
        return None
    from cudafix.cli.deferred import defer_inspect, restore

    stand_in = defer_inspect()  # dataclasses' imports that `status` never uses (Python 3.8-3.11)
    try:
        return _run(parsed)
    finally:
        restore(stand_in)


def _run(parsed: Dict[str, Any]) -> int:
    from cudafix.cli import analysis

    def body() -> None:
        if parsed["command"] == "status":
            analysis.run_status(parsed["as_json"], parsed["verbose"], parsed["opts"])
        else:
            analysis.run_check(parsed["strict"], parsed["as_json"], parsed["opts"])

    try:
        analysis.guarded(body)()  # `check` ends in sys.exit(code): SystemExit passes, as through click
    except KeyboardInterrupt:
        import sys

        # what click's standalone mode prints for it (click/core.py BaseCommand.main)
        sys.stderr.write("\nAborted!\n")
        return 1
    return 0
