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
#     LD_LIBRARY_PATH=/opt/site/lib                 # what the job environment adds, if any
# Exit codes of `cudafix check`: 0 no error, 1 errors (drain), 2 cudafix could not run (drain:
# the node cannot be vouched for; set CUDAFIX_PROLOG_CANNOT_RUN=pass to let such nodes run).
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
conf=${CUDAFIX_PROLOG_ENV:-/etc/cudafix/prolog.env}
if [ -f "$conf" ]; then
    owner=$(stat -c %u "$conf" 2>/dev/null)
    if [ "$owner" != 0 ]; then
        echo "cudafix-prolog: $conf is not owned by root: not sourced; checking with the defaults" >&2
    else
        set -a
        # shellcheck disable=SC1090
        . "$conf"
        set +a
    fi
fi
py=${CUDAFIX_PYTHON:-python3}
node=${SLURMD_NODENAME:-$(hostname)}
# shellcheck disable=SC2086
out=$("$py" -m cudafix check ${CUDAFIX_CHECK_ARGS:-} --json 2>/dev/null)
rc=$?
[ "$rc" -eq 0 ] && exit 0
if [ "$rc" -eq 1 ]; then
    reason=$(printf '%s' "$out" | "$py" -c '
import json, sys
doc = json.load(sys.stdin)
errs = [f for f in doc.get("findings", []) if f.get("severity") == "error"]
f = errs[0] if errs else {"rule": "?", "message": "check failed"}
more = " (+%d more)" % (len(errs) - 1) if len(errs) > 1 else ""
print(("cudafix %s: %s%s" % (f["rule"], f["message"], more))[:200])
' 2>/dev/null) || reason="cudafix check: errors (see cudafix check on $node)"
else
    [ "${CUDAFIX_PROLOG_CANNOT_RUN:-drain}" = pass ] && exit 0
    # shellcheck disable=SC2086
    why=$("$py" -m cudafix check ${CUDAFIX_CHECK_ARGS:-} 2>&1 >/dev/null | tail -n 1 | cut -c1-150)
    reason="cudafix check could not run (exit $rc): ${why:-$py -m cudafix failed}"
fi
scontrol update nodename="$node" state=drain reason="$reason"
echo "cudafix-prolog: drained $node: $reason" >&2
exit 1
