"""Deactivation with a long _CUDAFIX_VARS (issue 18 item 6): this checkout against a baseline.

A parent environment lists N names in _CUDAFIX_VARS (default 60,000 one-letter names, the
longest a single environment string may be on Linux: 128 KiB) plus one real backup.  For each
shell the deactivate.d script of the baseline revision (git show REV:deactivate.d/cudafix.<ext>,
default 2b4064a, the scripts before the fix) and of this checkout are sourced once each, in the
same run; the time of each and the ratio are printed.  A run past --timeout is reported as
"> timeout" (and the ratio as a lower bound).

  python3 bench/restore_many_names.py [--rev 2b4064a] [--n 60000] [--timeout 40]
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
SHELLS = {"bash": (["bash", "--norc", "--noprofile"], "sh"), "zsh": (["zsh", "-f"], "sh"), "dash": (["dash"], "sh"),
          "ash": (["busybox", "sh"], "sh"), "fish": (["fish", "--no-config"], "fish"), "tcsh": (["tcsh", "-f"], "csh")}
SOURCE = {"sh": ". '%s'; echo \"$CUDA_HOME\"", "fish": "source '%s'; echo \"$CUDA_HOME\"", "csh": "source '%s'; echo \"$CUDA_HOME\""}


def time_one(argv, fam, script, env, timeout):
    t = time.monotonic()
    try:
        p = subprocess.run(argv + ["-c", SOURCE[fam] % script], env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    took = time.monotonic() - t
    return took, "ok" if p.stdout == b"/old\n" and p.returncode == 0 else "WRONG: rc=%d %r" % (p.returncode, p.stdout[-40:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="2b4064a")
    ap.add_argument("--n", type=int, default=60000)
    ap.add_argument("--timeout", type=float, default=40.0)
    args = ap.parse_args()
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "_CUDAFIX_VARS": " ".join(["a"] * args.n) + " CUDA_HOME",
           "CUDA_HOME": "/new", "_CUDAFIX_OLD_CUDA_HOME": "s:/old", "_CUDAFIX_NEW_CUDA_HOME": "s:/new"}
    with tempfile.TemporaryDirectory() as tmp:
        print("%d names in _CUDAFIX_VARS; baseline = deactivate.d of %s; timeout %.0f s" % (args.n, args.rev, args.timeout))
        print("%-6s %14s %14s %10s" % ("shell", "baseline s", "this s", "ratio"))
        for name, (argv, fam) in SHELLS.items():
            if shutil.which(argv[0]) is None:
                print("%-6s missing" % name)
                continue
            old = pathlib.Path(tmp) / ("old." + fam)
            old.write_bytes(subprocess.run(["git", "-C", str(REPO), "show", "%s:deactivate.d/cudafix.%s" % (args.rev, fam)],
                                           check=True, capture_output=True).stdout)
            t_old, s_old = time_one(argv, fam, str(old), env, args.timeout)
            t_new, s_new = time_one(argv, fam, str(REPO / "deactivate.d" / ("cudafix." + fam)), env, args.timeout)
            shown_old = "> %.0f" % args.timeout if t_old is None else "%.2f" % t_old
            ratio = (args.timeout if t_old is None else t_old) / t_new if t_new else float("nan")
            print("%-6s %14s %14s %9s%.0fx   %s / %s" % (name, shown_old, "%.2f" % t_new if t_new else "-",
                                                        ">" if t_old is None else " ", ratio, s_old, s_new))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
