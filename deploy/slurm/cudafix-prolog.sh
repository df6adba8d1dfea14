#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/cudafix-prolog.sh): `cudafix check` on this node
# before a job starts there; on an error, drain the node with cudafix's reason and fail the
# prolog (Slurm then requeues the job: https://slurm.schedmd.com/prolog_epilog.html).
#
# The prolog runs as root with an almost empty environment (no PATH, none of the job's
# variables).  Settings come from $CUDAFIX_PROLOG_ENV (default /etc/cudafix/prolog.env), a
# shell fragment owned by root, e.g.:
#     CUDAFIX_PYTHON=/opt/envs/train/bin/python     # the env jobs run in (cudafix installed)
#     CUDAFIX_CHECK_ARGS="--skip nccl-debug-verbose"  # optional: what to check
#     CUDAFIX_PROLOG_TIMEOUT=60                     # optional: seconds before the check counts as "could not run"
#     LD_LIBRARY_PATH=/opt/site/lib                 # what the job environment adds, if any
# It is sourced (as root) only if it and its directory are root's and writable by nobody else,
# and it is not a symbolic link (docs/security.md).
# Root never executes the job's env (issue 36): the env's python runs as the job's user
# (SLURM_JOB_USER, which Slurm sets in the prolog), never as root -- `nobody` when the job is
# root's or no user is known, or CUDAFIX_PROLOG_USER from the settings file.  A Python interpreter
# runs code from its env at start (a .pth line in site-packages, sitecustomize, the cudafix
# package itself), so whoever can write any of it would otherwise get root at every job start;
# as the job's user it runs what that user's job is about to run anyway.  The privileges are
# dropped with setpriv (util-linux) before the env is touched; without setpriv the check cannot
# run (the cannot-run policy below).  `cudafix check` needs no privilege: NVML and the files
# it reads are readable by every user.  The ownership checks below stay, as a second line.
# Exit codes of `cudafix check`: 0 no error, 1 errors (drain).  Anything else -- cudafix could not
# run: exit 2, python cannot import cudafix or crashed, the check timed out, or the env is not
# root's -- drains too (the node cannot be vouched for), unless CUDAFIX_PROLOG_CANNOT_RUN=pass.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
# `python -m` and `-c` import from the current directory first: run from `/` (root's)
cd / || exit 1
uid=$(id -u)
# a file or directory we may trust as root: ours or root's, writable by nobody else, not a link
_trusted() {
    [ -e "$1" ] && ! [ -L "$1" ] || return 1
    # shellcheck disable=SC2046
    set -- $(stat -c '%u %a' "$1" 2>/dev/null)
    { [ "${1:-x}" = 0 ] || [ "${1:-x}" = "$uid" ]; } || return 1
    case ${2:-x} in
        x) return 1 ;;
    esac
    # group or other write bit (%a is octal: the last two digits)
    [ $(( 0$2 & 022 )) -eq 0 ]
}
conf=${CUDAFIX_PROLOG_ENV:-/etc/cudafix/prolog.env}
if [ -f "$conf" ]; then
    if ! _trusted "$conf" || ! _trusted "$(dirname "$conf")"; then
        echo "cudafix-prolog: $conf is not root's, or others can write it or its directory: not sourced; checking with the defaults" >&2
    else
        set -a
        # shellcheck disable=SC1090
        . "$conf"
        set +a
    fi
fi
py=${CUDAFIX_PYTHON:-python3}
# the user the env's python runs as: never root
run_as=${CUDAFIX_PROLOG_USER:-${SLURM_JOB_USER:-nobody}}
case $run_as in ''|-*|*[!A-Za-z0-9._-]*) run_as=nobody ;; esac
ruid=$(id -u "$run_as" 2>/dev/null) || ruid=
if [ -z "$ruid" ] || [ "$ruid" = 0 ]; then
    run_as=nobody
    ruid=$(id -u nobody 2>/dev/null) || ruid=
fi
rgid=$(id -g "$run_as" 2>/dev/null) || rgid=
# as_user CMD...: CMD as $run_as (its own groups), with HOME unset (cudafix's caches then go to
# /tmp/cudafix-<uid>, the user's own); as ourselves when the prolog is not root
as_user() {
    if [ "$uid" != 0 ]; then
        "$@"
    else
        env -u HOME setpriv --reuid="$ruid" --regid="$rgid" --init-groups -- "$@"
    fi
}
node=${SLURMD_NODENAME:-$(hostname)}
limit=${CUDAFIX_PROLOG_TIMEOUT:-60}
case $limit in ''|*[!0-9]*) limit=60 ;; esac
why=
# never run an env another user owns (or can write) as root: its python, the python it links
# to, its bin/ and the env directory itself
case $py in
    /*) pyp=$py ;;
    *) pyp=$(command -v "$py" 2>/dev/null) ;;
esac
rc=2
if [ "$uid" = 0 ] && { [ -z "$ruid" ] || [ -z "$rgid" ] || ! command -v setpriv >/dev/null 2>&1; }; then
    why="cannot drop root to run $py (no setpriv, or no user $run_as): not run as root"
elif [ -z "$pyp" ] || ! [ -x "$pyp" ]; then
    why="$py not found"
    rc=127
else
    for p in "$(readlink -f "$pyp")" "$(dirname "$pyp")" "$(dirname "$(dirname "$pyp")")"; do
        if ! _trusted "$p"; then
            why="$p is not root's, or others can write it: not run as root"
            break
        fi
    done
fi
if [ -z "$why" ]; then
    # shellcheck disable=SC2086
    out=$(as_user timeout -k 5 "$limit" "$pyp" -m cudafix check ${CUDAFIX_CHECK_ARGS:-} --json 2>/dev/null </dev/null)
    rc=$?
    [ "$rc" -eq 0 ] && exit 0
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && why="timed out after ${limit}s"
fi
reason=
if [ "$rc" -eq 1 ]; then
    # errors only when cudafix itself said so: its JSON report.  Exit 1 without one is python's
    # own failure (no cudafix in the env, a broken install), not a finding about the node.
    reason=$(printf '%s' "$out" | as_user timeout -k 5 "$limit" "$pyp" -c '
import json, sys
try:
    doc = json.load(sys.stdin)
except ValueError:
    sys.exit(3)
if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list):
    sys.exit(3)
errs = [f for f in doc["findings"] if isinstance(f, dict) and f.get("severity") == "error"]
f = errs[0] if errs else {"rule": "?", "message": "check failed"}
more = " (+%d more)" % (len(errs) - 1) if len(errs) > 1 else ""
print(("cudafix %s: %s%s" % (f.get("rule"), f.get("message"), more))[:200])
' 2>/dev/null) || reason=
fi
if [ -z "$reason" ]; then
    [ "${CUDAFIX_PROLOG_CANNOT_RUN:-drain}" = pass ] && exit 0
    if [ -z "$why" ]; then
        # shellcheck disable=SC2086
        why=$(as_user timeout -k 5 "$limit" "$pyp" -m cudafix check ${CUDAFIX_CHECK_ARGS:-} 2>&1 >/dev/null </dev/null | tail -n 1 | cut -c1-150)
    fi
    reason="cudafix check could not run (exit $rc): ${why:-$py -m cudafix failed}"
fi
scontrol update nodename="$node" state=drain reason="$reason"
echo "cudafix-prolog: drained $node: $reason" >&2
exit 1
