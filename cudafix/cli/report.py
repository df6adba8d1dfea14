"""`cudafix status` (the default), `check`, `snapshot`, `explain`: commands of the report area.

Thin: this module parses the options with click; cudafix/cli/analysis.py turns them into a
Snapshot and rule runs (probes / --from / --example, then --assume-*, then the selected rules)
and hands them to cudafix.render.report for rendering.  `status` and `check` in their common
forms skip click and this module (cudafix/cli/fast.py).

Bad input (an unreadable or corrupt --from file, an unknown rule id, a bad --assume value, a
--python that is not an interpreter) is one line on stderr and exit status 2, before anything
is probed or written.  So is any failure of cudafix itself: `cudafix check` must never exit 1
("errors found") because cudafix crashed.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

import click

from cudafix.render import report

from cudafix.cli import analysis
from cudafix.cli.analysis import (  # noqa: F401  (the report area's helpers, used by cli/fix.py and tests)
    EXAMPLES_DIR,
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    BadInput,
    analyse,
    emit,
    example_names,
    fail,
    load_snapshot,
    select_rules,
    use_color,
)

_CLICK_EXITS = (click.exceptions.Exit, click.ClickException, click.Abort)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input and crashes of cudafix itself: one line on stderr, exit 2 (click's exits pass)."""
    return analysis.guarded(func, _CLICK_EXITS)


# -- options shared by the analysing commands ------------------------------------------


def source_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Where the snapshot comes from, and what-if overrides."""
    opts = [
        click.option("--from", "from_file", metavar="FILE",
                     help="Analyse a recorded snapshot (from `cudafix snapshot`; - reads stdin) instead of this machine."),
        click.option("--from-report", "from_report", metavar="FILE",
                     help="Diagnose text pasted from another machine (collect_env, nvidia-smi, pip/conda list, errors; - reads stdin)."),
        click.option("--example", "example", metavar="NAME",
                     help="Analyse a snapshot bundled with cudafix, recorded on a real machine (see --example list)."),
        click.option("--python", "python", metavar="PATH",
                     help="Inspect the environment of another Python interpreter."),
        click.option("--assume-driver", "assume_driver", metavar="VERSION",
                     help="What if the driver were VERSION (e.g. 580.95.05)? Also $CUDAFIX_ASSUME_DRIVER."),
        click.option("--assume-gpu", "assume_gpu", metavar="NAME|sm_XY", multiple=True,
                     help="What if this GPU were present (repeatable)? Also $CUDAFIX_ASSUME_GPU."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def rule_options(func: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.option("--only", "only", metavar="RULE,...", multiple=True, help="Run only these rules."),
        click.option("--skip", "skip", metavar="RULE,...", multiple=True, help="Do not run these rules."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


# -- commands ----------------------------------------------------------------------------


@click.command("status")
@source_options
@rule_options
@click.option("--json", "as_json", is_flag=True, help="Print {schema: cudafix.status/1, snapshot, findings} as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="List every library resolution, not only the odd ones.")
@guarded
def status(as_json: bool, verbose: bool, **opts: Any) -> None:
    """The whole CUDA stack on one screen, with findings and exact fixes (the default command)."""
    analysis.run_status(as_json, verbose, opts)


@click.command("check")
@source_options
@rule_options
@click.option("--strict", is_flag=True, help="Exit 1 on warnings and unknowns too.")
@click.option("--json", "as_json", is_flag=True, help="Print the cudafix.status/1 JSON document.")
@guarded
def check(strict: bool, as_json: bool, **opts: Any) -> None:
    """Print the findings; exit 0 (no errors), 1 (errors; warnings and unknowns too with --strict), 2 (could not run)."""
    analysis.run_check(strict, as_json, opts)


def write_atomic(path: str, text: str) -> None:
    """Write via a temporary file in the same directory and rename: never a half-written file.
    The file gets the permissions a plain write would (0666 less the umask)."""
    from cudafix.store.fsutil import atomic_write

    umask = os.umask(0)
    os.umask(umask)
    atomic_write(path, text.encode("utf-8"), mode=0o666 & ~umask, fsync=True)


@click.command("snapshot")
@source_options
@click.option("-o", "--output", metavar="FILE", help="Write to FILE (atomically) instead of stdout.")
@guarded
def snapshot(output: Optional[str], **opts: Any) -> None:
    """Write the Snapshot (schema cudafix.snapshot/1) as JSON, for --from and bug reports."""
    if output:
        parent = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(parent):
            raise BadInput("-o %s: directory %s does not exist" % (output, parent))
        if os.path.isdir(output):
            raise BadInput("-o %s: is a directory" % output)
    snap, _origin, _runs = analyse(opts, run_rules=False)
    text = snap.to_json() + "\n"
    if output:
        try:
            write_atomic(output, text)
        except OSError as exc:
            raise BadInput("-o %s: %s" % (output, exc.strerror or exc)) from None
    else:
        emit(text)


@click.command("explain")
@click.argument("rule", required=False)
@click.option("--list", "list_", is_flag=True, help="List every rule id with its severity and title.")
@click.option("--from-report", "from_report", metavar="FILE",
              help="Explain the rules a pasted report's findings and error texts point at (- reads stdin).")
@guarded
def explain(rule: Optional[str], list_: bool, from_report: Optional[str] = None) -> None:
    """Explain RULE: cause, how it shows up, evidence used, fix, sources."""
    from cudafix import rules
    from cudafix.fleet.checks import FLEET_RULES

    if from_report:
        if rule or list_:
            raise BadInput("explain --from-report takes no RULE and no --list")
        from cudafix.cli import pasted

        pasted.run_explain(from_report)
        return

    if list_ or not rule:
        emit(report.render_rule_list(tuple(rules.REGISTRY) + FLEET_RULES, color=use_color()))
        return
    found = rules.BY_ID.get(rule) or {r.id: r for r in FLEET_RULES}.get(rule)
    if found is None:
        raise BadInput("unknown rule %r (see `cudafix explain --list`)" % rule)
    emit(report.render_explain(found, color=use_color()))


COMMANDS: list = [status, check, snapshot, explain]
