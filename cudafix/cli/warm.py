"""`cudafix warm`: fill the driver's JIT cache for this env's PTX-only code (cudafix/warm/plan.py, run by cudafix/warm/runtime.py)."""

from __future__ import annotations

import os
import sys
import time
from typing import Dict, Optional

import click

from cudafix.render.text import printable


def _bar(out, fraction: Optional[float], elapsed: float, estimate: Optional[float], added: int) -> None:
    if fraction is None or estimate is None:  # no PTX size: elapsed time and cache growth only
        out.write("\r  %.1f s  cache +%.1f MB " % (elapsed, added / 1e6))
        out.flush()
        return
    width = 30
    done = int(width * max(0.0, min(fraction, 1.0)))
    out.write("\r  [%s%s] %3d%%  %.1f s of ~%.1f s  cache +%.1f MB " % (
        "#" * done, "." * (width - done), int(fraction * 100), elapsed, estimate, added / 1e6))
    out.flush()


@click.command("warm")
@click.option("--status", "status_only", is_flag=True, help="Show what needs PTX JIT and what is already warm; change nothing.")
@click.option("--background", is_flag=True, hidden=True, help="Run as activation's detached job: niced, locked, logged.")
def warm_cmd(status_only: bool, background: bool) -> None:
    """Compile the PTX this env's GPUs need (torch and extension modules) into the driver's JIT
    cache, in a child process, before the program's first run."""
    from cudafix import probes
    from cudafix.warm import runtime as warm_run
    from cudafix.warm import plan as warm
    from cudafix.store import paths

    env: Dict[str, str] = dict(os.environ)
    cache_dir = paths.env_cache_dir(sys.prefix, env)
    lock = None
    if background:
        try:
            os.nice(10)
        except OSError:
            pass
        lock, why = warm_run.take_lock_why(cache_dir)
        if lock is None:
            click.echo("%s cudafix warm: %s; nothing done" % (time.strftime("%Y-%m-%dT%H:%M:%S"), why))
            return
    try:
        snap = probes.take_snapshot(env=env, cache_dir=cache_dir)
    except Exception as exc:
        click.echo("cudafix: error: cannot probe this environment: %s: %s" % (type(exc).__name__, exc), err=True)
        sys.exit(2)
    env = program_env(snap, env)
    targets = warm.targets(snap)
    state = warm.load_state(cache_dir)
    if status_only:
        # file names, labels and reasons come from the disk: written out, never acted on by the terminal
        click.echo("\n".join(printable(ln) for ln in warm.plan_lines(targets, snap, state, env)))
        return
    if not targets:
        click.echo(printable(warm.plan_lines(targets, snap, state, env)[0]))
        return
    tty = sys.stderr.isatty() and not background
    failed = 0
    for t in targets:
        key = warm.state_key(snap, t.cc, env)
        mods = [m for m in t.modules if m.warmable]
        for m in t.modules:
            if not m.warmable:
                click.echo(printable("  skip %s: %s" % (m.label, m.why_not)))
        if not mods:
            continue
        if background and all(warm.is_warm(state, key, t, env).get(m.path) for m in mods):
            click.echo("%s GPU%d CC %s: already warm" % (time.strftime("%Y-%m-%dT%H:%M:%S"), t.gpu.index, t.cc))
            continue
        what = ("%.1f MB of PTX in %d module(s), estimate ~%.0f s" % (t.ptx_bytes / 1e6, len(mods), t.estimate_s())
                if t.size_known else "%d module(s), PTX size not recorded" % len(mods))
        click.echo("%sGPU%d %s (CC %s): compiling %s" % (
            time.strftime("%Y-%m-%dT%H:%M:%S ") if background else "", t.gpu.index, t.gpu.name, t.cc, what))
        progress = (lambda f, e, s, a: _bar(sys.stderr, f, e, s, a)) if tty else None
        result = warm_run.run_child(snap.python.executable or sys.executable, t, snap, env, progress=progress)
        if tty:
            sys.stderr.write("\n")
        if result.get("ok"):
            warm.record(cache_dir, key, t, {k: result[k] for k in ("seconds", "cache_added", "cache_path")})
            click.echo(printable("  done in %.1f s; JIT cache %s grew by %.1f MB" % (result["seconds"], result["cache_path"], int(result["cache_added"]) / 1e6)))  # type: ignore[arg-type]
        else:
            failed += 1
            click.echo(printable("  failed: %s" % result.get("error", "unknown error")), err=not background)
    if lock is not None:
        lock.close()
    sys.exit(1 if failed else 0)


def program_env(snap, env: Dict[str, str]) -> Dict[str, str]:
    """The environment the program will run in: ``env`` with the corrections the startup hook
    makes at `import torch` (the process part of the environment plan).  The warm child's own hook
    is off (CUDAFIX_DISABLE=1), so without them it would warm another JIT cache than the
    program's (CUDA_CACHE_DISABLE=1 unset, CUDA_CACHE_MAXSIZE raised: docs/gpu.md)."""
    from cudafix import rules
    from cudafix.plans.environment import environment_plan

    out = dict(env)
    for sf in environment_plan(rules.findings(rules.run(snap))).for_process():
        for op in sf.process_ops:
            op.apply(out)
    return out


COMMANDS = [warm_cmd]
