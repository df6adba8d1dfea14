"""One plan for an env: every finding in, one coherent set of changes out (docs/remedies.md).

Rules state problems; this module decides what to change.  For torch it walks the ranked
candidates of :mod:`cudafix.plans.remedy` and keeps the first whose application to the
snapshot (:mod:`cudafix.plans.simulate`) the rules themselves find clean: no error or warning
of the torch rules (:data:`TORCH_RULES`) and no new finding of any other rule.  So the plan never
proposes a build cudafix would then flag, and applying it re-checks clean by construction.

The plan moves torch with every installed package pinned to it (torchvision, torchaudio, ...;
never adds one), through the manager that owns torch (pip wheel: the env's own interpreter
``-m pip``; conda package: ``conda install -p <prefix>`` with the channels of that era), and
keeps the other findings' commands and shell lines once each.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from cudafix.knowledge import cuda_driver, version_tuple
from cudafix.knowledge.cuda_packages import normalize
from cudafix.knowledge import gpus as kgpus
from cudafix.knowledge import torch_builds as tb
from cudafix.model.findings import ERROR, WARNING, Finding, RuleRun
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
MAX_TRIED = 80  # candidates simulated at most (there are ~60 release x variant rows)
POINTER = "cudafix fix"  # rules point here instead of printing install commands themselves


@record(frozen=True)
class Change:
    """One package moved by the plan."""

    name: str
    before: Optional[str]
    after: str


@record(frozen=True)
class Plan:
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

    @property
    def nothing_to_do(self) -> bool:
        return not self.steps and not self.blockers and not self.unresolved

    @property
    def runnable(self) -> Tuple[Step, ...]:
        return tuple(s for s in self.steps if s.argv)

    def to_dict(self) -> Dict[str, Any]:
        d = dataclasses.asdict(self)
        d["nothing_to_do"] = self.nothing_to_do
        return d


# -- helpers --------------------------------------------------------------------------------


def _variant_of(t) -> Optional[str]:
    if t is None:
        return None
    if t.cuda:
        return "cu" + t.cuda.replace(".", "")
    if t.hip:
        return None
    v = t.version or t.dist.version or ""
    return "cpu" if (t.version and not t.cuda) or "+cpu" in v else None


def _ccs(snap: Snapshot) -> List[str]:
    out: List[str] = []
    for g in snap.visible_gpus():
        cc = g.compute_capability or kgpus.compute_capability(g.name)
        if cc and cc not in out:
            out.append(cc)
    return out


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


def _companions_for(snap: Snapshot, torch_v: str) -> Tuple[Dict[str, str], Optional[str]]:
    """{name: version built for torch_v}, or (partial, why) when one has no known release."""
    want: Dict[str, str] = {}
    for name, _have in installed_companions(snap):
        v = tb.companion_for(name, torch_v)
        if v is None:
            return want, "%s has no release for torch %s that cudafix knows of" % (name, torch_v)
        want[name] = v
    return want, None


# -- choosing the target ----------------------------------------------------------------------


def _clean(before: Sequence[RuleRun], after: Sequence[RuleRun]) -> List[str]:
    """Rules that would still (or newly) flag the simulated state: [] means the target is clean."""
    bad = sorted({f.rule for f in _serious(after, TORCH_RULES)})
    old = {(f.rule, f.subject) for f in _serious(before) if f.rule not in TORCH_RULES}
    new = sorted({f.rule for f in _serious(after) if f.rule not in TORCH_RULES + CONSEQUENCES and (f.rule, f.subject) not in old})
    return bad + new


def _consequences(before: Sequence[RuleRun], after: Sequence[RuleRun]) -> List[str]:
    old = {(f.rule, f.subject) for f in _serious(before)}
    return ["after the change: %s: %s — %s" % (f.rule, f.message, f.fix.summary if f.fix else "")
            for f in _serious(after, CONSEQUENCES) if (f.rule, f.subject) not in old]


def _choose(snap: Snapshot, runs: Sequence[RuleRun]):
    """(candidate, companions, uninstall, skipped, why-not) — the first clean target, best first."""
    t = snap.primary_torch
    dcuda, dver = _driver(snap)
    ccs = _ccs(snap)
    driver_present = bool(snap.driver.kernel_version or snap.driver.libcuda_path or "driver" in snap.assumed)
    want_cuda = bool(snap.visible_gpus()) and driver_present
    py = snap.python.version or ""
    cur = plain_version(t.version or t.dist.version) if t else None
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
    skipped: List[str] = []
    owner = owner_of(snap)
    for c in cands[:MAX_TRIED]:
        comps, why = _companions_for(snap, c.torch)
        if why:
            skipped.append("%s: %s" % (c.label, why))
            continue
        uninstall = stale_nvidia(snap, c.variant)
        sim = simulate.apply_target(snap, c.torch, c.variant, comps, uninstall, owner=owner)
        after = _run(sim, ids)
        flagged = _clean(runs, after)
        if not flagged:
            return c, comps, uninstall, skipped + _consequences(runs, after)
        skipped.append("%s: cudafix would flag it (%s)" % (c.label, ", ".join(flagged)))
    return None, {}, [], skipped


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
        if cuda_driver.cuda_int(c.cuda or "0") <= dcuda:
            return ("no official torch build passes cudafix's own checks on this machine (see the builds skipped above)", None)
        text = "upgrade the NVIDIA driver to >= %s (CUDA %s, for %s): no official build fits this driver, every GPU and Python %s" % (
            need or "?", c.cuda, c.label, snap.python.version or "?")
        return text, Step(DRIVER, text, root=True, why="a driver upgrade needs root")
    return ("no official torch build fits this driver, GPU(s) %s and Python %s" % (", ".join(ccs) or "?", snap.python.version or "?"), None)


# -- the plan ---------------------------------------------------------------------------------


def _ext_package(snap: Snapshot, f: Finding) -> Optional[str]:
    """The distribution an ext-* finding is about (its subject is the module's file name)."""
    if not f.rule.startswith("ext-"):
        return None
    for m in snap.extensions.modules:
        if os.path.basename(m.path) == f.subject and m.package:
            return normalize(m.package)
    return None


def _other_steps(findings: Sequence[Finding], snap: Snapshot, changed: Set[str] = frozenset()
                 ) -> Tuple[List[Step], List[str], List[str]]:
    """Steps of the findings the torch change does not answer (deduped), the safe fixes cudafix
    applies by itself, and the findings left with no step.  An extension module of a package the
    plan already reinstalls (torchvision moving to the build that pairs with the target torch) is
    answered by that change: its own rebuild step would undo the plan."""
    steps: List[Step] = []
    seen = set()
    auto: List[str] = []
    unresolved: List[str] = []
    for f in findings:
        if f.rule in TORCH_RULES or _ext_package(snap, f) in changed:
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
        produced = False
        for op in fix.env.ops:
            line = env_line(op)
            if line and line not in seen:
                seen.add(line)
                steps.append(Step(SHELL, line, shell="sh, bash, zsh", why="%s: %s" % (f.rule, fix.summary)))
                produced = True
        for cmd in fix.commands:
            if cmd.startswith(POINTER):
                continue
            produced = True
            if cmd in seen:
                continue
            seen.add(cmd)
            kind = SHELL if cmd.startswith(("export ", "unset ")) else OTHER
            steps.append(Step(kind, cmd, shell="sh, bash, zsh" if kind == SHELL else "", root=cmd.startswith("sudo "),
                              why="%s: %s" % (f.rule, fix.summary)))
        if not produced:
            unresolved.append("%s: %s (%s)" % (f.rule, f.message, fix.summary))
    return steps, auto, unresolved


def make_plan(snap: Snapshot, runs: Optional[Sequence[RuleRun]] = None) -> Plan:
    """The one plan for ``snap`` (its findings from ``runs``, or a fresh run of every rule)."""
    if runs is None:
        from cudafix import rules

        runs = rules.run(snap)
    findings = _serious(runs)
    torch_fs = [f for f in findings if f.rule in TORCH_RULES]
    unresolved: List[str] = []
    python = snap.python.executable or "python"
    t = snap.primary_torch
    keeps: List[str] = []
    dv = snap.driver.kernel_version or snap.driver.libcuda_version
    why: List[str] = []
    notes: List[str] = []
    steps: List[Step] = []
    changes: List[Change] = []
    blockers: List[str] = []
    skipped: List[str] = []
    target = None
    owner = ""
    if torch_fs and t is None:
        unresolved = ["%s: %s" % (f.rule, f.message) for f in torch_fs] + unresolved
    elif torch_fs:
        c, comps, uninstall, skipped = _choose(snap, runs)
        after_notes = [k for k in skipped if k.startswith("after the change: ")]
        skipped = [k for k in skipped if not k.startswith("after the change: ")]
        notes.extend(after_notes)
        if c is None:
            text, _step = _blocker(snap)
            blockers.append(text)
            unresolved = ["%s: %s" % (f.rule, f.message) for f in torch_fs] + unresolved
        else:
            owner = owner_of(snap)
            cur_label = t.version or t.dist.version
            torch_changes = not (plain_version(cur_label) == c.torch and _variant_of(t) == c.variant)
            target = c.label
            if torch_changes:
                changes.append(Change("torch", cur_label, "%s+%s" % (c.torch, c.variant)))
            else:
                keeps.append("torch %s (it fits: only what is paired with it changes)" % cur_label)
            for name, have in installed_companions(snap):
                want = comps[name]
                # same release and variant already: nothing to change
                tv_var = None
                if name == "torchvision":
                    tvb = snap.torchvision[0]
                    tv_var = "cu" + tvb.cuda.replace(".", "") if tvb.cuda else ("cpu" if "+cpu" in (have or "") else None)
                if plain_version(have) == want and (name != "torchvision" or tv_var == c.variant):
                    comps = dict(comps)
                    comps.pop(name)
                    keeps.append("%s %s (built for %s)" % (name, have, c.label))
                    continue
                changes.append(Change(name, have, "%s+%s" % (want, c.variant) if owner == "pip" else want))
            for name in uninstall:
                changes.append(Change(name, next((d.version for d in snap.toolkits.nvidia_wheels if d.name == name), None), "(removed)"))
            if owner == "conda":
                pkg_steps, n = conda_steps(snap, c.torch, c.variant, comps)
            else:
                pkg_steps, n = pip_steps(snap, c.torch, c.variant, comps, torch_changes, uninstall)
            steps.extend(pkg_steps)
            notes.extend(n)
            notes.extend(c.notes)
            dist = ("the installed version in another CUDA variant" if c.distance == 0 and torch_changes
                    else "no torch change" if not torch_changes
                    else "%d release%s from the installed one (the nearest that fits)" % (c.distance, "" if c.distance == 1 else "s"))
            why.append("chosen: %s — %s; %s" % (c.label, dist, {
                remedy.NATIVE: "runs natively on this driver (no minor-version compatibility needed)",
                remedy.NO_DRIVER: "the driver is unknown, so it does not narrow the choice",
            }.get(c.mode, c.mode)))
            why.extend(c.evidence)
            why.append("re-checked: with this target applied to the snapshot, cudafix's rules report no error or warning about torch")
    other_steps, auto, other_unresolved = _other_steps(findings, snap, {normalize(c.name) for c in changes})
    unresolved = unresolved + other_unresolved
    if dv:
        keeps.append("NVIDIA driver %s" % dv)
    if snap.python.version:
        keeps.append("Python %s (%s)" % (snap.python.version, python))
    steps.extend(other_steps)
    return Plan(
        python=python,
        owner=owner,
        target=target,
        changes=tuple(changes),
        steps=tuple(steps),
        keeps=tuple(keeps),
        why=tuple(why),
        skipped=tuple(skipped[:8]),
        notes=tuple(dict.fromkeys(notes)),
        blockers=tuple(blockers),
        addresses=tuple(dict.fromkeys(f.rule for f in torch_fs)) if target else (),
        unresolved=tuple(unresolved),
        automatic=tuple(auto),
    )


def plan_or_error(snap: Snapshot, runs: Optional[Sequence[RuleRun]] = None) -> Tuple[Optional[Plan], Optional[str]]:
    """(plan, None), or (None, why) when no plan could be made: a report must never fail on it."""
    try:
        return make_plan(snap, runs), None
    except Exception as exc:  # noqa: BLE001 - shown in the report as "unknown"
        return None, "%s: %s" % (type(exc).__name__, exc)

