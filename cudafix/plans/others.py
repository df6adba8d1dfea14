"""The plan's steps for findings a torch change does not answer, and which step answers which
finding (docs/remedies.md: one plan, the one source of commands).

Each finding is answered once: by the torch change (the rules the change answers, and the
extension modules of packages the plan reinstalls), by a step of its own fix (a shell line, a
command), by cudafix itself (auto), or it stays open.  ``answers`` maps (rule, subject) to the
text of the step that answers it; the renderers print "-> plan step N (cudafix fix)" there
instead of a command of the finding's own, so no finding contradicts the plan.
"""

from __future__ import annotations

import os
import re
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence, Set, Tuple

from cudafix.knowledge import cuda_packages, version_tuple
from cudafix.knowledge.cuda_packages import normalize
from cudafix.model.findings import Finding
from cudafix.model.snapshot import Snapshot
from cudafix.plans.commands import INSTALL, OTHER, SHELL, UNINSTALL, Step, env_line, quote_argv

POINTER = "cudafix fix"  # rules point here instead of printing install commands themselves
if TYPE_CHECKING:  # an annotation only: typing is not imported at run time (issue 23)
    Answers = Dict[Tuple[str, str], str]


def ext_package(snap: Snapshot, f: Finding) -> Optional[str]:
    """The distribution an ext-* finding is about (its subject is the module's file name)."""
    if not f.rule.startswith("ext-"):
        return None
    for m in snap.extensions.modules:
        if os.path.basename(m.path) == f.subject and m.package:
            return normalize(m.package)
    return None


def _wheel_major(name: str, version: str) -> Optional[int]:
    fam = cuda_packages.pip_cuda_family(name)
    if fam:
        return fam[1]
    if normalize(name) in cuda_packages.PIP_CUDA_VERSIONED and version_tuple(version):
        return version_tuple(version)[0]
    return None


def stray_wheels(snap: Snapshot) -> List[str]:
    """pip CUDA wheels of a major the imported torch does not use, that nothing installed needs
    by its name (a CUDA package outside torch of that major, e.g. cupy-cuda12x, keeps them)."""
    t = snap.primary_torch
    if t is None or not t.cuda or not version_tuple(t.cuda):
        return []
    tmajor = version_tuple(t.cuda)[0]
    users = {normalize(m.package or "") for m in snap.extensions.modules}
    kept_majors = {int(x) for u in users for x in re.findall(r"cuda(\d+)", u)}
    out = []
    for d in snap.toolkits.nvidia_wheels:
        major = _wheel_major(d.name, d.version)
        if major is not None and major != tmajor and major not in kept_majors:
            out.append(d.name)
    return sorted(out)


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _own_pip(cmd: str, py: str) -> Tuple[str, ...]:
    """The argv of a `[VAR=value ...] <the env's python> -m pip ...` line (a package rebuild), or ():
    `env` runs it with the variables set, as sh does the printed line.  Only the env's own
    interpreter: a line for anything else stays advice."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return ()
    n = 0
    while n < len(words) and _ASSIGNMENT.match(words[n]):
        n += 1
    if words[n:n + 3] != [py, "-m", "pip"]:
        return ()
    return tuple((["env"] if n else []) + words)


def other_steps(findings: Sequence[Finding], snap: Snapshot, changed: Set[str], torch_rules: Sequence[str],
                install_text: Optional[str]) -> Tuple[List[Step], List[str], List[str], Answers]:
    """(steps, auto fixes, open findings, answers) for every finding; ``install_text``: the plan's
    torch install step (it answers the torch rules and the modules of the packages it moves)."""
    steps: List[Step] = []
    seen: Dict[str, Step] = {}
    auto: List[str] = []
    unresolved: List[str] = []
    answers: Answers = {}
    py = snap.python.executable or "python"
    for f in findings:
        key = (f.rule, f.subject)
        if f.rule in torch_rules or ext_package(snap, f) in changed:
            if install_text:
                answers[key] = install_text
            continue
        fix = f.fix
        if fix is None:
            unresolved.append("%s: %s" % (f.rule, f.message))
            continue
        if fix.auto:
            line = "%s: %s" % (f.rule, fix.summary)
            if line not in auto:
                auto.append(line)
            continue
        mine: List[str] = []
        for op in fix.env.ops:
            line = env_line(op)
            if line:
                mine.append(line)
                if line not in seen:
                    seen[line] = Step(SHELL, line, shell="sh, bash, zsh", why="%s: %s" % (f.rule, fix.summary))
                    steps.append(seen[line])
        for cmd in fix.commands:
            if cmd.startswith(POINTER):
                continue
            argv: Tuple[str, ...] = _own_pip(cmd, py)  # printed as the rule wrote it, run as printed
            own = bool(argv)
            if not own and cmd.startswith(("pip uninstall ", "pip install ")):
                # a bare `pip` may belong to another env: the env's own interpreter runs it
                argv = (py, "-m") + tuple(shlex.split(cmd))
                cmd = quote_argv(argv)
            elif cmd.startswith("conda install ") and snap.python.conda_prefix and not re.search(r" (-p|-n|--prefix|--name) ", cmd):
                # the env's own prefix, whatever env is active where the line is pasted
                cmd = "conda install -p %s %s" % (shlex.quote(snap.python.conda_prefix), cmd[len("conda install "):])
            mine.append(cmd)
            if cmd not in seen:
                kind = OTHER if own else (INSTALL if argv[3:4] == ("install",) else UNINSTALL) if argv else \
                    SHELL if cmd.startswith(("export ", "unset ")) else OTHER
                seen[cmd] = Step(kind, cmd, argv, shell="sh, bash, zsh" if kind == SHELL else "", root=cmd.startswith("sudo "),
                                 why="%s: %s" % (f.rule, fix.summary))
                steps.append(seen[cmd])
        if not mine and f.rule == "mixed-cuda-sources" and f.subject == "cuda-runtimes" and stray_wheels(snap):
            argv = (py, "-m", "pip", "uninstall", "-y") + tuple(stray_wheels(snap))
            text = quote_argv(argv)
            if text not in seen:
                seen[text] = Step(UNINSTALL, text, argv, why="%s: %s" % (f.rule, fix.summary))
                steps.append(seen[text])
            mine.append(text)
        if mine:
            answers[key] = mine[0]
        else:
            unresolved.append("%s: %s (%s)" % (f.rule, f.message, fix.summary))
    return steps, auto, unresolved, answers
