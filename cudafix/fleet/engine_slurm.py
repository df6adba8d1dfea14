"""Gather snapshots through Slurm: one `cudafix snapshot` task per allocated node.

    srun --ntasks-per-node=1 --chdir=/ --output=DIR/%n.json --error=DIR/%n.err [user's srun args] PYTHON -m cudafix snapshot

``%n`` is the node's index in the job (https://slurm.schedmd.com/srun.html, "filename pattern"):
one file per node, whatever the host names (several slurmd on one host share a hostname, so
``%N`` would not do).  Each snapshot names its node itself (SLURMD_NODENAME: cudafix/probes/machine/node.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import List, Optional, Sequence, Tuple

from cudafix.store import runner
from cudafix.fleet.inputs import Document, EngineError, InputError, read_path



def srun_command(python: str, srun_args: Sequence[str], outdir: str) -> List[str]:
    # --chdir=/: on each node, `python -m` puts the working directory first on sys.path, and srun's
    # default is the submitting shell's directory (docs/security.md); the user's own srun args follow
    return (["srun", "--ntasks-per-node=1", "--chdir=/", "--output=" + os.path.join(outdir, "%n.json"),
             "--error=" + os.path.join(outdir, "%n.err")] + list(srun_args) + [python, "-m", "cudafix", "snapshot"])


def gather(python: str, srun_args: Sequence[str] = (), timeout: Optional[float] = 600,
           srun: str = "srun") -> Tuple[List[Document], List[InputError]]:
    if shutil.which(srun) is None:
        raise EngineError("srun not found on PATH: run `cudafix fleet --slurm` on a Slurm login node or inside an allocation")
    outdir = tempfile.mkdtemp(prefix="cudafix-fleet-")
    try:
        cmd = srun_command(python, srun_args, outdir)
        cmd[0] = srun
        try:  # the trusted runner: an srun of root's or ours, its group killed on the timeout
            p = runner.run(cmd, timeout if timeout is not None else 1e9)
        except OSError as exc:
            raise EngineError("cannot run %s: %s" % (srun, exc)) from None
        if p.timed_out:
            raise EngineError("srun did not finish within %d s" % timeout)
        docs, errors = read_path(outdir)
        for name in sorted(os.listdir(outdir)):
            if name.endswith(".err"):
                with open(os.path.join(outdir, name), encoding="utf-8", errors="replace") as fh:
                    text = fh.read(4096).strip()
                if text:
                    errors.append(InputError("node #%s" % name[:-4], text.splitlines()[-1]))
        if p.returncode != 0 and not docs:
            tail = p.stderr.decode("utf-8", "replace").strip().splitlines()
            raise EngineError("srun failed (exit %d): %s" % (p.returncode, tail[-1] if tail else "no output"))
        if p.returncode != 0:
            errors.append(InputError("srun", "exit %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace").strip()[-300:])))
        return docs, errors
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
