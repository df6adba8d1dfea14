"""One plan for an env: every finding in, one coherent set of changes out (docs/remedies.md).

Rules state problems; this module decides what to change.  For torch it walks the ranked
candidates of :mod:`cudafix.plans.remedy` and keeps the first whose application to the
snapshot (:mod:`cudafix.plans.simulate`) the rules themselves find clean: no error or warning
of the torch rules (:data:`TORCH_RULES`) and no new finding of any other rule.  So the plan never
proposes a build cudafix would then flag, and applying it re-checks clean by construction.

The plan moves torch with every installed package pinned to it or linking its libraries
(torchvision, torchaudio, ...; never adds one; cudafix.plans.companions), through the manager that
owns torch (pip wheel: the env's own interpreter ``-m pip``; conda package: ``conda install -p
<prefix>`` with the channels of that era), moves CUDA packages outside torch the driver cannot run
(or lists them open), and keeps the other findings' commands and shell lines once each
(cudafix.plans.others), recording which numbered step answers which finding.
"""

from __future__ import annotations

import dataclasses
import re
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Sequence, Tuple

from cudafix.knowledge import compat, cuda_driver, version_tuple
from cudafix.knowledge.cuda_packages import normalize
from cudafix.knowledge import gpus as kgpus
from cudafix.knowledge.arch import parse_cc
from cudafix.knowledge import torch_builds as tb
from cudafix.model.findings import ERROR, WARNING, Finding, RuleRun
from cudafix.model.record import asdict as record_asdict
from cudafix.model.record import record
from cudafix.model.snapshot import Snapshot
from cudafix.plans import remedy, simulate
from cudafix.plans.commands import (  # noqa: F401  (step kinds re-exported: part of the plan API)
    DRIVER,
    INSTALL,
    OTHER,
    SHELL,
    UNINSTALL,
    Step,
    plain_version,
    conda_steps,
    env_line,
    installed_companions,
    owner_of,
    pip_steps,
    stale_nvidia,
)

# The rules a torch (and companions) change answers: the plan's target must leave none of them
# with an error or a warning.
TORCH_RULES = (
    "cpu-only-torch", "torchvision-mismatch", "driver-too-old", "driver-minor-compat",
    "arch-unsupported", "arch-ptx-jit", "jit-cache-too-small",
)
# Build-time findings a torch change may cause (CUDA_HOME then names a toolkit of the old CUDA):
# told with the plan, never a reason to pick another build (the toolkit is the thing to change).
CONSEQUENCES = ("cuda-home-mismatch",)
# Rules whose findings depend on torch's build: after a torch change their fixes come from the
# simulated state (the toolkit to match is the target's CUDA, not the replaced torch's).
AFTER_RULES = CONSEQUENCES + ("ext-arch-unsupported", "ext-ptx-unsupported", "ext-ptx-jit", "ext-cuda-major", "ext-torch-symbols")
MAX_TRIED = 80  # candidates simulated at most (there are ~60 release x variant rows)
MINOR_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
from cudafix.plans.others import POINTER, other_steps  # noqa: E402,F401  (POINTER: part of the plan API)
from cudafix.model import cuda as cudaver

# cudafix.plans.companions (with the add-on tables) is imported where a torch change is planned:
# a plan without one, what `cudafix status` makes on a healthy env, never needs it.
if TYPE_CHECKING:
    from cudafix.plans.companions import AddonMove


@record(frozen=True)
class Change:
    """One package moved by the plan."""

    name: str
    before: Optional[str]
    after: str


@record(frozen=True)
class FixPlan:
    """The one plan for an env (make_plan): what changes, the steps in order, what it answers."""

    python: str
    owner: str  # "pip" | "conda" | "" (no torch change)
    target: Optional[str] = None  # "torch 2.13.0+cu130"
    changes: Tuple[Change, ...] = ()
    steps: Tuple[Step, ...] = ()
    keeps: Tuple[str, ...] = ()
    why: Tuple[str, ...] = ()
    skipped: Tuple[str, ...] = ()  # candidates cudafix would have flagged, with the rules that did
    notes: Tuple[str, ...] = ()
    blockers: Tuple[str, ...] = ()  # what `cudafix fix --apply` cannot do (driver, root)
    addresses: Tuple[str, ...] = ()  # rule ids of the findings the plan answers
    unresolved: Tuple[str, ...] = ()  # findings no step answers
    automatic: Tuple[str, ...] = ()  # safe fixes cudafix applies itself (nothing to run)
    answers: Tuple[Tuple[str, str, int], ...] = ()  # (rule, subject, plan step number that answers it)

    @property
    def nothing_to_do(self) -> bool:
        return not self.steps and not self.blockers and not self.unresolved

    def step_for(self, rule: str, subject: str) -> Optional[int]:
        """The number (1-based) of the plan step that answers a finding, None if none does."""
        return next((n for r, s, n in self.answers if r == rule and s == subject), None)

    @property
    def runnable(self) -> Tuple[Step, ...]:
        return tuple(s for s in self.steps if s.argv)

    def to_dict(self) -> Dict[str, Any]:
        d = record_asdict(self)  # dataclasses.asdict's dict, faster
        d["nothing_to_do"] = self.nothing_to_do
        return d


# -- helpers --------------------------------------------------------------------------------


def _variant_of(t) -> Optional[str]:
    if t is None:
        return None
    if t.cuda:
        return cudaver.tag(t.cuda)
    if t.hip:
        return None
    v = t.full_version or ""
    return "cpu" if (t.version and not t.cuda) or "+cpu" in v else None


def _gpu_ccs(snap: Snapshot) -> List[Tuple[Any, str]]:
    return [(g, cc) for g in snap.visible_gpus() for cc in [g.compute_capability or kgpus.compute_capability(g.name)] if cc]


def _ccs(snap: Snapshot) -> List[str]:
    """The visible GPUs' compute capabilities, each once (only those that read as X.Y)."""
    out: List[str] = []
    for _g, cc in _gpu_ccs(snap):
        if cc not in out and not _unreadable(cc):
            out.append(cc)
    return out


def _unreadable(cc: str) -> bool:
    try:
        parse_cc(cc)
    except ValueError:
        return True
    return False


def _unreadable_ccs(snap: Snapshot) -> List[str]:
    """GPUs whose compute capability does not read as X.Y (a malformed recorded snapshot): no
    build can be judged against them, so no torch change is chosen."""
    return ["GPU%s's compute capability %r" % (g.index, cc) for g, cc in _gpu_ccs(snap) if _unreadable(cc)]


def _driver(snap: Snapshot) -> Tuple[Optional[int], Optional[str]]:
    from cudafix.rules._util import driver_cuda_int, driver_version  # pure helpers shared with the rules

    return driver_cuda_int(snap)[0], driver_version(snap)


def _serious(runs: Sequence[RuleRun], ids: Optional[Sequence[str]] = None) -> List[Finding]:
    out = []
    for r in runs:
        if ids is not None and r.rule.id not in ids:
            continue
        out.extend(f for f in r.findings() if f.severity in (ERROR, WARNING))
    return out


def _run(snap: Snapshot, rule_ids: Sequence[str]) -> List[RuleRun]:
    from cudafix import rules

    return rules.run(snap, tuple(r for r in rules.REGISTRY if r.id in rule_ids))


# -- companions and commands ------------------------------------------------------------------


def _companions_for(snap: Snapshot, torch_v: str) -> Tuple[Dict[str, str], List[str]]:
    """({name: version built for torch_v}, [names cudafix knows no release of for torch_v])."""
    from cudafix.plans.companions import all_companions

    want: Dict[str, str] = {}
    missing: List[str] = []
    for name, have in all_companions(snap):
        v = tb.companion_for(name, torch_v)
        if _pins(snap, name) == torch_v and v is not None:
            v = plain_version(have)  # the installed release is built for torch_v too (its own pin says so)
        if v is None:
            missing.append(name)
        else:
            want[name] = v
    return want, missing


def _pins(snap: Snapshot, name: str) -> Optional[str]:
    """The torch version an installed companion pins with ``==`` (its metadata), None if none."""
    reqs: List[str] = []
    if name == "torchvision" and snap.torchvision:
        reqs = [snap.torchvision[0].requires_torch or ""] + list(snap.torchvision[0].dist.requires)
    reqs += [r for d in snap.torch_pinned if normalize(d.name) == name for r in d.requires]
    for r in reqs:
        m = re.match(r"^\s*torch\s*\(?\s*==\s*([0-9][0-9.]*)\s*\)?\s*$", r or "")
        if m:
            return m.group(1)
    return None


def _open_companion(snap: Snapshot, name: str, have: str, torch_v: str) -> str:
    """The open line of a companion with no known release for the target: reason and command."""
    py = shlex.quote(snap.python.executable or "python")
    if name == "torchaudio":
        return ("torchaudio %s: no torchaudio release exists for torch %s (PyPI's newest is %s): it no longer "
                "imports after the change — drop it: %s -m pip uninstall -y torchaudio" % (
                    have, torch_v, ".".join(map(str, tb.TORCHAUDIO_LAST)), py))
    return ("%s %s is built against the installed torch and cudafix does not know which %s release is built for "
            "torch %s: after the change, install that release with the env's own pip (%s -m pip install %s==VERSION, "
            "VERSION from %s's release notes), or its import fails" % (name, have, name, torch_v, py, name, name))


# -- choosing the target ----------------------------------------------------------------------


def _clean(before: Sequence[RuleRun], after: Sequence[RuleRun]) -> List[str]:
    """Rules that would still (or newly) flag the simulated state: [] means the target is clean."""
    bad = sorted({f.rule for f in _serious(after, TORCH_RULES)})
    old = {(f.rule, f.subject) for f in _serious(before) if f.rule not in TORCH_RULES}
    new = sorted({f.rule for f in _serious(after) if f.rule not in TORCH_RULES + CONSEQUENCES and (f.rule, f.subject) not in old})
    return bad + new


@record(frozen=True)
class Choice:
    """The chosen target and everything that moves with it."""

    cand: remedy.Candidate
    comps: Dict[str, str]  # companion -> version built for the target
    uninstall: List[str]  # CUDA wheels of the replaced torch's major
    moves: List[AddonMove]  # CUDA packages outside torch the driver cannot run
    missing: List[str]  # companions with no known release for the target (open)
    after: Sequence[RuleRun] = ()  # every rule's outcome on the snapshot with the target applied


def _choose(snap: Snapshot, runs: Sequence[RuleRun]) -> Tuple[Optional[Choice], List[str]]:
    """(choice or None, skipped candidates with why) — best first."""
    from cudafix.plans.companions import addon_moves, all_companions

    t = snap.primary_torch
    dcuda, dver = _driver(snap)
    ccs = _ccs(snap)
    driver_present = bool(snap.driver.kernel_version or snap.driver.libcuda_path or "driver" in snap.assumed)
    want_cuda = bool(snap.visible_gpus()) and driver_present
    py = snap.python.version or ""
    cur = plain_version(t.full_version) if t else None
    cur_variant = _variant_of(t)
    ids = tuple(TORCH_RULES) + tuple(r.rule.id for r in runs if r.rule.id not in TORCH_RULES)
    cands: List[remedy.Candidate] = []
    if cur and cur_variant and len(version_tuple(cur)) >= 3:
        keep = remedy.candidate(cur, cur_variant, dcuda, dver, ccs, py, 0)  # first: change only what pairs with it
        if keep is not None:
            cands.append(keep)
    # pip: prefer the installed CUDA major (its nvidia-* wheels stay; no leftovers); conda brings
    # the CUDA libraries with the cuda-version pin, so there the newest CUDA of a release comes first.
    keep_major = t.cuda if t is not None and owner_of(snap) == "pip" else None
    cands += [c for c in remedy.candidates(dcuda, ccs, py, cur, keep_major, dver, want_cuda=want_cuda)
              if not (c.torch == cur and c.variant == cur_variant)]
    owner = owner_of(snap)
    skipped: List[str] = []
    # First pass: every companion has a known release for the target.  Second pass: a companion
    # cudafix knows no release of is listed open, never a reason to leave torch broken.
    for strict in (True, False):
        for c in cands[:MAX_TRIED]:
            comps, missing = _companions_for(snap, c.torch)
            if missing and strict:
                skipped.append("%s: %s" % (c.label, "; ".join("%s has no release for torch %s that cudafix knows of" % (m, c.torch)
                                                          for m in missing)))
                continue
            if not strict and not missing:
                continue  # already judged in the first pass
            uninstall = stale_nvidia(snap, c.variant)
            moves = addon_moves(snap, dcuda)
            replaced = [n for n, _ in all_companions(snap)] + [m.name for m in moves if m.to]
            sim = simulate.apply_target(snap, c.torch, c.variant, comps, uninstall, owner=owner, replaced=replaced)
            after = _run(sim, ids)
            flagged = _clean(runs, after)
            if not flagged:
                return Choice(c, comps, uninstall, moves, missing, after), [k for k in skipped if not k.startswith(c.label + ":")]
            line = "%s: would still fail %s" % (c.label, ", ".join(flagged))
            if line not in skipped:
                skipped.append(line)
    return None, skipped


def _blocker(snap: Snapshot) -> Tuple[str, Optional[Step]]:
    """Why no torch build helps, and the driver step that would."""
    dcuda, _ = _driver(snap)
    ccs = _ccs(snap)
    gaps = remedy.driver_gap(dcuda, ccs)
    if gaps:
        need = max((cuda_driver.min_driver(first) or "?", first) for _cc, first in gaps)
        text = "upgrade the NVIDIA driver to >= %s (CUDA %s): this driver predates %s" % (
            need[0], need[1], ", ".join("compute capability %s (first in CUDA %s)" % g for g in gaps))
        return text, Step(DRIVER, text, root=True, why="a driver upgrade needs root and a reboot or module reload")
    best = remedy.candidates(None, ccs, snap.python.version or "", want_cuda=True)
    native = [c for c in best if c.cuda]
    if native and dcuda is not None:
        c = min(native, key=lambda c: (version_tuple(c.cuda), c.distance))
        need = cuda_driver.min_driver(c.cuda or "")
        if compat.runtime(compat.driver_of(snap), cudaver.version_int(c.cuda or "0")).how == compat.NATIVE:
            return ("no official torch build passes cudafix's own checks on this machine (see the builds skipped above)", None)
        text = "upgrade the NVIDIA driver to >= %s (CUDA %s, for %s): no official build fits this driver, every GPU and Python %s" % (
            need or "?", c.cuda, c.label, snap.python.version or "?")
        return text, Step(DRIVER, text, root=True, why="a driver upgrade needs root")
    return ("no official torch build fits this driver, GPU(s) %s and Python %s" % (", ".join(ccs) or "?", snap.python.version or "?"), None)


# -- the plan ---------------------------------------------------------------------------------


MODE_WHY = {
    remedy.NATIVE: "runs natively on this driver (no minor-version compatibility needed)",
    remedy.NO_DRIVER: "the driver is unknown, so it does not narrow the choice",
}


def _mode_why(c: remedy.Candidate, snap: Snapshot) -> str:
    if c.mode != remedy.MINOR_COMPAT:
        return MODE_WHY.get(c.mode, c.mode)
    major = version_tuple(c.cuda or "0")[0]
    return ("relies on CUDA minor-version compatibility (driver %s >= %s, the CUDA %d.x floor; %s): every GPU runs the "
            "wheel's SASS, so nothing needs the PTX JIT, which minor compatibility cannot do; limits: APIs that need a "
            "newer driver return cudaErrorCallRequiresNewerDriver, and PTX built by CUDA %s (newer than the driver's) "
            "cannot be JIT-compiled" % (_driver(snap)[1] or "?", compat.minor_floor(major) or "?", major, MINOR_DOC, c.cuda))


def _companion_changes(snap: Snapshot, ch: Choice, owner: str, torch_changes: bool):
    """(changes, keeps, comps still to install): a companion already built for the target stays."""
    from cudafix.plans.companions import all_companions, companion_variant

    c = ch.cand
    changes: List[Change] = []
    keeps: List[str] = []
    comps = dict(ch.comps)
    for name, have in all_companions(snap):
        if name not in comps:
            continue
        var = companion_variant(snap, name, have)
        same_variant = var == c.variant if var is not None else not torch_changes
        if plain_version(have) == comps[name] and same_variant:
            comps.pop(name)
            keeps.append("%s %s (built for %s)" % (name, have, c.label))
            continue
        changes.append(Change(name, have, "%s+%s" % (comps[name], c.variant) if owner == "pip" else comps[name]))
    return changes, keeps, comps


def _torch_part(snap: Snapshot, ch: Choice) -> Dict[str, Any]:
    """The plan's fields for the chosen torch target."""
    from cudafix.plans.companions import addon_steps, all_companions, open_lines

    t = snap.primary_torch
    c = ch.cand
    owner = owner_of(snap)
    cur_label = t.full_version
    torch_changes = not (plain_version(cur_label) == c.torch and _variant_of(t) == c.variant)
    changes: List[Change] = []
    keeps: List[str] = []
    if torch_changes:
        changes.append(Change("torch", cur_label, "%s+%s" % (c.torch, c.variant)))
    else:
        keeps.append("torch %s (it fits: only what is paired with it changes)" % cur_label)
    more, kept, comps = _companion_changes(snap, ch, owner, torch_changes)
    changes += more
    keeps += kept
    for name in ch.uninstall:
        changes.append(Change(name, next((d.version for d in snap.toolkits.nvidia_wheels if d.name == name), None), "(removed)"))
    if owner == "conda":
        steps, notes = conda_steps(snap, c.torch, c.variant, comps)
    else:
        steps, notes = pip_steps(snap, c.torch, c.variant, comps, torch_changes, ch.uninstall)
    steps = list(steps) + addon_steps(snap, ch.moves)
    changes += [Change(m.name, m.version, "%s %s" % (m.to, plain_version(m.version))) for m in ch.moves if m.to]
    opens = [_open_companion(snap, n, h, c.torch) for n, h in all_companions(snap) if n in ch.missing]
    opens += open_lines(snap, ch.moves)
    notes = list(notes) + list(c.notes) + ["%s: %s" % (m.name, m.why) for m in ch.moves if m.to]
    dist = ("the installed version in another CUDA variant" if c.distance == 0 and torch_changes
            else "no torch change" if not torch_changes
            else "%d release%s from the installed one (the nearest that fits)" % (c.distance, "" if c.distance == 1 else "s"))
    why = ["chosen: %s — %s; %s" % (c.label, dist, _mode_why(c, snap))] + list(c.evidence)
    why.append("re-checked: with this target applied to the snapshot, cudafix's rules report no error or warning about torch")
    return dict(owner=owner, target=c.label, changes=changes, keeps=keeps, steps=steps, notes=notes, why=why, opens=opens,
                after=ch.after)


def make_plan(snap: Snapshot, runs: Optional[Sequence[RuleRun]] = None) -> FixPlan:
    """The one plan for ``snap`` (its findings from ``runs``, or a fresh run of every rule)."""
    if runs is None:
        from cudafix import rules

        runs = rules.run(snap)
    findings = _serious(runs)
    torch_fs = [f for f in findings if f.rule in TORCH_RULES]
    python = snap.python.executable or "python"
    t = snap.primary_torch
    part: Dict[str, Any] = dict(owner="", target=None, changes=[], keeps=[], steps=[], notes=[], why=[], opens=[])
    blockers: List[str] = []
    skipped: List[str] = []
    unresolved: List[str] = []
    unreadable = _unreadable_ccs(snap) if torch_fs else []
    if torch_fs and t is None:
        unresolved = ["%s: %s" % (f.rule, f.message) for f in torch_fs]
    elif unreadable:
        unresolved = ["%s: %s (no torch build chosen: %s cannot be read as X.Y)" % (f.rule, f.message, ", ".join(unreadable))
                      for f in torch_fs]
    elif torch_fs:
        ch, skipped = _choose(snap, runs)
        if ch is None:
            blockers.append(_blocker(snap)[0])
            unresolved = ["%s: %s" % (f.rule, f.message) for f in torch_fs]
        else:
            part = _torch_part(snap, ch)
    changed = {normalize(c.name) for c in part["changes"]}
    install = next((st.text for st in part["steps"] if st.kind == INSTALL), None)
    if part.get("after"):
        # What depends on torch's build (its CUDA vs CUDA_HOME, its extension modules) is judged on
        # the env as the plan leaves it: a fix for the replaced torch would contradict the plan.
        after = {(f.rule, f.subject): f for f in _serious(part["after"]) if f.rule in AFTER_RULES}
        findings = [after.get((f.rule, f.subject), f) if f.rule in AFTER_RULES else f for f in findings]
        gone = [f for f in findings if f.rule in AFTER_RULES and (f.rule, f.subject) not in after]
        had = {(g.rule, g.subject) for g in findings}
        findings = [f for f in findings if f not in gone] + [
            dataclasses.replace(f, message="after the change: " + f.message) for k, f in after.items() if k not in had]
    else:
        gone = []
    extra, auto, other_unresolved, answers = other_steps(findings, snap, changed, TORCH_RULES, install)
    answers.update({(f.rule, f.subject): install for f in gone if install})
    unresolved = unresolved + list(part["opens"]) + other_unresolved
    keeps = list(part["keeps"])
    dv = snap.driver.kernel_version or snap.driver.libcuda_version
    if dv:
        keeps.append("NVIDIA driver %s" % dv)
    if snap.python.version:
        keeps.append("Python %s (%s)" % (snap.python.version, python))
    steps = list(part["steps"]) + [s for s in extra if s.text not in {x.text for x in part["steps"]}]
    number = {st.text: i for i, st in enumerate(steps, 1)}
    return FixPlan(
        python=python,
        owner=part["owner"],
        target=part["target"],
        changes=tuple(part["changes"]),
        steps=tuple(steps),
        keeps=tuple(keeps),
        why=tuple(part["why"]),
        skipped=tuple(skipped[:8]),
        notes=tuple(dict.fromkeys(part["notes"])),
        blockers=tuple(blockers),
        addresses=tuple(dict.fromkeys(f.rule for f in torch_fs)) if part["target"] else (),
        unresolved=tuple(unresolved),
        automatic=tuple(auto),
        answers=tuple((rule, subject, number[text]) for (rule, subject), text in answers.items() if text in number),
    )


def plan_or_error(snap: Snapshot, runs: Optional[Sequence[RuleRun]] = None) -> Tuple[Optional[FixPlan], Optional[str]]:
    """(plan, None), or (None, why) when no plan could be made: a report must never fail on it."""
    try:
        return make_plan(snap, runs), None
    except Exception as exc:  # noqa: BLE001 - shown in the report as "unknown"
        return None, "%s: %s" % (type(exc).__name__, exc)

