"""Sections run ahead: the CLI's `status`, `check`, `snapshot` and `fix` take their snapshot's
sections (cudafix/probes/sections.py) in child processes (cudafix/cli/analysis.py ``load_snapshot``).

Of a warm `cudafix status`, the probes are the largest part, and the GPU probe (importing
pynvml, nvmlInit, the first handle) and the extension scan the largest of them; of a cold one,
`import torch` simulated (the figures: docs/benchmarks.md, "Figures behind the code").  None of
the command's imports is needed to probe, and the sections need nothing of one another but the
import simulation's and the extension scan's inputs.  So for one request the command forks a
child for the GPU section and one for the extension scan where each pays, one for the import
simulation when it has no stored answer, and one for every section left (:func:`start`), and
imports what it needs itself meanwhile; then it assembles the snapshot from their answers
(``sections.assemble``), running here any section whose child died or sent nothing.  The GPU
child is forked first, before the model is imported: in it NVML starts on a thread while pynvml
and the model are imported (cudafix/probes/machine/nvml.py).  Each child (cudafix/forks.py) runs
the same section functions the serial path runs and sends its return value back pickled through
a pipe.  The answers are the probes' own, taken fresh on every run: nothing is cached that the
serial path does not cache.

No child is started where forking is not safe or useful: off Linux, on one CPU, with a second
thread in the process (``/proc/self/task``), with CUDAFIX_JOBS=1 (or its older name
CUDAFIX_SERIAL) set, or in any process but the CLI's (the startup hook and library callers never
ask for one).
"""

from __future__ import annotations

import os

from cudafix import forks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple


class Started:
    """The children forked for one request (cudafix/probes/sections.py), and which sections each
    answers; ``sections.assemble`` takes them."""

    def __init__(self, request: Any, children: Dict[str, forks.Child], groups: Dict[str, str]) -> None:
        self.request = request
        self.children = children  # child name -> the child
        self.groups = groups  # section -> the name of the child that runs it

    def answer(self, section: str) -> Optional[Tuple[Dict[str, Any], Dict[str, str], Dict[str, Any]]]:
        """The section's fields, its probe errors and its child's context; None: no child ran it, or
        that child died or failed outside the section's own guards (the section runs here then)."""
        child = self.children.get(self.groups.get(section, ""))
        got = child.take() if child is not None else None
        if got is None or not got[0]:
            return None
        answers, ctx = got[1]
        if section not in answers:
            return None
        fields, errors = answers[section]
        return fields, errors, ctx

    def close(self) -> None:
        """Every child's answer read (a child has done the serial path's own cache writes by then)
        and its pipe closed; the processes are waited for at the exit (forks.reap_all)."""
        for child in self.children.values():
            child.take()


reap_all = forks.reap_all
split_work = forks.split_work  # the extension scan's and the split walk's: cudafix/forks.py


def can_fork(env: Mapping[str, str]) -> Optional[str]:
    """None where forking the probes is safe here and allowed, else why not (one line)."""
    from cudafix.knowledge import knobs

    if knobs.jobs(env) == 1:
        return "CUDAFIX_SERIAL is set" if not (env.get("CUDAFIX_JOBS") or "").strip() else "CUDAFIX_JOBS=1"
    return forks.unsafe()


def start(req: Any, always: bool = False, rest: bool = False) -> Optional[Started]:
    """Fork, for the request ``req`` (``sections.request``), the GPU section, the extension scan
    and `import torch` simulated where each pays (see BIG_WALKS_BYTES, IMPORT_ANSWER; ``always``:
    all three, as tests need); ``rest``: one more child for every section left (the CLI's: it
    imports what it needs meanwhile).  None: ``can_fork``, or nothing was forked."""
    if can_fork(req.env) is not None:
        return None
    from cudafix.probes import sections

    children: Dict[str, forks.Child] = {}
    groups: Dict[str, str] = {}

    def fork(name: str, names: List[str], work: Callable[[], Any], after: Optional[Callable[[], None]] = None) -> None:
        child = forks.fork(work, after=after)
        if child is not None:
            children[name] = child
            groups.update((s, name) for s in names)

    if always or _nvml_work(req.root, req.use_nvml):
        from cudafix.probes.machine import nvml

        # NVML is shut down after the answer is sent (the parent need not wait for it)
        fork("gpus", ["gpus"], lambda: _gpus_child(req), after=nvml.shutdown)
    if req.python is None and req.scan_arch and req.scan_extensions and (always or _scan_work(req.cache_dir)):
        workers = min(MAX_EXAMINE_WORKERS, forks.cpus() // 2)
        fork("extensions", ["extensions"], lambda: sections.run(req, ["extensions"], workers=workers))
    if req.python is None and (always or _import_work(req.cache_dir)):
        helper = always or forks.cpus() >= HELPER_MIN_CPUS
        fork("torch_import", ["torch_import"], lambda: sections.run(req, ["torch_import"], helper=helper))
    left = [s for s in sections.ORDER if s not in groups]
    if rest and left:
        fork("rest", left, lambda: sections.run(req, left))
    return Started(req, children, groups) if children else None


# A cold extension scan reads every shared object of the env; its examining is split over half
# the CPUs (the other children run too), at most 8.
MAX_EXAMINE_WORKERS = 8

# `import torch` simulated runs in a child of its own only where it has work: with no stored
# answer (a first run, or a new cache) it reads the symbol tables of torch's libraries, the
# largest part of a cold `status`, which pays on 2 CPUs already (docs/benchmarks.md); with one it
# re-stats the files it read, which the child of the sections left does as well.  That child
# reads torch's requirements in a helper of its own meanwhile (cudafix/probes/pyenv/wheelreqs.py)
# where a CPU is free for it: it shortened the cold run on 16 CPUs and lengthened it on 2
# (docs/benchmarks.md, "Figures behind the code").
HELPER_MIN_CPUS = 4
# torchload.RESULT_CACHE (a test holds the name): importing that module here would cost the
# parent its import before the forks.
IMPORT_ANSWER = "torch-import-cache.json"

# A fork costs the parent the fork and its page faults afterwards (each page it writes that it
# shares with a child is copied), so a section runs ahead on its own only where its work is
# larger: NVML where a driver is loaded, the extension scan where it reads files (no stored
# walks: a cold scan) or walks a big env -- the walks file grows with the directories walked; the
# rich test venv's gain nothing on 2 cores, the H200 image's do (docs/benchmarks.md, "Figures
# behind the code").
BIG_WALKS_BYTES = 512 * 1024


def _nvml_work(root: str, use_nvml: bool) -> bool:
    from cudafix.probes.machine.nvml import nvidia_driver_present

    return use_nvml and nvidia_driver_present(root) is not None


def _gpus_child(req: Any) -> Any:
    from cudafix.probes.machine import nvml

    if req.use_nvml and req.root == "/" and nvml.nvidia_driver_present(req.root) is not None:
        nvml.begin()  # first: NVML's start runs beside every import of this child (read_nvml_gpus would begin it later)
    # imported here, in the child: the model it builds on is not the GPU fork's to wait for
    from cudafix.probes import sections

    return sections.run(req, ["gpus"], keep_nvml=True)


def _import_work(cache_dir: Optional[str]) -> bool:
    return not cache_dir or not os.path.exists(os.path.join(cache_dir, IMPORT_ANSWER))


def _scan_work(cache_dir: Optional[str]) -> bool:
    from cudafix.probes.pyenv.dirwalk import WALKS_FILE

    if not cache_dir:
        return True
    try:
        return os.stat(os.path.join(cache_dir, WALKS_FILE)).st_size >= BIG_WALKS_BYTES
    except OSError:
        return True  # no stored walks: every shared object is read
