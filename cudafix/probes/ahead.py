"""Probes run ahead: the CLI's `status`, `check`, `snapshot` and `fix` take their snapshot in child
processes (cudafix/cli/analysis.py ``load_snapshot``).

Of a warm `cudafix status`, the probes are the largest part, and the GPU probe (importing
pynvml, nvmlInit, the first handle) and the extension scan the largest of them (the figures:
docs/benchmarks.md, "Figures behind the code").  None of the command's imports is needed to
probe, and the two big probes need nothing the others compute.  So the command forks a child for the GPU probe and one
for the extension scan where each pays, one for the probes that read the machine alone
(cudafix/probes/machine/machine.py) where a CPU is free for it (:func:`start`), then a child that takes
the snapshot with their answers and runs every other probe (:func:`snapshot_job`), and imports
what it needs itself meanwhile.  The GPU child is forked first, before the model is imported:
in it NVML starts on a thread while pynvml and the model are imported (cudafix/probes/machine/nvml.py).
Each child (cudafix/forks.py) runs the same probe functions the serial path runs and sends its
return value back pickled through a pipe.  The answers are the probes' own, taken fresh on every run: nothing is cached that the
serial path does not cache.

A job's answer is used only where its inputs are the ones ``take_snapshot`` computes itself (the
extension job works out its own sys.path, prefix and torch, and its parent compares them);
otherwise, and wherever a child died or sent nothing, the probe runs in the parent, as without
this module.  No child is started where forking is not safe or useful: off Linux, on one CPU,
with a second thread in the process (``/proc/self/task``), with CUDAFIX_JOBS=1 (or its older
name CUDAFIX_SERIAL) set, or in any
process but the CLI's (the startup hook and library callers never ask for one).
"""

from __future__ import annotations

import os
import sys

from cudafix import forks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Mapping, Optional, Tuple

GPUS = "gpus"
EXTENSIONS = "extensions"
MACHINE = "machine"


class Job:
    """One child (cudafix/forks.py) running one probe for the inputs ``key``."""

    def __init__(self, name: str, key: Any, child: forks.Child) -> None:
        self.name, self.key, self.child = name, key, child

    def take(self) -> Optional[Tuple[bool, Any]]:
        """``(True, value)``, ``(False, "Type: message")`` (the probe raised), or None (no answer:
        the caller runs the probe itself)."""
        return self.child.take()

    def drop(self) -> None:
        """Not needed after all: read the answer anyway (the child has done the serial path's own
        cache writes by then) and close its pipe."""
        self.child.take()


reap_all = forks.reap_all
split_work = forks.split_work  # the extension scan's and the split walk's: cudafix/forks.py


class Ahead:
    """The jobs started for one snapshot, by name."""

    def __init__(self, jobs: Dict[str, Job]) -> None:
        self.jobs = jobs

    def claim(self, name: str, key: Any) -> Optional[Job]:
        """The job ``name`` if it was started for exactly ``key`` (else it is dropped: None)."""
        job = self.jobs.pop(name, None)
        if job is None:
            return None
        if job.key != key:
            job.drop()
            return None
        return job

    def machine(self, key: Any) -> Optional[Job]:
        return self.claim(MACHINE, key)

    def gpus(self, env: Mapping[str, str], root: str, use_nvml: bool) -> Optional[Job]:
        return self.claim(GPUS, gpus_key(env, root, use_nvml))

    def extensions(self) -> Optional[Job]:
        return self.claim(EXTENSIONS, None)

    def close(self) -> None:
        for job in list(self.jobs.values()):
            job.drop()
        self.jobs.clear()

    def hand_over(self) -> None:
        """The jobs' answers go to another child (which holds the read ends): this process closes
        its own and only waits for the jobs' processes, at its exit."""
        for job in self.jobs.values():
            job.child.release()
        self.jobs.clear()


def can_fork(env: Mapping[str, str]) -> Optional[str]:
    """None where forking the probes is safe here and allowed, else why not (one line)."""
    from cudafix.knowledge import knobs

    if knobs.jobs(env) == 1:
        return "CUDAFIX_SERIAL is set" if not (env.get("CUDAFIX_JOBS") or "").strip() else "CUDAFIX_JOBS=1"
    return forks.unsafe()


# A cold extension scan reads every shared object of the env; its examining is split over half
# the CPUs (the other jobs run too), at most 8.
MAX_EXAMINE_WORKERS = 8


def _fork(name: str, key: Any, work: Callable[[], Any], after: Optional[Callable[[], None]] = None,
          keep: Tuple[int, ...] = ()) -> Optional[Job]:
    child = forks.fork(work, after=after, keep=keep)
    return Job(name, key, child) if child is not None else None


def gpus_key(env: Mapping[str, str], root: str, use_nvml: bool) -> Tuple[Any, ...]:
    return (dict(env), root, use_nvml)


# A fork costs the parent the fork and its page faults afterwards (each page it writes that it
# shares with a child is copied), so a job runs ahead only where its work is larger: NVML where
# a driver is loaded, the extension scan where it reads files (no stored walks: a cold scan) or
# walks a big env -- the walks file grows with the directories walked; the rich test venv's
# gain nothing on 2 cores, the H200 image's do (docs/benchmarks.md, "Figures behind the code").
BIG_WALKS_BYTES = 512 * 1024


def _nvml_work(root: str, use_nvml: bool) -> bool:
    from cudafix.probes.machine.nvml import nvidia_driver_present

    return use_nvml and nvidia_driver_present(root) is not None


def _gpus_job(env: Dict[str, str], root: str, use_nvml: bool) -> Any:
    from cudafix.probes.machine import nvml

    if use_nvml and root == "/" and nvml.nvidia_driver_present(root) is not None:
        nvml.begin()  # first: NVML's start runs beside every import of this child (read_nvml_gpus would begin it later)
    # imported here, in the child: the model it builds on is not the GPU fork's to wait for
    from cudafix.probes.machine import gpus

    return gpus.probe_gpus(env, root=root, use_nvml=use_nvml, keep_nvml=True)


def _shared_imports() -> None:
    """What every other process of the command imports (the model, json), imported once, after
    the GPU child's fork and before the others': on the H200 each process importing the model
    itself made the snapshot child slower (run 8, docs/benchmarks.md)."""
    import json  # noqa: F401

    from cudafix.model import snapshot  # noqa: F401


def _scan_work(cache_dir: Optional[str]) -> bool:
    from cudafix.probes.pyenv.dirwalk import WALKS_FILE

    if not cache_dir:
        return True
    try:
        return os.stat(os.path.join(cache_dir, WALKS_FILE)).st_size >= BIG_WALKS_BYTES
    except OSError:
        return True  # no stored walks: every shared object is read


SNAPSHOT = "snapshot"


def snapshot_job(env: Mapping[str, str], cache_dir: Optional[str], python: Optional[str] = None) -> Optional[Job]:
    """A child taking ``take_snapshot(python=python, cache_dir=cache_dir)``, with the GPU probe, the
    extension scan and the machine probes (:func:`start`) in children forked first, from here:
    NVML's chain was the longest of the run, and begins sooner than from the snapshot's child.  That child
    reads their answers; this process only waits for them at its exit.  None: ``can_fork``."""
    if can_fork(env) is not None:
        return None
    env = dict(env)
    jobs = start(env, cache_dir, extensions=python is None)

    def work() -> Any:
        from cudafix.probes import take_snapshot

        return take_snapshot(python=python, cache_dir=cache_dir, ahead=jobs)

    job = _fork(SNAPSHOT, None, work, keep=tuple(j.child.fd for j in jobs.jobs.values()) if jobs else ())
    if jobs is not None:
        if job is None:
            jobs.close()
        else:
            jobs.hand_over()
    return job


def start(env: Mapping[str, str], cache_dir: Optional[str], always: bool = False,
          extensions: bool = True) -> Optional[Ahead]:
    """Fork the GPU probe, (``extensions``) the extension scan and the machine probes for a
    ``take_snapshot(env=env, cache_dir=cache_dir)`` of this interpreter where each pays (see
    BIG_WALKS_BYTES, MACHINE_MIN_CPUS; ``always``: all three, as tests need), or None
    (``can_fork``, or none pays)."""
    if can_fork(env) is not None:
        return None
    from cudafix.store.paths import probe_root

    env = dict(env)
    root = probe_root(env)
    use_nvml = root == "/"
    jobs: Dict[str, Job] = {}
    if always or _nvml_work(root, use_nvml):
        from cudafix.probes.machine import nvml

        # NVML is shut down after the answer is sent (the parent need not wait for it)
        job = _fork(GPUS, gpus_key(env, root, use_nvml), lambda: _gpus_job(env, root, use_nvml), after=nvml.shutdown)
        if job is not None:
            jobs[GPUS] = job
    _shared_imports()
    if extensions and (always or _scan_work(cache_dir)):
        job = _fork(EXTENSIONS, None, lambda: _extensions_job(env, cache_dir, root))
        if job is not None:
            jobs[EXTENSIONS] = job
    if always or forks.cpus() >= MACHINE_MIN_CPUS:
        from cudafix import probes
        from cudafix.probes.machine import machine

        # the inputs take_snapshot gives the machine probes for this interpreter (call_driver_api: its default)
        key = machine.key(env, root, use_nvml, True, probes.kept_dirs(sys.prefix or None, root), cache_dir)
        job = _fork(MACHINE, key, lambda: machine.run(*key))
        if job is not None:
            jobs[MACHINE] = job
    return Ahead(jobs) if jobs else None


# The machine probes (cudafix/probes/machine/machine.py; their share: run 10 of docs/benchmarks.md) run in
# a child of their own only where a CPU is free for it: the parent, the snapshot child, the GPU
# child and this one make four.
MACHINE_MIN_CPUS = 4


def _extensions_job(env: Dict[str, str], cache_dir: Optional[str], root: str) -> Tuple[Dict[str, Any], Any]:
    """The extension scan with the inputs take_snapshot would give it (worked out here the way
    it does; the parent compares them with its own): ``(kwargs, ExtensionInfo)``."""
    from cudafix import probes
    from cudafix.probes.pyenv import torch_build
    from cudafix.probes.pyenv.extensions import probe_extensions

    info, sys_path = probes.current_python()
    prefix = info.prefix or None
    conda = bool(prefix and os.path.isdir(os.path.join(prefix, "conda-meta")))
    # Only the primary torch's directory and version.py matter here: no arch scan, no conda records.
    torches = torch_build.probe_torch(sys_path, prefix=prefix, scan_arch=False, conda_records=[])
    kwargs = probes.extension_kwargs(sys_path, env, prefix, conda, torches[0] if torches else None, info.version,
                                     cache_dir, root, probes.kept_dirs(prefix, root))
    return kwargs, probe_extensions(workers=min(MAX_EXAMINE_WORKERS, forks.cpus() // 2), **kwargs)
