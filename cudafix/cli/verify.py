"""`cudafix verify`: is the GPU really used?  See cudafix/verify/__init__.py for the verdicts and exit codes.

`--first-run` (cudafix/verify/firstrun.py, cmdrun.py) attributes the first run's cost, of the built-in
detector or of `-- CMD ARGS...`; `--nccl` (cudafix/verify/nccl.py) checks NCCL collectives.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Dict, List, Optional, Tuple

import click

from cudafix import verify as _verify


def _bad(msg: str) -> None:
    click.echo("cudafix verify: %s" % msg, err=True)
    sys.exit(2)


def _progress(line: str) -> None:
    click.echo(line, err=True)


def _first_run(python: Optional[str], cmd: Tuple[str, ...], batch: Optional[int], imgsz: Optional[int], half: bool,
               repeat: Optional[int], no_compile: bool, as_json: bool, timeout: int) -> None:
    from cudafix.verify import cmdrun, firstrun

    if cmd:
        if batch is not None or imgsz is not None or half or no_compile:
            _bad("--batch, --imgsz, --half and --no-compile set up the built-in model; they do not apply to -- CMD")
        if python is not None:
            _bad("--python does not apply to -- CMD (the command runs as given)")
        repeat = cmdrun.DEFAULT_REPEAT if repeat is None else repeat
        if repeat < cmdrun.MIN_REPEAT:
            _bad("--repeat must be at least %d with -- CMD: a cost counts only above the noise measured from its runs" % cmdrun.MIN_REPEAT)
        findings, units, unwarmable = _command_context()
        try:
            rep = cmdrun.run_command(list(cmd), repeat=repeat, timeout=float(timeout), progress=_progress,
                                     units=units, unwarmable=unwarmable)
        except cmdrun.CommandFailed as exc:
            click.echo("cudafix verify: %s" % exc, err=True)
            for line in exc.tail:
                click.echo("  | %s" % line, err=True)
            sys.exit(2)
        rep["findings"] = findings
        click.echo(json.dumps(rep, indent=2) if as_json else cmdrun.render_text(_shown(rep)))
        sys.exit(rep["exit_code"])
    repeat = 1 if repeat is None else repeat
    batch = 8 if batch is None else batch
    imgsz = 640 if imgsz is None else imgsz
    if batch < 1 or batch > 1024:
        _bad("--batch must be 1..1024, not %d" % batch)
    if imgsz < 32 or imgsz > 4096 or imgsz % 32:
        _bad("--imgsz must be a multiple of 32 in 32..4096 (the detector's stride is 32), not %d" % imgsz)
    try:
        rep = firstrun.first_run(python=python, batch=batch, imgsz=imgsz, half=half, repeat=repeat,
                                 with_compile=not no_compile, timeout=float(timeout), progress=_progress)
    except firstrun.FirstRunError as exc:
        _bad(str(exc))
    click.echo(json.dumps(rep, indent=2) if as_json else firstrun.render_text(_shown(rep)))
    sys.exit(rep["exit_code"])


def _command_context():  # type: ignore[no-untyped-def]
    """One snapshot of this env, before the runs: the status findings behind a first-run cost, and
    `cudafix warm`'s own targets as units the check warms one at a time (cudafix/verify/cmdrun.py)."""
    from cudafix.verify import firstrun

    try:
        from cudafix import rules
        from cudafix.probes import take_snapshot

        snap = take_snapshot()
        findings = [f.to_dict() for f in rules.findings(rules.run(snap)) if f.rule in firstrun.ENV_FINDINGS]
    except Exception as exc:  # context for the report, not a precondition
        return [{"rule": "cudafix", "severity": "info", "message": "snapshot failed: %s" % exc}], [], []
    units, unwarmable = units_from(snap)
    return findings, units, unwarmable


def units_from(snap):  # type: ignore[no-untyped-def]
    """`cudafix warm`'s own targets (cudafix/warm/plan.py) as the check's warm units: one per
    extension module it covers (per path, every GPU architecture), one for torch's own libraries
    (`import torch` loads them all at once); the modules it cannot warm, with why."""
    from cudafix.verify import cmdrun
    from cudafix.warm import plan as wplan

    by_path: Dict[str, List] = {}
    unwarmable: List[Dict[str, str]] = []
    for t in wplan.targets(snap):
        for m in t.modules:
            if not m.warmable:
                unwarmable.append({"label": os.path.basename(m.path), "why": m.why_not})
            else:
                by_path.setdefault("torch" if m.via == "import torch" else m.path, []).append((t, m))
    names = [os.path.basename(k) for k in by_path]
    units = [cmdrun.WarmUnit(key if key == "torch" or names.count(os.path.basename(key)) > 1 else os.path.basename(key),
                             _warmer(snap, pairs)) for key, pairs in by_path.items()]  # a shared basename: its path
    return units, unwarmable


def _warmer(snap, pairs):  # type: ignore[no-untyped-def]
    """warm(cache_dir): cudafix warm's own child (cudafix/warm/runtime.py) with these modules alone,
    per GPU architecture, into that JIT cache."""
    from cudafix.warm import plan as wplan
    from cudafix.warm import runtime as wrun

    def warm(cache_dir: str) -> Optional[str]:
        env = dict(os.environ, CUDA_CACHE_PATH=cache_dir)
        by_cc: Dict[str, List] = {}
        for t, m in pairs:
            by_cc.setdefault(t.cc, []).append((t, m))
        for cc, tm in by_cc.items():
            target = wplan.WarmTarget(cc, tm[0][0].gpu, [m for _t, m in tm])
            res = wrun.run_child(sys.executable, target, snap, env)
            if not res.get("ok"):
                return _warm_error(res)
        return None
    return warm


def _warm_error(res) -> str:  # type: ignore[no-untyped-def]
    """Why warm's child did not warm: a failed dlopen or load refusal (its error), else what
    cudaFree(0) returned (a CUDA error code: no GPU, driver too old...)."""
    done = [s for s in res.get("steps") or [] if isinstance(s, dict) and s.get("step") == "done"]
    bad = {k: v for k, v in ((done[0].get("rc") or {}) if done else {}).items() if v != 0}
    if bad and not res.get("skipped") and "dlopen" not in str(res.get("error", "")):
        return "cudaFree(0) through %s" % ", ".join("%s returned %s" % kv for kv in bad.items())
    return str(res.get("error") or "cudafix warm's child failed")


def _shown(report):  # type: ignore[no-untyped-def]
    """The report with every string written out (render/text.py printable), for its text form:
    a status finding's module path, a child's error, NCCL's log lines cannot move the cursor or
    forge a line of the report, as in status's output.  Escaped value by value, before the
    renderer joins its lines (a value's own newline stays inside its line)."""
    import dataclasses

    from cudafix.render.text import printable

    if isinstance(report, str):
        return printable(report)
    if isinstance(report, dict):
        return {k: _shown(v) for k, v in report.items()}
    if isinstance(report, tuple) and hasattr(report, "_fields"):
        return type(report)(*[_shown(v) for v in report])
    if isinstance(report, (list, tuple)):
        return type(report)(_shown(v) for v in report)
    if dataclasses.is_dataclass(report) and not isinstance(report, type):
        return dataclasses.replace(report, **{f.name: _shown(getattr(report, f.name))
                                              for f in dataclasses.fields(report) if f.init})
    return report


def _nccl(python: Optional[str], as_json: bool, timeout: int) -> None:
    from cudafix.verify import nccl

    try:
        rep = nccl.verify_nccl(python=python, timeout=float(timeout))
    except nccl.NcclError as exc:
        _bad(str(exc))
    click.echo(json.dumps(rep, indent=2) if as_json else nccl.render_text(_shown(rep)))
    sys.exit(rep["exit_code"])


@click.command("verify", context_settings={"ignore_unknown_options": False})
@click.option("--python", "python", default=None, metavar="PATH",
              help="Interpreter of the env to check (default: this one).")
@click.option("--quick", is_flag=True, help="Small sizes: finishes in well under 10 s on a healthy GPU.")
@click.option("--first-run", "first_run", is_flag=True,
              help="Attribute the first run's cost (JIT, cudnn.benchmark, module loading, torch.compile) by "
                   "measurement: of a built-in YOLO-shaped detector, or of `-- CMD ARGS...`.")
@click.option("--batch", type=int, default=None, help="--first-run: batch size of the built-in detector (default 8).")
@click.option("--imgsz", type=int, default=None, help="--first-run: image size, a multiple of 32 (default 640).")
@click.option("--half", is_flag=True, help="--first-run: run the built-in detector in fp16.")
@click.option("--repeat", type=click.IntRange(1, 10), default=None,
              help="--first-run: run each case this many times, interleaved (the minimum counts; with -- CMD the "
                   "noise is measured from the runs). Default 3 with -- CMD, 1 for the built-in detector.")
@click.option("--no-compile", "no_compile", is_flag=True, help="--first-run: skip the torch.compile cases.")
@click.option("--nccl", is_flag=True, help="NCCL all-reduce/all-gather across the local GPUs: bandwidth, transport, verdict.")
@click.option("--json", "as_json", is_flag=True, help="Print the measurements and verdict as JSON.")
@click.option("--timeout", default=600, show_default=True, help="Seconds before a check (or one run) is abandoned.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def verify_cmd(python: Optional[str], quick: bool, first_run: bool, batch: Optional[int], imgsz: Optional[int], half: bool,
               repeat: Optional[int], no_compile: bool, nccl: bool, as_json: bool, timeout: int, cmd: Tuple[str, ...]) -> None:
    """Import torch in a child process and measure whether the GPU is really used.

    Exit codes: 0 GPU used, 1 degraded, 2 cudafix could not run, 3 CPU fallback, 4 no torch.
    With --first-run: 0 no first-run cost beyond context creation, 1 a first-run cost in the env,
    2 could not run (or the command failed), 3 CPU fallback, 4 no torch.
    """
    if cmd and not first_run:
        _bad("a command (%s) is only taken with --first-run: cudafix verify --first-run -- CMD ARGS..." % cmd[0])
    if first_run and (quick or nccl):
        _bad("--first-run cannot be combined with %s" % ("--quick" if quick else "--nccl"))
    if not first_run and (batch is not None or imgsz is not None or half or no_compile or repeat is not None):
        _bad("--batch, --imgsz, --half, --repeat and --no-compile need --first-run")
    if timeout < 1:
        _bad("--timeout must be at least 1 second")
    if first_run:
        _first_run(python, cmd, batch, imgsz, half, repeat, no_compile, as_json, timeout)
    if nccl:
        if quick:
            _bad("--nccl cannot be combined with --quick")
        _nccl(python, as_json, timeout)
    try:
        result = _verify.verify(python=python, quick=quick, timeout=float(timeout))
    except _verify.VerifyError as exc:
        click.echo("cudafix verify: %s" % exc, err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(_verify.render_text(_shown(result)))
    sys.exit(result.exit_code)


COMMANDS = [verify_cmd]
