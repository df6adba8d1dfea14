"""`cudafix fix`: print the env's one plan; `--apply` runs it, then re-checks.

The plan comes from cudafix.plans.planner (every finding in, one coherent set of changes out).
`--apply` runs only what the env's own package manager can do (the env's `python -m pip`, or
`conda install -p <prefix>`), after a confirmation (`--yes` for scripts), streaming the
installer's own output; then it takes a fresh snapshot and prints the findings before and after.
It refuses, with one line and nothing changed, what it must not do: a driver upgrade or anything
needing root, a recorded (--from/--example) or what-if (--assume-*) snapshot.  A failing step
stops the run: pip rolls back the install it was doing, later steps do not run.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any, List, Optional, Sequence

import click

from cudafix.cli.report import EXIT_OK, analyse, emit, guarded, load_snapshot, source_options
from cudafix.model.findings import ERROR, WARNING, RuleRun
from cudafix.store import runner
from cudafix.store.safefs import env_owners

FIX_STEP_TIMEOUT_S = 6 * 3600.0  # one installer step (a large conda solve and download); then its group is killed

EXIT_FAILED = 1  # a step failed, the user declined, or the re-check still finds a torch error or warning
EXIT_REFUSED = 3  # the plan needs what `fix --apply` does not do (driver, root, a what-if snapshot)


def _serious(runs: Sequence[RuleRun]) -> List[str]:
    return ["%s %s: %s" % (f.severity, f.rule, f.message) for r in runs for f in r.findings() if f.severity in (ERROR, WARNING)]


def _refusal(plan: Any, snap: Any, opts: dict) -> Optional[str]:
    if opts.get("from_file") or opts.get("example"):
        return "a recorded snapshot describes another machine: nothing here to apply it to (run without --from/--example)"
    if snap.assumed:
        return "a what-if plan (--assume-* / CUDAFIX_ASSUME_*) is for another machine: cudafix fix --apply only changes this one"
    if plan.blockers:
        return "the plan needs %s; cudafix does not upgrade drivers (it needs root): do that first, then run cudafix fix again" % plan.blockers[0]
    root = [s for s in plan.steps if s.root]
    if root:
        return "the plan needs root (%s): cudafix fix --apply never runs sudo" % root[0].text
    return None


def _left_to_you(plan: Any) -> List[Any]:
    """(step number, text) of each printed command step --apply does not run (no argv; shell
    lines are for the user's shell by nature and are printed as such)."""
    from cudafix.plans.planner import SHELL

    return [(n, s.text) for n, s in enumerate(plan.steps, 1) if not s.argv and s.kind != SHELL]


def _answer(snap: Any, runs: Sequence[RuleRun], plan: Any) -> List[str]:
    """Where the plan has nothing to do, why: "healthy" only where it was earned (a torch to
    check, every rule decided), as the verdict of `status` (cudafix/render/verdict.py) says it."""
    if not plan.nothing_to_do:
        return []
    from cudafix.render.findings import unknowns
    from cudafix.render.verdict import no_torch

    if no_torch(snap):
        return ["  nothing to fix: no torch installed for %s (cudafix fixes the CUDA stack under PyTorch)" % (
            snap.python.executable or "this env")]
    undecided = unknowns(runs)
    if undecided:
        return ["  no problem to fix among the checks that could decide; %d could not (cudafix check)" % len(undecided)]
    return ["  healthy"]


def _argv(step: Any) -> List[str]:
    argv = list(step.argv)
    if argv and argv[0] == "conda":
        argv[0] = os.environ.get("CONDA_EXE") or shutil.which("conda") or "conda"
        argv.insert(2, "-y")  # confirmed already (prompted by cudafix, or --yes)
    return argv


@click.command("fix")
@source_options
@click.option("--apply", "apply_", is_flag=True, help="Run the plan's commands in the env, then re-check.")
@click.option("-y", "--yes", is_flag=True, help="With --apply: do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (schema cudafix.plan/1).")
@guarded
def fix(apply_: bool, yes: bool, as_json: bool, **opts: Any) -> None:
    """Print the one plan that fixes this env's findings; --apply runs it and re-checks."""
    if opts.get("from_report"):
        from cudafix.cli import pasted

        pasted.run_fix(apply_, as_json, opts)
        sys.exit(EXIT_OK)
    from cudafix.plans.planner import make_plan
    from cudafix.render.plan import plan_lines
    from cudafix.render.text import fit_lines, printable

    snap, origin, runs = analyse(dict(opts, only=(), skip=()))
    plan = make_plan(snap, runs)
    if as_json:
        emit(json.dumps({"schema": "cudafix.plan/1", "plan": plan.to_dict()}, indent=2) + "\n")
    else:
        head = "cudafix fix: %s (%s)" % (snap.python.executable or "?", origin)
        if snap.assumed:
            head += " — what-if: " + ", ".join(sorted(snap.assumed))
        # every snapshot string written out (render/text.py printable): a recorded snapshot's path
        # or version cannot move the cursor or forge a line of the plan
        emit("\n".join(fit_lines([printable(ln) for ln in [head] + _answer(snap, runs, plan) + plan_lines(plan)])) + "\n")
    if not apply_:
        sys.exit(EXIT_OK)
    if plan.nothing_to_do:  # before any refusal: nothing to run is done, whatever the snapshot
        emit("nothing to run\n", err=as_json)  # --json: stdout holds the one JSON document
        sys.exit(EXIT_OK)
    why = _refusal(plan, snap, opts)
    if why:
        click.echo("cudafix: fix: refused: %s" % printable(why), err=True)
        sys.exit(EXIT_REFUSED)
    steps = plan.runnable
    yours = _left_to_you(plan)
    if yours:  # printed under "run" but not cudafix's to run (sudo, rm -rf, `cudafix warm`): said, never dropped
        emit("".join("not run by --apply (run it yourself): step %d: %s\n" % (n, printable(t)) for n, t in yours), err=as_json)
    if not steps:
        emit("nothing for --apply to run: the plan has only shell lines or steps for you (above)\n", err=as_json)
        sys.exit(EXIT_OK)
    if not yes and not click.confirm("Run %d command%s in %s?" % (len(steps), "" if len(steps) == 1 else "s", snap.python.prefix or "the env"),
                                     default=False, err=as_json):
        click.echo("cudafix: fix: nothing changed", err=True)
        sys.exit(EXIT_FAILED)
    before = _serious(runs)
    failed = None
    for i, step in enumerate(steps, 1):
        emit("[%d/%d] $ %s\n" % (i, len(steps), printable(step.text)), err=as_json)
        sys.stdout.flush()
        try:
            # the installer's own progress streams through (to stderr under --json); in `/`:
            # `python -m pip` would import a pip/ planted in the current directory (docs/security.md)
            # the trusted runner: an installer of root's, ours or the env owner's, stdin closed,
            # its own process group (killed with its children on SIGTERM / SIGINT)
            out_fd = sys.stderr.fileno() if as_json else sys.stdout.fileno()
            rc = runner.run_streamed(_argv(step), FIX_STEP_TIMEOUT_S, out_fd, sys.stderr.fileno(),
                                     owners=env_owners(snap.python.prefix or sys.prefix)).returncode
        except OSError as exc:
            rc, failed = 127, "%s: %s" % (step.text, exc)
        if rc != 0:
            failed = failed or "step %d exited %d: %s" % (i, rc, step.text)
            break
    # re-check on a fresh snapshot of the same interpreter
    python = opts.get("python") or snap.python.executable or None
    after_snap, _ = load_snapshot(None, None, python)
    from cudafix import rules

    after_runs = rules.run(after_snap)
    after = _serious(after_runs)
    lines = ["", "re-check (fresh snapshot of %s):" % (after_snap.python.executable or "?")]
    lines += ["  before: %s" % b for b in before] or ["  before: no errors or warnings"]
    lines += ["  after:  %s" % a for a in after] or ["  after:  no errors or warnings"]
    t = after_snap.primary_torch
    if t is not None:
        tv = after_snap.torchvision[0] if after_snap.torchvision else None
        lines.append("  now:    torch %s%s" % (t.full_version, (", torchvision %s" % tv.full_version) if tv else ""))
    if failed:
        lines.append("cudafix: fix: %s; pip/conda roll back the install that failed, later steps did not run" % failed)
    emit("\n".join(printable(ln) for ln in lines) + "\n", err=as_json)
    from cudafix.plans.planner import TORCH_RULES

    still = [f for r in after_runs if r.rule.id in TORCH_RULES for f in r.findings() if f.severity in (ERROR, WARNING)]
    sys.exit(EXIT_FAILED if failed or still else EXIT_OK)


COMMANDS = [fix]
