"""POSIX sh renderer: bash, zsh, dash, busybox ash (strict POSIX; `shellcheck -s sh` clean).

zsh sources conda's .sh scripts in zsh mode, so the code never relies on word splitting or
globbing of unquoted expansions: lists are walked with ${x%% *} / ${x#* }.
"""

from __future__ import annotations

from typing import Dict, List

from cudafix.knowledge import knobs
from cudafix.activation.plan import CACHE_FORMAT, Guard, ActivationPlan, encode_state, managed_words, names_of, one_line

EXT = "sh"


def quote(s: str) -> str:
    """Single-quote for POSIX sh: everything literal; a ' becomes '\\''."""
    return "'" + s.replace("'", "'\\''") + "'"


def _state_expr(name: str) -> str:
    # "" when unset, "s:<value>" when set (empty included)
    return "${%s+s:}${%s-}" % (name, name)


RESTORE = r"""# restore what a previous cudafix activation changed (a value the user changed is kept); only
# the variables cudafix manages, whatever _CUDAFIX_VARS lists (docs/security.md)
if [ -n "${_CUDAFIX_VARS+s}" ]; then
  for _cudafix_n in @MANAGED@; do
    case " $_CUDAFIX_VARS " in
      *" $_cudafix_n "*) ;;
      *) continue ;;
    esac
    _cudafix_o='' _cudafix_w='' _cudafix_c=''
    eval "_cudafix_o=\${_CUDAFIX_OLD_$_cudafix_n-} _cudafix_w=\${_CUDAFIX_NEW_$_cudafix_n-} _cudafix_c=\${$_cudafix_n+s:}\${$_cudafix_n-}"
    [ -n "$_cudafix_c" ] || _cudafix_c=u
    if [ -n "$_cudafix_o" ] && [ "$_cudafix_c" = "$_cudafix_w" ]; then
      case $_cudafix_o in
        s:*) eval "export $_cudafix_n=\"\${_cudafix_o#s:}\"" ;;
        *) unset "$_cudafix_n" ;;
      esac
    fi
    unset "_CUDAFIX_OLD_$_cudafix_n" "_CUDAFIX_NEW_$_cudafix_n"
  done
  unset _CUDAFIX_VARS _cudafix_n _cudafix_o _cudafix_w _cudafix_c
fi
""".replace("@MANAGED@", managed_words())


def restore() -> str:
    return RESTORE


def apply(plan: ActivationPlan) -> str:
    """Code that applies a plan (the previous activation, if any, already restored)."""
    out: List[str] = []
    for name, value in plan.changes:
        out.append('_cudafix_s=%s' % _state_expr(name))
        out.append('export _CUDAFIX_OLD_%s="${_cudafix_s:-u}"' % name)
        if value is None:
            out.append("unset %s" % name)
        else:
            out.append("export %s=%s" % (name, quote(value)))
        out.append("export _CUDAFIX_NEW_%s=%s" % (name, quote(encode_state(value))))
    if plan.changes:
        out.append("export _CUDAFIX_VARS=%s" % quote(names_of(plan.changes)))
        out.append("unset _cudafix_s")
    if plan.summary:
        out.append(_unless_quiet("printf '%%s\\n' %s >&2" % quote(one_line(plan.summary))))
    return "".join(line + "\n" for line in out)


def _unless_quiet(command: str) -> str:
    """Run `command` unless CUDAFIX_QUIET is on (the one truthiness rule: knowledge/knobs.py)."""
    return "case ${CUDAFIX_QUIET-} in %s) %s ;; esac" % (knobs.sh_off_patterns(), command)


def activate(plan: ActivationPlan) -> str:
    """What `cudafix shell --shell sh --activate` prints (self-contained, for eval)."""
    return restore() + apply(plan) + ":\n"


def deactivate() -> str:
    return restore() + ":\n"


def skipped(reason: str) -> str:
    return _unless_quiet("printf '%%s\\n' %s >&2" % quote(one_line("cudafix: skipped (%s)" % reason))) + "\n"


def cache(guard: Guard, plan: ActivationPlan, version: str) -> str:
    """The cache file: sourced by the static activate script with $_cudafix_f = its own path."""
    conds = ['[ "${_cudafix_fmt-}" = %s ]' % CACHE_FORMAT]
    for name, value in guard.values:
        if value is None:
            conds.append('[ -z "${%s+s:}" ]' % name)
        else:
            conds.append('[ "%s" = %s ]' % (_state_expr(name), quote("s:" + value)))
    for path in guard.newer:
        conds.append("[ -e %s ] && ! [ %s -nt \"$_cudafix_f\" ]" % (quote(path), quote(path)))
    for path in guard.absent:
        conds.append("! [ -e %s ] && ! [ -L %s ]" % (quote(path), quote(path)))
    return (
        "# cudafix %s activation cache (generated; safe to delete). See docs/activation.md.\n"
        "# sourced by activate.d/cudafix.sh, which sets _cudafix_f and _cudafix_fmt\n"
        "# shellcheck shell=sh disable=SC2154,SC2016\n"
        "if %s; then\n"
        "_cudafix_fresh=1\n"
        "%s"
        "fi\n" % (version.replace("\n", " "), " \\\n  && ".join(conds), apply(plan))
    )


def _python_call() -> str:
    # `-m` puts the current directory first on sys.path (and an empty PYTHONPATH entry names it
    # too): a cudafix/ planted in /tmp or a shared project directory would run and be eval'd.
    # /bin/sh (no rc files, no zsh chpwd hooks whose output would land in the eval) changes to
    # `/` (root's) first; -I would also drop PYTHONPATH and the user site, which the cold path's
    # analysis must see as the user's programs do, and -P needs Python 3.11.  stdin /dev/null: a
    # PYTHONINSPECT in the environment never waits at a prompt.  docs/security.md.
    return ("/bin/sh -c 'cd / && exec \"$0\" -m cudafix shell --shell sh --activate --write-cache </dev/null 2>/dev/null'"
            ' "$CONDA_PREFIX/bin/python"')


def static_activate() -> str:
    """activate.d/cudafix.sh"""
    return (
        "# cudafix conda activation hook: POSIX sh (bash, zsh, dash, ash).  Generated by\n"
        "# cudafix/activation/shells/sh.py; docs/activation.md explains it.  Fast path: a fresh per-user cache\n"
        "# decided with builtins only.  Cold path: the env's own python computes and caches.\n"
        "# shellcheck shell=sh\n"
        + RESTORE
        + "case ${CUDAFIX_DISABLE-} in " + knobs.sh_off_patterns() + ") _cudafix_on=1 ;; *) _cudafix_on= ;; esac\n"
        + r"""if [ -n "$_cudafix_on" ] && [ -n "${CONDA_PREFIX-}" ]; then
  _cudafix_fresh=
  _cudafix_f=
  case ${XDG_CACHE_HOME-} in
    /*) _cudafix_d=$XDG_CACHE_HOME/cudafix/activation ;;
    *) case ${HOME-} in
         /*) _cudafix_d=$HOME/.cache/cudafix/activation ;;
         *) _cudafix_d= ;;
       esac ;;
  esac
  case $CONDA_PREFIX in
    *//*|*/./*|*/../*|*/.|*/..) ;;
    /*) [ -z "$_cudafix_d" ] || _cudafix_f=$_cudafix_d$CONDA_PREFIX.cudafix/activate.sh ;;
  esac
  # source the cache only if it is ours: a regular file, owned by us, in directories owned by us.
  # (test -O is not in POSIX but in every shell conda sources .sh scripts with: bash, zsh, dash,
  # busybox ash; a shell without it fails the test, which only means the cold path.)
  # shellcheck disable=SC3067
  if [ -n "$_cudafix_f" ] && [ -f "$_cudafix_f" ] && ! [ -L "$_cudafix_f" ] && [ -O "$_cudafix_f" ] \
     && [ -O "${_cudafix_f%/*}" ] && ! [ -L "${_cudafix_f%/*}" ] && [ -O "$_cudafix_d" ]; then
    _cudafix_fmt=""" + CACHE_FORMAT + r"""
    # shellcheck source=/dev/null
    . "$_cudafix_f"
  fi
  if [ -z "$_cudafix_fresh" ]; then
    # shellcheck disable=SC2016
    if [ -x "$CONDA_PREFIX/bin/python" ] && _cudafix_code=$(""" + _python_call() + r"""); then
      eval "$_cudafix_code"
    else
      """ + _unless_quiet("printf '%s\\n' \"cudafix: skipped (the env's python could not run cudafix; run: python -m cudafix status)\" >&2") + r"""
    fi
  fi
  unset _cudafix_fresh _cudafix_f _cudafix_d _cudafix_fmt _cudafix_code
fi
unset _cudafix_on
:
"""
    )


def static_deactivate() -> str:
    """deactivate.d/cudafix.sh: pure shell (conda already removed the env's bin from PATH)."""
    return (
        "# cudafix conda deactivation hook: POSIX sh, builtins only.  Generated by\n"
        "# cudafix/activation/shells/sh.py; docs/activation.md explains it.\n"
        "# shellcheck shell=sh\n" + deactivate()
    )


def cache_files(guard: Guard, plan: ActivationPlan, version: str) -> Dict[str, str]:
    return {"activate.sh": cache(guard, plan, version)}
