"""What the report area's commands do, without click: `status` and `check` run from here both
through their click commands (cudafix/cli/report.py) and through the click-free fast path
(cudafix/cli/fast.py), so the two cannot differ.

Bad input (an unreadable or corrupt --from file, an unknown rule id, a bad --assume value, a
--python that is not an interpreter) is one line on stderr and exit status 2, before anything
is probed or written.  So is any failure of cudafix itself: `cudafix check` must never exit 1
("errors found") because cudafix crashed.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

    from cudafix.model.findings import RuleRun
    from cudafix.model.snapshot import Snapshot

# The model, the rules, the renderers and json are imported where used, not here: `status` forks
# its probes first (cudafix.probes.ahead), and what this module imports runs before that fork.

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "examples")

from cudafix.cli.common import (  # noqa: F401  (re-exported: the commands import them from here)
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    BadInput,
    _split,
    emit,
    fail,
    guarded,
    select_rules,
    use_color,
)


def example_names() -> List[str]:
    try:
        names = os.listdir(EXAMPLES_DIR)
    except OSError:
        return []
    return sorted(n[: -len(".json")] for n in names if n.endswith(".json"))


def _assume_values(driver: Optional[str], gpus: Sequence[str]) -> Tuple[Optional[str], List[str]]:
    """Options win over $CUDAFIX_ASSUME_DRIVER / $CUDAFIX_ASSUME_GPU."""
    env_driver: Optional[str] = None
    env_gpus: List[str] = []
    if not driver or not gpus:
        if os.environ.get("CUDAFIX_ASSUME_DRIVER") or os.environ.get("CUDAFIX_ASSUME_GPU"):
            from cudafix.probes.machine import assume

            try:
                got = assume.from_env(os.environ)
            except assume.AssumeError as exc:
                raise BadInput(str(exc)) from None
            env_driver, env_gpus = got[0], list(got[1] or [])
    return (driver or env_driver), (list(gpus) or env_gpus)


def _validate_assume(driver: Optional[str], gpus: Optional[Sequence[str]], given_as: str) -> None:
    """Reject a bad --assume-* value (or $CUDAFIX_ASSUME_*) before anything is probed."""
    if not driver and not gpus:
        return
    from cudafix.probes.machine import assume

    try:
        if driver:
            assume.parse_driver(driver)
        if gpus:
            assume.parse_gpus(list(gpus))
    except assume.AssumeError as exc:
        msg = str(exc)
        for opt in ("--assume-driver", "--assume-gpu"):
            if msg.startswith(opt) and not given_as.startswith("--"):
                msg = given_as + msg[len(opt):]
        raise BadInput(msg) from None


def _apply_assume(snap: Snapshot, driver: Optional[str], gpus: Sequence[str]) -> Snapshot:
    if not driver and not gpus:
        return snap
    from cudafix.probes.machine import assume

    try:
        return assume.apply(snap, driver, list(gpus))
    except assume.AssumeError as exc:
        raise BadInput(str(exc)) from None


def _check_python(path: str) -> str:
    """``path`` if it can be a Python interpreter, else BadInput (exit 2) before anything runs:
    an ELF executable must carry CPython's entry point (Py_BytesMain, Py_Main; /bin/ls does not),
    a script must not be a Python program (bin/pip is one: its #! line names the interpreter to
    give).  A launcher script (a pyenv shim: #!/usr/bin/env bash) passes here and is judged by its
    answer (load_snapshot)."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise BadInput("--python %s: not an executable file" % path)
    why = _not_an_interpreter(path)
    if why:
        raise BadInput("--python %s: not a Python interpreter: %s" % (path, why))
    return path


_PY_NAME = ("python", "pypy")  # an interpreter's file name starts with one of these (python3.11, pypy3)


def _not_an_interpreter(path: str) -> Optional[str]:
    if os.name == "nt":
        return None  # a PE file: judged by its answer
    try:
        with open(os.path.realpath(path), "rb") as fh:
            head = fh.read(512)
            if head.startswith(b"#!"):
                words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
                if words and os.path.basename(words[0]) == "env" and len(words) > 1:
                    words = words[1:]
                interp = words[0] if words else ""
                if os.path.basename(interp).startswith(_PY_NAME):
                    return "a Python script run by %s (give that: --python %s)" % (interp, interp)
                return None
            if not head.startswith(b"\x7fELF"):
                return "neither an ELF executable nor a script"
            import mmap

            fh.seek(0)
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if m.find(b"Py_BytesMain") < 0 and m.find(b"Py_Main") < 0:
                    return "an executable without CPython's entry point (Py_BytesMain)"
    except (OSError, ValueError) as exc:
        return "cannot read it: %s" % (getattr(exc, "strerror", None) or exc)
    return None


def load_snapshot(from_file: Optional[str], example: Optional[str], python: Optional[str],
                  meanwhile: Optional[Callable[[], None]] = None) -> Tuple[Snapshot, str]:
    """The snapshot to analyse and a few words on where it came from.  A probed one is taken in a
    child process where that is safe (cudafix.probes.ahead) while ``meanwhile`` (the command's own
    imports) runs here."""
    given = [n for n, v in (("--from", from_file), ("--example", example), ("--python", python)) if v]
    if len(given) > 1:
        raise BadInput("%s cannot be combined" % " and ".join(given))
    if from_file or example:  # here only: a probed snapshot's model is imported after the fork
        from cudafix.model.snapshot import Snapshot, SnapshotError
    if from_file:
        try:
            if from_file == "-":
                snap = Snapshot.from_json(sys.stdin.read())
            else:
                snap = Snapshot.load(from_file)
        except SnapshotError as exc:
            raise BadInput("--from %s: %s" % (from_file, exc)) from None
        except Exception as exc:  # anything else a hostile file can provoke
            raise BadInput("--from %s: not a usable snapshot: %s: %s" % (from_file, type(exc).__name__, exc)) from None
        return snap, "from %s" % from_file
    if example:
        names = example_names()
        if example not in names:
            raise BadInput("unknown example %r (bundled: %s)" % (example, ", ".join(names) or "none"))
        path = os.path.join(EXAMPLES_DIR, example + ".json")
        try:
            return Snapshot.load(path), "bundled example %s" % example
        except SnapshotError as exc:
            raise BadInput("example %s: %s" % (example, exc)) from None
    from cudafix.store import paths

    # The per-env cache the activation hook uses too (fatbin scans keyed by path, size, mtime).
    if python:
        prefix = os.path.dirname(os.path.dirname(os.path.abspath(_check_python(python))))
        origin = "probed for %s" % python
    else:
        prefix, origin = sys.prefix, "probed on this machine"
    snap = _probe(python, paths.env_cache_dir(prefix), meanwhile)
    if python and "python" in snap.probe_errors:  # it ran, but did not answer as Python does
        raise BadInput("--python %s: did not answer as a Python interpreter: %s" % (python, snap.probe_errors["python"]))
    return snap, origin


def _probe(python: Optional[str], cache_dir: str, meanwhile: Optional[Callable[[], None]]) -> Snapshot:
    from cudafix.probes import ahead, sections

    req = sections.request(python=python, cache_dir=cache_dir)
    started = ahead.start(req, rest=True)  # None: serially, here (not safe to fork, or switched off)
    try:
        if meanwhile is not None:
            meanwhile()
        return sections.assemble(req, started)  # a section whose child gave no answer runs here
    finally:
        if started is not None:
            started.close()  # waited for, whatever happened here


def analyse(opts: Dict[str, Any], run_rules: bool = True,
            meanwhile: Optional[Callable[[], None]] = None) -> Tuple[Snapshot, str, List[RuleRun]]:
    """Validate every input first (nothing is probed on bad input), then probe and run rules
    (``meanwhile``: load_snapshot's)."""
    if opts.get("example") == "list":
        emit("\n".join(example_names() or ["(no bundled examples)"]) + "\n")
        sys.exit(EXIT_OK)
    # Every rule unless --only / --skip name some: those are checked here, before anything is probed.
    selected = select_rules(opts.get("only", ()), opts.get("skip", ())) if run_rules and (opts.get("only") or opts.get("skip")) else None
    driver, gpus = _assume_values(opts.get("assume_driver"), opts.get("assume_gpu", ()))
    _validate_assume(driver, None, opts.get("assume_driver") and "--assume-driver" or "$CUDAFIX_ASSUME_DRIVER")
    _validate_assume(None, gpus, opts.get("assume_gpu") and "--assume-gpu" or "$CUDAFIX_ASSUME_GPU")
    if opts.get("python"):
        _check_python(opts["python"])
    if opts.get("from_report"):  # `snapshot --from-report`: the partial snapshot the text states
        from cudafix.cli import pasted

        d = pasted.diagnosis(dict(opts, only=(), skip=()))
        return d.snapshot, "from the report %s" % opts["from_report"], (d.runs if run_rules else [])
    snap, origin = load_snapshot(opts.get("from_file"), opts.get("example"), opts.get("python"), meanwhile)
    snap = _apply_assume(snap, driver, gpus)
    if not run_rules:
        return snap, origin, []
    from cudafix import rules

    return snap, origin, rules.run(snap, selected)


def _json(doc: Dict[str, Any]) -> str:
    import json

    return json.dumps(doc, indent=2) + "\n"


# -- what `status` and `check` do, with their options parsed (by click or by cudafix/cli/fast.py) --


def _import_outputs() -> None:
    """What `status` and `check` import after probing: imported while a child probes."""
    from cudafix import rules  # noqa: F401
    from cudafix.plans import planner  # noqa: F401
    from cudafix.render import report  # noqa: F401


def fix_command(opts: Dict[str, Any]) -> str:
    """The `cudafix fix` line that plans for the snapshot these options name (pasted, it prints
    the same plan): the source and what-if options given on the command line ($CUDAFIX_ASSUME_*
    are in the environment the line is pasted into already)."""
    import shlex

    words = ["cudafix", "fix"]
    for key, opt in (("from_file", "--from"), ("example", "--example"), ("python", "--python"),
                     ("assume_driver", "--assume-driver")):
        if opts.get(key):
            words += [opt, shlex.quote(opts[key])]
    for gpu in opts.get("assume_gpu") or ():
        words += ["--assume-gpu", shlex.quote(gpu)]
    return " ".join(words)


def run_status(as_json: bool, verbose: bool, opts: Dict[str, Any]) -> None:
    if opts.get("from_report"):
        from cudafix.cli import pasted

        return pasted.run_status(as_json, opts)
    snap, origin, runs = analyse(opts, meanwhile=_import_outputs)
    from cudafix.plans.planner import plan_or_error
    from cudafix.render import report

    plan, plan_error = plan_or_error(snap, runs)
    if as_json:
        emit(_json(report.status_document(snap, runs, plan=plan)))
    else:
        emit(report.render_status(snap, runs, origin=origin, color=use_color(), verbose=verbose, plan=plan, plan_error=plan_error,
                                  width=report.WIDTH, fix_command=fix_command(opts)))


def run_check(strict: bool, as_json: bool, opts: Dict[str, Any]) -> NoReturn:
    if opts.get("from_report"):
        from cudafix.cli import pasted

        pasted.run_check(strict, as_json, opts)
    snap, _origin, runs = analyse(opts, meanwhile=_import_outputs)
    from cudafix.render import report

    c = report.counts(report.sorted_findings(runs))
    undecided = bool(report.unknowns(runs))  # --strict: what could not be checked is not a pass
    from cudafix.model.findings import ERROR, WARNING

    code = EXIT_FINDINGS if c[ERROR] or (strict and (c[WARNING] or undecided)) else EXIT_OK
    from cudafix.plans.planner import plan_or_error

    plan = plan_or_error(snap, runs)[0]
    if as_json:
        emit(_json(report.status_document(snap, runs, plan=plan)))
    else:
        emit(report.render_check(runs, color=use_color(), snap=snap, plan=plan, strict=strict, width=report.WIDTH,
                                 fix_command=fix_command(opts)))
    sys.exit(code)
