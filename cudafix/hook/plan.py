"""The startup hook's cold path: snapshot -> rules -> the in-process plan -> the per-env cache.

At ``import torch`` the hook's check (cudafix/hook/runtime.py) compares a fingerprint with the
cache this module writes.  When the cache has no fresh entry, it calls :func:`cold` -- never at
interpreter start: interpreters that never import torch pay only the finder's installation, and
torch's own import (seconds) dwarfs the recompute (docs/benchmarks.md).

The recompute never imports torch, never calls cuInit, never touches NVML and never loads
libcuda (``use_nvml=False, call_driver_api=False``: loading the loader's libcuda.so.1 here would
pin a wrong forward-compat copy before the preload that repairs it).

What an entry holds (a plan, applied by the hook, filtered at start by CUDAFIX_MODE/SKIP):
- env corrections: the ops of *safe* (``auto``) fixes whose scope includes the process, on
  variables read after start (never LD_LIBRARY_PATH / LD_PRELOAD: the loader read them at exec);
- preloads: the ``Preload`` entries of safe fixes, loaded by absolute path at ``import torch``;
- warnings: one line per error/warning finding of a runtime-scoped rule (never build-time or distributed ones), in two forms (corrected here / not corrected);
  a finding repaired entirely by setting variables is quiet when corrected (docs/hook.md).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple

from cudafix.hook import cache as hookcache
from cudafix.model.findings import RUNTIME, Finding
from cudafix.store import safefs
from cudafix.model.fixes import SET
from cudafix.plans.environment import SafeFix, environment_plan

MAX_ENTRIES = 16  # fingerprints remembered per env (e.g. two shells with different PATHs)
WARN_SEVERITIES = ("error", "warning")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _in_process_ops(sf: SafeFix) -> List[Tuple[str, str, str, Optional[str]]]:
    return [(sf.finding.rule, op.op, op.name, op.value) for op in sf.process_ops]


def _preloads(sf: SafeFix, ld_library_path: Optional[str] = None) -> List[Tuple[str, str, str]]:
    # never one from a place others can write or the current directory (docs/security.md)
    if not sf.preloads:
        return []
    owners = safefs.env_owners(sys.prefix)
    return [(sf.finding.rule, p.soname, p.path) for p in sf.preloads
            if safefs.preload_refusal(p.path, ld_library_path, owners) is None]


def _describe(ops: Sequence[Tuple[str, str, str, Optional[str]]], preloads: Sequence[Tuple[str, str, str]]) -> str:
    parts = []
    for _, op, name, value in ops:
        parts.append("%s=%s" % (name, value) if op == SET else "%s %s%s" % (op, name, " " + value if value else ""))
    for _, soname, path in preloads:
        parts.append("preloaded %s" % path)
    return "; ".join(parts)


def warning_lines(f: Finding, ops, preloads) -> Tuple[bool, str, str]:
    """(quiet when corrected, line when corrected, line when not) for one finding."""
    msg = _one_line(f.message).rstrip(".")
    head = "cudafix [%s]: %s" % (f.rule, msg)
    done = _describe(ops, preloads)
    fixed = "%s. Corrected for this process (%s). Run `cudafix status` for the lasting fix." % (head, done) if done else ""
    advice = _one_line(f.fix.summary).rstrip(".") if f.fix and f.fix.summary else ""
    unfixed = "%s.%s Run `cudafix status`." % (head, (" Fix: %s." % advice) if advice else "")
    quiet = bool(ops) and not preloads and len(ops) == len(f.fix.env.ops if f.fix else ())
    return quiet, fixed or unfixed, unfixed


def build_entry(findings: Iterable[Finding], environ: Mapping[str, str], syspath_part: Sequence[str],
                stats: Sequence[Tuple[str, str]] = (), machine: Optional[Sequence[str]] = None) -> hookcache.Entry:
    """The cache entry (plan + fingerprints) for these findings in this environment."""
    ops: List[Tuple[str, str, str, Optional[str]]] = []
    preloads: List[Tuple[str, str, str]] = []
    warns: List[Tuple[str, bool, str, str]] = []
    seen_paths = set()
    for sf in environment_plan(findings).fixes:  # the process part of the one environment plan
        f = sf.finding
        f_ops = _in_process_ops(sf)
        f_pre = [p for p in _preloads(sf, environ.get("LD_LIBRARY_PATH")) if p[2] not in seen_paths]
        seen_paths.update(p[2] for p in f_pre)
        ops.extend(f_ops)
        preloads.extend(f_pre)
        # The hook speaks only about this process: build-time findings (a toolkit that does not
        # fit torch) matter for extension builds, so activation / status / check report them.
        if f.severity in WARN_SEVERITIES and getattr(f, "scope", RUNTIME) == RUNTIME:
            quiet, fixed, unfixed = warning_lines(f, f_ops, f_pre)
            warns.append((f.rule, quiet, fixed, unfixed))
    machine = list(hookcache.machine_part() if machine is None else machine)
    fp = hookcache.fingerprint(environ, syspath_part, machine)
    after = dict(environ)
    for _, op, name, value in ops:
        try:
            hookcache.apply_op(after, op, name, value)
        except Exception:  # noqa: BLE001 - the same op fails the same way in the hook
            pass
    post_fp = hookcache.fingerprint(after, syspath_part, machine)
    return hookcache.Entry(fp, post_fp, stats=tuple(stats), ops=tuple(ops), preloads=tuple(preloads), warns=tuple(warns))


def depends_on(snapshot, preloads: Sequence[Tuple[str, str, str]] = ()) -> List[Tuple[str, str]]:
    """Files and dirs (beyond the fingerprint) whose change makes an entry stale."""
    paths: List[str] = []
    torch = snapshot.primary_torch
    if torch is not None and torch.package_dir:
        paths.append(os.path.join(torch.package_dir, "version.py"))
    paths.extend(p for _, _, p in preloads)
    for d in snapshot.libraries.ld_library_path or ():
        if d and os.path.isabs(d):
            paths.append(d)  # a library dropped into or removed from an LD_LIBRARY_PATH dir
    for r in snapshot.libraries.resolutions:
        if r.resolved and r.expected and r.resolved != r.expected:
            paths.append(r.resolved)
    out, seen = [], set()
    for p in paths:
        if p not in seen:
            seen.add(p)
            out.append((p, safefs.stat_sig(p)))
    return out


def snapshot_for_hook(environ: Mapping[str, str]):
    from cudafix.store import paths
    from cudafix.probes import take_snapshot

    # No extension scan: its problems are install-time ones (status, check, activation), and
    # naming a missing symbol may run c++filt, which the user's process must never spawn.
    return take_snapshot(env=environ, cache_dir=paths.env_cache_dir(sys.prefix, environ),
                         use_nvml=False, call_driver_api=False, scan_extensions=False)


def compute(environ: Optional[Mapping[str, str]] = None, syspath_part: Optional[Sequence[str]] = None,
            snapshot=None) -> hookcache.Entry:
    """Probe, run the rules, and build the entry for the current interpreter."""
    from cudafix import rules

    environ = os.environ if environ is None else environ
    if syspath_part is None:
        syspath_part = hookcache.path_part()
    snap = snapshot_for_hook(environ) if snapshot is None else snapshot
    # ext-* findings are about modules this process may never import, found by a scan the hook's
    # own snapshot skips: status, check and activation report them, `import torch` does not.
    found = [f for f in rules.findings(rules.run(snap)) if not f.rule.startswith("ext-")]
    entry = build_entry(found, environ, syspath_part)
    return dataclasses.replace(entry, stats=tuple(depends_on(snap, entry.preloads)))


# -- the cache file -------------------------------------------------------------------------


def write_entry(cache_path: str, entry: hookcache.Entry) -> bool:
    """Put ``entry`` first in the cache file, atomically (tempfile + os.replace).

    Concurrent writers each replace the whole file: the file is always one writer's complete
    output (an entry of a racing writer may be lost, never mixed).  False when the cache path
    fails cudafix.store.safefs's checks or is not writable: then nothing is cached and nothing fails.
    """
    old, _ = hookcache.read_cache(cache_path)
    entries = [entry] + [e for e in old if e.fp != entry.fp][: MAX_ENTRIES - 1]
    return safefs.write_private(cache_path, hookcache.dump_entries(entries))


def cold(cache_path: Optional[str], syspath_part: Sequence[str], environ: Mapping[str, str]) -> Tuple[hookcache.Entry, str]:
    """Called by the hook at ``import torch`` when the cache had no fresh entry: the entry, and
    the line CUDAFIX_DEBUG=1 prints about it.  ``environ``: the environment the check keyed on
    (the loader's variables as at exec: hook/cache.py keyed)."""
    t0 = time.perf_counter()
    entry = compute(environ, syspath_part)
    ms = (time.perf_counter() - t0) * 1000
    wrote = write_entry(cache_path, entry) if cache_path else False
    return entry, ("checked the CUDA stack in %.0f ms (%d env corrections, %d preloads, %d findings to report); %s"
                   % (ms, len(entry.ops), len(entry.preloads), len(entry.warns),
                      "cached in %s" % cache_path if wrote else "cache not writable: nothing cached"))
