"""`cudafix warm` at run time: the child that fills the driver's JIT cache, the detached background
job activation starts, and its lock.  What to warm, and the state, are cudafix/warm/plan.py's."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Dict, Mapping, Optional, Sequence

from cudafix.knowledge import knobs
from cudafix.model.snapshot import Snapshot
from cudafix.store import runner, trustload
from cudafix.store.safefs import env_owners, open_private, open_private_file
from cudafix.warm.plan import (
    LOCK_FILE,
    LOG_FILE,
    WarmTarget,
    cache_path,
    dir_bytes,
    is_warm,
    child_env,
    load_spec,
    child_spec,
    load_state,
    TRIGGER_RULES,
    state_key,
)
from cudafix.warm.plan import targets as warm_targets

CHILD = r"""
import ctypes, json, os, sys, time
spec = json.loads(sys.argv[1])
t0 = time.perf_counter()
def say(**kw):
    sys.stdout.write(json.dumps(kw) + "\n"); sys.stdout.flush()
import importlib.util
_s = importlib.util.spec_from_file_location("_cudafix_trustload", spec["trustload"])
trustload = importlib.util.module_from_spec(_s)
_s.loader.exec_module(trustload)
if spec["import_torch"]:
    import torch  # torch loads its libraries as the program does
    say(step="import torch", t=time.perf_counter() - t0)
for m in spec["libs"]:
    p = m["path"]
    try:
        trustload.load_opened(m["real"], m["dev"], m["ino"], os.RTLD_NOW | os.RTLD_GLOBAL)
        say(step="dlopen", path=p, t=time.perf_counter() - t0)
    except OSError as exc:
        say(step="dlopen-failed", path=p, error=str(exc))
rc = {}
for soname in spec["cudarts"]:
    rt, why = trustload.load_soname(soname, os.environ.get("LD_LIBRARY_PATH"), spec["owners"])
    if rt is None:
        rc[soname] = "cannot load: %s" % why
        continue
    t1 = time.perf_counter()
    rc[soname] = rt.cudaFree(ctypes.c_void_p(0))
    say(step="cudaFree", soname=soname, rc=rc[soname], seconds=time.perf_counter() - t1)
say(step="done", rc=rc, seconds=time.perf_counter() - t0)
"""


def run_child(python: str, target: WarmTarget, snap: Snapshot, env: Mapping[str, str], progress=None,
              timeout: float = 3600.0) -> Dict[str, object]:
    """Warm one target in a child; ``progress(fraction, elapsed, estimate, cache_added)`` is
    called a few times a second (fraction and estimate None when the PTX size is not known).  Returns the child's last report plus measured numbers."""
    spec = child_spec(target, snap)
    # checked again just before the load (the plan's check may be minutes old) by the trusted
    # loader, which hands the child the real path it resolved ONCE and the opened file's identity:
    # the child loads that file or nothing (a link flipped after the check cannot redirect it)
    owners = env_owners(snap.python.prefix) if snap.python.prefix else ()
    checked = [(p,) + load_spec(p, owners) for p in spec["libs"]]  # type: ignore[union-attr]
    spec["libs"] = [s for _, s, why in checked if why is None]
    refused = [(p, why) for p, _, why in checked if why is not None]
    spec["owners"] = list(owners)
    spec["trustload"] = trustload.__file__
    cenv = child_env(target, env)
    cpath = cache_path(cenv)
    before = dir_bytes(cpath)
    est = max(target.estimate_s(), 0.5) if target.size_known else None
    start = time.monotonic()

    def tick(el: float) -> None:
        if progress is not None:
            progress(min(el / est, 0.99) if est else None, el, est, dir_bytes(cpath) - before)

    # the trusted runner: from / (never the caller's dir), stdin closed, its own process group
    # killed on the timeout / SIGTERM / SIGINT, output bounded (torch's warnings drained as they
    # come).  Not -I: the child imports the torch the user's programs import (PYTHONPATH too).
    try:
        res = runner.run([python, "-c", CHILD, json.dumps(spec)], timeout, env=cenv, tick=tick, owners=owners)
        out, err, rc = res.stdout, res.stderr, res.returncode
    except OSError as exc:
        out, err, rc = b"", str(exc).encode(), 127
    el = time.monotonic() - start
    steps = []
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            steps.append(json.loads(line))
        except ValueError:
            continue
    done = steps[-1] if steps and steps[-1].get("step") == "done" else None
    ok = rc == 0 and done is not None and all(v == 0 for v in (done.get("rc") or {}).values()) and bool(done.get("rc"))
    failed = [s for s in steps if s.get("step") == "dlopen-failed"]
    result: Dict[str, object] = {"ok": ok and not failed, "seconds": round(el, 3), "cache_added": dir_bytes(cpath) - before,
                                 "cache_path": cpath, "steps": steps, "rc": rc}
    if not ok:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        result["error"] = lines[-1] if lines else "child exited with %s" % rc
    if failed:
        result["error"] = "; ".join("%s: %s" % (os.path.basename(s["path"]), s.get("error")) for s in failed)
    if refused:  # never recorded warm: the module was not loaded
        result["ok"] = False
        result["skipped"] = [{"path": p, "why": why} for p, why in refused]
        result["error"] = "; ".join(["%s: %s" % (p, why) for p, why in refused] + ([str(result["error"])] if result.get("error") else []))
    if progress is not None:
        progress(1.0, el, est, result["cache_added"])
    return result


def start_background(snap: Snapshot, finding_rules: Sequence[str], env: Mapping[str, str], cache_dir: str,
                     python: Optional[str] = None) -> Optional[str]:
    """Start `cudafix warm --background` detached and niced when PTX JIT applies and some target
    is not warm yet for this env + GPU arch + driver.  Returns the log path, or None (nothing to do)."""
    if TRIGGER_RULES.isdisjoint(finding_rules) or knobs.flag(env, "CUDAFIX_NO_WARM"):
        return None
    targets = warm_targets(snap)
    state = load_state(cache_dir)
    cold = [t for t in targets if not all(is_warm(state, state_key(snap, t.cc, env), t, env).get(m.path) for m in t.modules if m.warmable)]
    if not cold or not any(m.warmable for t in cold for m in t.modules):
        return None
    log = os.path.join(cache_dir, LOG_FILE)
    # the env's cache dir as the one trust check has it (ours, 0700, no link of another user's
    # on the way), the log a regular file of ours: with HOME unset it is /tmp/cudafix-<uid>, where
    # another user may have planted links (docs/security.md).  Otherwise no background warm.
    fd, _ = open_private(log)
    if fd is None:
        return None
    try:  # the trusted runner, detached: from / (`-m` imports from the cwd: never the activating shell's)
        runner.spawn_detached([python or sys.executable, "-m", "cudafix", "warm", "--background"], dict(env), fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    return log


def take_lock(cache_dir: str):
    """An exclusive, non-blocking lock on the env's warm.lock; None when it cannot be had."""
    return take_lock_why(cache_dir)[0]


def take_lock_why(cache_dir: str):
    """(lock, None): an exclusive, non-blocking lock on the env's warm.lock; (None, why) when
    another warm of ours holds it, or the lock cannot be a private file of ours (safefs:
    another user's link or file there is never followed, opened or waited for)."""
    import fcntl

    fh, why = open_private_file(os.path.join(cache_dir, LOCK_FILE))
    if fh is None:
        return None, "%s cannot be used: %s" % (LOCK_FILE, why)
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None, "another warm holds %s" % LOCK_FILE
    return fh, None
