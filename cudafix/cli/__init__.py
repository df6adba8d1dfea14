"""The `cudafix` command line (click, thin: logic lives in the modules it calls).

Commands are defined per area so that each area owns its file:
  cudafix/cli/report.py  status (default), check, snapshot, explain
  cudafix/cli/shell.py   shell, hooks
  cudafix/cli/verify.py  verify
  cudafix/cli/fix.py     fix
  cudafix/cli/warm.py    warm
  cudafix/cli/fleet.py   fleet
  cudafix/cli/cache.py   cache clear

A command's module is imported only when that command is looked up (``cudafix status`` never
imports the shell or verify areas); the table below names every command without importing
anything, so ``cudafix --help`` still lists them all.  tests/test_perf_caches.py checks that
the table and the modules' ``COMMANDS`` lists agree.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Optional

# The command table and the default command live in cudafix/cli/commands.py (group.py and
# fast.py read them there: no module of the package imports the package back).
from cudafix.cli.commands import COMMAND_MODULES, with_default_command  # noqa: E402,F401


def __getattr__(name: str) -> Any:
    """``cudafix.cli.main`` (and the group's helpers) from cudafix/cli/group.py, imported on first use."""
    if name in ("main", "_DefaultGroup", "_LazyCommands"):
        from cudafix.cli import group

        return getattr(group, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _leave(rc: int) -> None:
    """End the process now, as ``sys.exit(rc)`` would for the user -- the atexit handlers run
    (the probes' children are waited for there: cudafix.forks.reap_all), stdout and
    stderr are flushed -- but without the interpreter's teardown of every module and object still
    alive: nothing of that is the user's (its cost: docs/benchmarks.md, "Figures behind the code")."""
    import atexit
    import sys

    atexit._run_exitfuncs()  # what the interpreter's exit runs first (CPython 3.8-3.13 alike)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a reader that left (`cudafix status | head`): nothing more to say
            pass
    import os

    os._exit(rc)


def run(argv: Optional[List[str]] = None) -> None:
    """The `cudafix` console script: `status` / `check` without click where their arguments allow
    (cudafix/cli/fast.py), everything else through the click group."""
    import sys

    from cudafix.cli.fast import fast_main

    try:
        rc = fast_main(sys.argv[1:] if argv is None else argv)
    except SystemExit as done:  # `check` ends in sys.exit(its exit status)
        if not isinstance(done.code, (int, type(None))):
            raise
        rc = done.code or 0
    if rc is not None:
        _leave(rc)
    from cudafix.cli.group import main

    main(args=argv)
