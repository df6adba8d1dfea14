"""conda plugin: the `conda doctor` health check ``cudafix`` and the ``conda cudafix`` subcommand.

Thin glue over the tested core, registered through the entry-point group ``conda`` (setup.cfg).
conda imports this module from its own interpreter (normally the base env), so:

* nothing here is imported by cudafix itself, and conda is imported only by the hook functions
  (the ``hookimpl`` marker falls back to a no-op when conda is absent, so the module imports
  anywhere);
* the target env is inspected through its own interpreter: ``take_snapshot(python=PREFIX/bin/python)``
  then the rule catalogue, exactly as ``cudafix status --python PREFIX/bin/python`` does;
* the fixer changes the target env only through that env's own cudafix
  (``PREFIX/bin/python -m cudafix hooks install --prefix PREFIX``), the same code as
  ``cudafix hooks install``.

conda 26.7+ does not load plugins for ``conda shell.* activate``: activation-time corrections
come from the activate.d scripts, never from this module.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, List, Optional, Sequence, Tuple

from cudafix.store import runner
from cudafix.store.safefs import env_owners

try:  # the marker conda's plugin manager looks for; absent conda, a no-op
    from conda.plugins import hookimpl
except ImportError:  # pragma: no cover - exercised only where conda is missing

    def hookimpl(func):  # type: ignore[no-redef]
        return func


NAME = "cudafix"
SUMMARY = "Check the CUDA stack under PyTorch (driver, toolkit, torch build, libraries)"
FIX = "Install cudafix's hooks so its safe corrections apply on activation and at import torch"

# conda.base.constants.OK_MARK / X_MARK (used when conda's own cannot be imported)
_OK_MARK = "\u2705"
_X_MARK = "\u274c"

HOOKS_TIMEOUT_S = 120.0


def marks() -> Tuple[str, str]:
    try:
        from conda.base.constants import OK_MARK, X_MARK

        return OK_MARK, X_MARK
    except ImportError:
        return _OK_MARK, _X_MARK


def prefix_python(prefix: str) -> Optional[str]:
    """The env's interpreter, or None when the env has no Python (nothing to check then)."""
    for name in ("python", "python3"):
        path = os.path.join(prefix, "bin", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def analyse_prefix(prefix: str):
    """(snapshot, rule runs) for the env at ``prefix``, probed through its own interpreter."""
    from cudafix import rules
    from cudafix.probes import take_snapshot

    python = prefix_python(prefix)
    if python is None:
        raise LookupError("no Python in %s" % prefix)
    snap = take_snapshot(python=python)
    return snap, rules.run(snap)


# -- the health check ---------------------------------------------------------------------------


def _plan_commands(f, plan) -> Optional[List[str]]:
    """The plan step that answers a finding, as doctor prints it (None: the plan has none)."""
    n = plan.step_for(f.rule, f.subject) if plan is not None else None
    if n is None:
        return None
    return ["\u2192 plan step %d (cudafix fix): %s" % (n, plan.steps[n - 1].text)]


def render_health(runs: Sequence, verbose: bool = False, ok_mark: str = _OK_MARK, x_mark: str = _X_MARK,
                  hooks: Optional[bool] = None, plan=None) -> str:
    """conda-doctor style text: ✅ when nothing is wrong or everything wrong is corrected by
    cudafix's installed hooks, else ❌; one line per finding (verbose: the whole `cudafix check`
    report).  ``hooks``: True = installed in the env, False = incomplete, None = cudafix is not
    installed there.  A safe fix is "corrected automatically" only with the hooks installed; the
    `--fix` hint appears only when they are not."""
    from cudafix.render import report

    findings = report.sorted_findings(runs)
    summary = report.summary_line(runs)
    # The mark is the user's outcome: a note (info) is no problem, so an env with notes only is
    # healthy; errors and warnings count unless cudafix's installed hooks correct each of them.
    serious = [f for f in findings if f.severity in ("error", "warning")]
    if not serious:
        lines = ["%s cudafix: no CUDA stack problems found (%s)." % (ok_mark, summary)]
        if verbose:
            lines.extend("  " + ln for ln in report.render_check(runs).rstrip("\n").splitlines())
        else:
            lines.extend("  %s %s%s: %s" % (f.severity, f.rule, " [%s]" % f.subject if f.subject else "", f.message) for f in findings)
        return "\n".join(lines) + "\n"
    corrected = hooks is True
    handled = corrected and all(f.auto for f in serious)
    if handled:
        lines = ["%s cudafix: %s, each corrected automatically by cudafix's hooks in this env" % (ok_mark, summary)]
    else:
        lines = ["%s cudafix: %s" % (x_mark, summary)]
    if verbose:
        lines.extend("  " + ln for ln in report.render_check(runs).rstrip("\n").splitlines())
    else:
        for f in findings:
            subject = " [%s]" % f.subject if f.subject else ""
            if f.auto:
                auto = " (corrected automatically by cudafix)" if corrected else " (cudafix corrects this once its hooks are installed)"
            else:
                auto = ""
            lines.append("  %s %s%s: %s%s" % (f.severity, f.rule, subject, f.message, auto))
            if f.fix and not f.auto:
                step = _plan_commands(f, plan)
                for cmd in step if step is not None else ["$ " + c for c in f.fix.commands]:
                    lines.append("      %s" % cmd)
    hint = "  `cudafix status` in this env shows the whole stack"
    if hooks is False:
        hint += "; `conda doctor --fix cudafix` installs cudafix's missing hooks"
    elif hooks is None and any(f.auto for f in findings):
        hint += "; cudafix is not installed in this env, so nothing corrects these (`conda doctor --fix cudafix` says how to install it)"
    lines.append(hint + ".")
    return "\n".join(lines) + "\n"


def hooks_state(prefix: str) -> Optional[bool]:
    """True: the env's hooks are all installed; False: cudafix is there but hooks are missing;
    None: cudafix is not installed in the env (or cannot be asked)."""
    python = prefix_python(prefix)
    if python is None or not env_has_cudafix(python):
        return None
    try:
        installed, _lines = hooks_status(python, prefix)
    except OSError:
        return None
    return installed


def health_check(prefix: str, verbose: bool) -> None:
    """Health check action: ``action(prefix, verbose) -> None``, printing its own report."""
    ok_mark, x_mark = marks()
    if prefix_python(prefix) is None:
        print("%s cudafix: no Python in this environment, nothing to check.\n" % ok_mark)
        return
    try:
        snap, runs = analyse_prefix(prefix)
    except Exception as exc:  # report, never take `conda doctor` down
        print("%s cudafix could not inspect %s: %s: %s\n" % (x_mark, prefix, type(exc).__name__, exc))
        return
    from cudafix.render import report

    from cudafix.plans.planner import plan_or_error

    hooks = hooks_state(prefix) if report.sorted_findings(runs) else None
    print(render_health(runs, verbose=verbose, ok_mark=ok_mark, x_mark=x_mark, hooks=hooks, plan=plan_or_error(snap, runs)[0]))


# -- the fixer ----------------------------------------------------------------------------------


def _prefix_of(python: str) -> str:
    return os.path.dirname(os.path.dirname(python))  # PREFIX/bin/python -> PREFIX


class _Done(object):
    """What the env's cudafix answered (text)."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _run_env_cudafix(python: str, args: Sequence[str]) -> _Done:
    env = dict(os.environ)
    env["CUDAFIX_DISABLE"] = "1"  # the child's own startup hook has nothing to do here
    # the trusted runner: from / (a cudafix checkout in conda's own cwd cannot stand in for the
    # env's), an interpreter of root's, ours or the env owner's.  Not -I: `-m cudafix` is the
    # env's own cudafix, found where the env's programs find it.
    res = runner.run([python, "-m", "cudafix"] + list(args), HOOKS_TIMEOUT_S, env=env,
                     owners=env_owners(_prefix_of(python)))
    if res.timed_out:
        raise OSError("`%s -m cudafix %s` did not finish within %.0f s" % (python, " ".join(args), HOOKS_TIMEOUT_S))
    return _Done(res.returncode, res.text(), res.text("stderr"))


def env_has_cudafix(python: str) -> bool:
    # a package with a file (origin): a bare directory named cudafix (a namespace package) in `/`,
    # the runner's cwd, is not an installed cudafix
    probe = ("import importlib.util, sys; s = importlib.util.find_spec('cudafix'); "
             "sys.exit(0 if s is not None and s.origin not in (None, 'namespace') else 3)")
    env = dict(os.environ)
    env["CUDAFIX_DISABLE"] = "1"
    try:
        proc = runner.run([python, "-c", probe], HOOKS_TIMEOUT_S, env=env, owners=env_owners(_prefix_of(python)))
    except OSError:
        return False
    return proc.returncode == 0 and not proc.timed_out


def hooks_status(python: str, prefix: str) -> Tuple[bool, str]:
    """(all hook files installed, the status lines) from the env's own `cudafix hooks status`."""
    proc = _run_env_cudafix(python, ["hooks", "status", "--prefix", prefix])
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def install_hooks(python: str, prefix: str) -> Tuple[bool, str]:
    proc = _run_env_cudafix(python, ["hooks", "install", "--prefix", prefix])
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def _advice_lines(findings: Sequence, plan=None) -> List[str]:
    lines: List[str] = []
    for f in findings:
        if not f.fix or f.auto:
            continue
        step = _plan_commands(f, plan)
        lines.append("  %s: %s" % (f.rule, f.message if step is not None else (f.fix.summary or f.message)))
        lines.extend("      %s" % c for c in (step if step is not None else ["$ " + c for c in f.fix.commands]))
    if lines:
        lines.insert(0, "Not changed automatically (not safe to apply unasked); to fix them yourself:")
    return lines


def fix_prefix(prefix: str, args: object, confirm: Callable[[str], None]) -> int:
    """Health check fixer: ``fixer(prefix, args, confirm) -> int``.

    The safe corrections are applied by cudafix's own hooks (activate.d scripts on
    `conda activate`, the .pth startup hook at `import torch`): the fix is to make sure they are
    installed in the env.  Advice (upgrades, reinstalls) is printed, never run.
    """
    from cudafix.render import report

    python = prefix_python(prefix)
    if python is None:
        print("cudafix: no Python in %s, nothing to fix." % prefix)
        return 0
    from cudafix.plans.planner import plan_or_error

    snap, runs = analyse_prefix(prefix)
    findings = report.sorted_findings(runs)
    safe = [f for f in findings if f.auto]
    advice = _advice_lines(findings, plan_or_error(snap, runs)[0])

    if not env_has_cudafix(python):
        print("cudafix is not installed in %s, so its corrections cannot run there. Install it with:" % prefix)
        print("  $ conda install -p %s cudafix" % prefix)
        print("  (or, in a pip-managed env: %s -m pip install cudafix)" % python)
        if advice:
            print("\n".join(advice))
        return 1 if safe else 0

    installed, status = hooks_status(python, prefix)
    if not installed:
        print("cudafix's hooks are incomplete in %s:" % prefix)
        print("\n".join("  " + ln for ln in status.splitlines()))
        if safe:
            print("%d safe correction(s) wait for them: %s" % (len(safe), "; ".join(f.rule for f in safe)))
        confirm("Install cudafix's startup hook and activation scripts into %s?" % prefix)
        ok, out = install_hooks(python, prefix)
        if out:
            print("\n".join("  " + ln for ln in out.splitlines()))
        if not ok:
            print("cudafix: installing the hooks failed.")
            return 1
    else:
        print("cudafix's hooks are installed in %s." % prefix)
    if safe:
        print("Safe corrections, applied on the next `conda activate` of this env and in each new Python process:")
        for f in safe:
            print("  %s: %s" % (f.rule, f.fix.summary if f.fix else f.message))
    if advice:
        print("\n".join(advice))
    if not safe and not advice:
        print("Nothing to correct.")
    return 0


# -- `conda cudafix ...` ------------------------------------------------------------------------


def _given(argv: Sequence[str], *names: str) -> bool:
    return any(a == n or a.startswith(n + "=") for a in argv for n in names)


def target_args(argv: Sequence[str], prefix: Optional[str]) -> List[str]:
    """argv for the cudafix CLI, aimed at the env ``prefix`` (conda's active env) rather than at
    the interpreter conda runs in: adds ``--python PREFIX/bin/python`` to commands that probe an
    interpreter, ``--prefix PREFIX`` to those that take one, unless the user chose already."""
    from cudafix.cli import main as cli

    args = list(argv)
    if not prefix or os.path.realpath(prefix) == os.path.realpath(sys.prefix):
        return args
    if not args or (args[0].startswith("-") and args[0] not in ("-h", "--help", "--version")):
        args = ["status"] + args  # what cudafix's default group does
    cmd = cli
    for tok in args:
        if tok.startswith("-") or not hasattr(cmd, "commands"):
            break
        sub = cmd.commands.get(tok)  # type: ignore[union-attr]
        if sub is None:
            return list(argv)
        cmd = sub
    if _given(args, "-h", "--help", "--version"):
        return list(argv)
    opts = {o for p in getattr(cmd, "params", []) for o in getattr(p, "opts", [])}
    python = prefix_python(prefix)
    if "--python" in opts and python and not _given(args, "--python", "--from", "--example"):
        args += ["--python", python]
    if "--prefix" in opts and not _given(args, "--prefix"):
        args += ["--prefix", prefix]
    return args


def subcommand(argv: Tuple[str, ...]) -> int:
    """``conda cudafix ARGS``: the cudafix CLI, for the active env; returns its exit status."""
    from cudafix.cli import main as cli

    args = target_args(argv, os.environ.get("CONDA_PREFIX"))
    try:
        cli.main(args=args, prog_name="conda cudafix", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


# -- registration -------------------------------------------------------------------------------


@hookimpl
def conda_health_checks():
    from conda.plugins.types import CondaHealthCheck

    try:
        check = CondaHealthCheck(name=NAME, action=health_check, fixer=fix_prefix, summary=SUMMARY, fix=FIX)
    except TypeError:  # conda < 26.1: health checks had no fixer (`conda doctor --fix` came then)
        check = CondaHealthCheck(name=NAME, action=health_check)
    yield check


@hookimpl
def conda_subcommands():
    from conda.plugins.types import CondaSubcommand

    yield CondaSubcommand(
        name=NAME,
        summary="cudafix: check and correct the CUDA stack under PyTorch (see `conda cudafix --help`)",
        action=subcommand,
    )
