"""`cudafix fleet`: the CUDA stack of every node, compared (docs/fleet.md)."""

from __future__ import annotations

import sys
from typing import Iterator, Optional, Tuple

import click

EXIT_OK, EXIT_PROBLEM, EXIT_CANNOT = 0, 1, 2


@click.command("fleet", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--from", "sources", multiple=True, metavar="PATH|-",
              help="Snapshot files, directories of *.json, or - (stdin: concatenated documents), gathered any way.")
@click.option("--slurm", is_flag=True, help="Run `cudafix snapshot` once per node with srun; ARGS go to srun (-N 8 -p gpu ...).")
@click.option("--ray", "ray_address", default=None, is_flag=False, flag_value="auto", metavar="[ADDRESS]",
              help="Run one snapshot task on every alive node of the Ray cluster at ADDRESS (default: auto).")
@click.option("--python", "python", default=None, metavar="PATH",
              help="With --slurm: the interpreter of the env on the nodes (default: this one).")
@click.option("--timeout", default=600, show_default=True, help="Seconds to wait for the nodes.")
@click.option("--json", "as_json", is_flag=True, help="Print the cudafix.fleet/1 document.")
@click.argument("srun_args", nargs=-1, type=click.UNPROCESSED)
def fleet(sources: Tuple[str, ...], slurm: bool, ray_address: Optional[str], python: Optional[str], timeout: int,
          as_json: bool, srun_args: Tuple[str, ...]) -> None:
    """Compare the CUDA stack of every node: what differs, and each rule's findings by node.

    Exit codes: 0 every node agrees and none has an error, 1 errors or disagreement,
    2 cudafix could not judge every node (bad input, a node without a snapshot, engine failure).
    """
    from cudafix.fleet import compare, render
    from cudafix.fleet.inputs import EngineError

    modes = sum(bool(x) for x in (sources, slurm, ray_address))
    if modes != 1:
        _fail("say where the snapshots come from: one of --from PATH|-, --slurm [SRUN ARGS], --ray [ADDRESS]")
    if srun_args and not slurm:
        _fail("unexpected arguments %s (only --slurm takes trailing srun arguments)" % " ".join(srun_args))
    try:
        if sources:
            rep = compare.compare_keyed(_keyed(sources))
        elif slurm:
            from cudafix.fleet import engine_slurm

            docs, errors = engine_slurm.gather(python or sys.executable, srun_args, timeout=timeout)
            rep = compare.compare(docs, [(e.source, e.message) for e in errors])
        else:
            from cudafix.fleet import engine_ray

            docs, errors = engine_ray.gather(None if ray_address == "auto" else ray_address, timeout=timeout)
            rep = compare.compare(docs, [(e.source, e.message) for e in errors])
    except EngineError as exc:  # the engine could not be used: one line
        _fail(str(exc))
    if not rep.nodes and not rep.errors:
        _fail("no snapshots found in %s" % ", ".join("stdin" if s == "-" else s for s in sources) if sources
              else "the engine returned no snapshot")
    click.echo(render.render_json(rep) if as_json else render.render_text(rep), nl=False)
    sys.exit(rep.exit_code())


def _keyed(sources: Tuple[str, ...]) -> Iterator:
    """Every node of every --from source, one at a time, in order (a directory in parallel)."""
    import os

    from cudafix.fleet import compare, parallel
    from cudafix.fleet.inputs import InputError, StreamTooLarge, iter_fd, iter_path

    for s in sources:
        if s != "-" and os.path.isdir(s):
            yield from parallel.iter_dir(s)
            continue
        try:  # stdin streamed as a file is: each document at most 64 MiB, one line and exit 2 past it
            for item in (iter_fd(_stdin(), "<stdin>") if s == "-" else iter_path(s)):
                yield compare.Keyed(item.source, error=item.message) if isinstance(item, InputError) else compare.keyed(item)
        except StreamTooLarge as exc:
            _fail(str(exc))
        except OSError as exc:
            _fail("cannot read %s: %s" % ("stdin" if s == "-" else s, exc.strerror or exc))


def _stdin():
    """stdin's descriptor, or its binary stream where it has none (click's test runner)."""
    try:
        return sys.stdin.fileno()
    except (OSError, ValueError, AttributeError):
        return getattr(sys.stdin, "buffer", sys.stdin)


def _fail(msg: str) -> None:
    click.echo("cudafix fleet: %s" % msg, err=True)
    sys.exit(EXIT_CANNOT)


COMMANDS = [fleet]
