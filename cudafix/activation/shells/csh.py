"""csh / tcsh renderer (tested with tcsh; conda's csh activation is tcsh-only in practice).

csh has no functions and expands a whole line before a one-line ``if`` decides, so code that
reads a variable which may be unset uses the multi-line ``if ... then`` form, and a variable
whose *name* is data is reached through ``eval`` of a string built only from a name that was
checked against ``[A-Za-z_][A-Za-z0-9_]*`` (values are never part of an eval'd string: they are
expanded with ``:q`` inside it).

csh's ``eval "`cmd`"`` turns the newlines of cmd's output into spaces, which multi-line code
cannot survive; so the cold path does not eval python's output: python writes the code to a new
private file (and the cache, when it can), prints the file's directory, and the activate script
sources the file and removes it.  `cudafix shell --shell tcsh --activate` prints the same
code for `source`-ing from a file (docs/activation.md).

Quoting: single quotes; ``'`` is written ``'\\''``; a newline inside a value is written as a
backslash-newline inside the quotes; ``!`` is written ``\\!`` (tcsh applies history
substitution even to sourced files: ``'!0'`` fails with "0: Event not found").
"""

from __future__ import annotations

from typing import Dict, List

from cudafix.knowledge import knobs
from cudafix.activation.plan import CACHE_FORMAT, Guard, ActivationPlan, encode_state, managed_words, names_of, one_line

EXT = "csh"


def quote(s: str) -> str:
    # tcsh applies history substitution even to sourced files: '!' is written '\!'
    return "'" + s.replace("'", "'\\''").replace("!", "\\!").replace("\n", "\\\n") + "'"


RESTORE = r"""# restore what a previous cudafix activation changed (a value the user changed is kept); only
# the variables cudafix manages, whatever _CUDAFIX_VARS lists (docs/security.md)
if ( $?_CUDAFIX_VARS ) then
  foreach _cudafix_n ( @MANAGED@ )
    if ( " $_CUDAFIX_VARS:q " !~ *" $_cudafix_n "* ) continue
    set _cudafix_o = ''
    set _cudafix_w = ''
    set _cudafix_c = u
    eval 'set _cudafix_h = $?_CUDAFIX_OLD_'"$_cudafix_n"
    if ( $_cudafix_h ) eval 'set _cudafix_o = "$_CUDAFIX_OLD_'"$_cudafix_n"':q"'
    eval 'set _cudafix_h = $?_CUDAFIX_NEW_'"$_cudafix_n"
    if ( $_cudafix_h ) eval 'set _cudafix_w = "$_CUDAFIX_NEW_'"$_cudafix_n"':q"'
    eval 'set _cudafix_h = $?'"$_cudafix_n"
    if ( $_cudafix_h ) eval 'set _cudafix_c = "s:$'"$_cudafix_n"':q"'
    if ( "$_cudafix_o:q" != "" && "$_cudafix_c:q" == "$_cudafix_w:q" ) then
      if ( "$_cudafix_o:q" =~ s:* ) then
        set _cudafix_v = "$_cudafix_o:s/s://:q"
        eval 'setenv '"$_cudafix_n"' "$_cudafix_v:q"'
      else
        eval 'unsetenv '"$_cudafix_n"
      endif
    endif
    eval 'unsetenv _CUDAFIX_OLD_'"$_cudafix_n"
    eval 'unsetenv _CUDAFIX_NEW_'"$_cudafix_n"
  end
  unsetenv _CUDAFIX_VARS
  unset _cudafix_n _cudafix_o _cudafix_w _cudafix_c _cudafix_h
  if ( $?_cudafix_v ) unset _cudafix_v
endif
""".replace("@MANAGED@", managed_words())

QUIET = r"""set _cudafix_q = 0
if ( $?CUDAFIX_QUIET ) then
  if ( ! ( """ + knobs.csh_off_test("CUDAFIX_QUIET") + r""" ) ) set _cudafix_q = 1
endif
"""


def restore() -> str:
    return RESTORE


def _echo(line: str) -> str:
    # echo is a builtin; backslashes would be escapes under some echo_style settings
    return QUIET + "if ( ! $_cudafix_q ) echo %s > /dev/stderr\nunset _cudafix_q\n" % quote(one_line(line).replace("\\", "/"))


def apply(plan: ActivationPlan) -> str:
    out: List[str] = []
    for name, value in plan.changes:
        out.append(
            "if ( $?%s ) then\n  setenv _CUDAFIX_OLD_%s \"s:$%s:q\"\nelse\n  setenv _CUDAFIX_OLD_%s u\nendif" % (name, name, name, name)
        )
        if value is None:
            out.append("unsetenv %s" % name)
        else:
            out.append("setenv %s %s" % (name, quote(value)))
        out.append("setenv _CUDAFIX_NEW_%s %s" % (name, quote(encode_state(value))))
    if plan.changes:
        out.append("setenv _CUDAFIX_VARS %s" % quote(names_of(plan.changes)))
    text = "".join(line + "\n" for line in out)
    if plan.summary:
        text += _echo(plan.summary)
    return text


def activate(plan: ActivationPlan) -> str:
    return restore() + apply(plan)


def deactivate() -> str:
    return restore()


def skipped(reason: str) -> str:
    return _echo("cudafix: skipped (%s)" % reason)


def cache(guard: Guard, plan: ActivationPlan, version: str) -> str:
    """The guard file: flat code (csh mis-skips untaken if-blocks holding odd quoting, so no
    literal value ever sits inside a block).  Sets _cudafix_fresh when the cache is fresh."""
    out = [
        "# cudafix %s activation cache (generated; safe to delete). See docs/activation.md." % version.replace("\n", " "),
        "set _cudafix_g = 1",
        'if ( "$_cudafix_fmt" != %s ) set _cudafix_g = 0' % CACHE_FORMAT,
    ]
    for name, value in guard.values:
        if value is None:
            out.append("if ( $?%s ) set _cudafix_g = 0" % name)
        else:
            out.append("set _cudafix_c = u")
            out.append("if ( $?%s ) eval 'set _cudafix_c = \"s:$%s:q\"'" % (name, name))
            out.append("set _cudafix_x = %s" % quote("s:" + value))
            out.append('if ( "$_cudafix_c:q" != "$_cudafix_x:q" ) set _cudafix_g = 0')
    # file stamps
    out.append("set _cudafix_s = 1")
    for path in guard.newer:
        q = quote(path)
        out.append("if ( ! -e %s ) set _cudafix_s = 0" % q)
        out.append('if ( -M %s > -M "$_cudafix_f:q" ) set _cudafix_s = 0' % q)
    for path in guard.absent:
        q = quote(path)
        out.append("if ( -e %s || -l %s ) set _cudafix_s = 0" % (q, q))
    out.append("if ( ! $_cudafix_s ) set _cudafix_g = 0")
    out.append("if ( $_cudafix_g ) set _cudafix_fresh = 1")
    out.append("unset _cudafix_g _cudafix_s")
    out.append("if ( $?_cudafix_c ) unset _cudafix_c")
    out.append("if ( $?_cudafix_x ) unset _cudafix_x")
    return "\n".join(out) + "\n"


def cache_files(guard: Guard, plan: ActivationPlan, version: str) -> Dict[str, str]:
    """Files of the cache, written in this order (the guard last)."""
    return {
        "apply.csh": "# cudafix %s activation cache: applied when activate.csh says fresh.\n" % version.replace("\n", " ") + apply(plan),
        "activate.csh": cache(guard, plan, version),
    }


def static_activate() -> str:
    return (
        "# cudafix conda activation hook: csh / tcsh.  Generated by cudafix/activation/shells/csh.py;\n"
        "# docs/activation.md explains it.  Fast path: a fresh per-user cache decided with\n"
        "# builtins only.  Cold path: the env's own python computes, caches, and writes the code to a\n"
        "# private file, which is sourced (csh cannot eval multi-line code).\n"
        + RESTORE
        + r"""set _cudafix_run = 1
if ( $?CUDAFIX_DISABLE ) then
  if ( ! ( """ + knobs.csh_off_test("CUDAFIX_DISABLE") + r""" ) ) set _cudafix_run = 0
endif
if ( ! $?CONDA_PREFIX ) set _cudafix_run = 0
if ( $_cudafix_run ) then
  set _cudafix_fresh = 0
  set _cudafix_fmt = """ + CACHE_FORMAT + r"""
  set _cudafix_d = ''
  if ( $?XDG_CACHE_HOME ) then
    if ( "$XDG_CACHE_HOME:q" =~ /* ) set _cudafix_d = "$XDG_CACHE_HOME:q/cudafix/activation"
  endif
  if ( "$_cudafix_d:q" == "" && $?HOME ) then
    if ( "$HOME:q" =~ /* ) set _cudafix_d = "$HOME:q/.cache/cudafix/activation"
  endif
  set _cudafix_e = ''
  set _cudafix_f = ''
  if ( "$_cudafix_d:q" != "" && "$CONDA_PREFIX:q" =~ /* ) then
    if ( "$CONDA_PREFIX:q" !~ *//* && "$CONDA_PREFIX:q" !~ */./* && "$CONDA_PREFIX:q" !~ */../* && "$CONDA_PREFIX:q" !~ */. && "$CONDA_PREFIX:q" !~ */.. ) then
      set _cudafix_e = "$_cudafix_d:q$CONDA_PREFIX:q.cudafix"
      set _cudafix_f = "$_cudafix_e:q/activate.csh"
    endif
  endif
  # source the cache only if it is ours: a regular file owned by us and writable by no one
  # else, in directories owned by us
  set _cudafix_t = 0
  if ( "$_cudafix_f:q" != "" ) then
    if ( -f "$_cudafix_f:q" && ! -l "$_cudafix_f:q" && -o "$_cudafix_f:q" && -o "$_cudafix_e:q" && ! -l "$_cudafix_e:q" && -o "$_cudafix_d:q" ) then
      if ( ! -P22 "$_cudafix_f:q" && ! -P22 "$_cudafix_e:q" && ! -P22 "$_cudafix_d:q" ) set _cudafix_t = 1
    endif
  endif
  set _cudafix_a = "$_cudafix_e:q/apply.csh"
  if ( $_cudafix_t ) then
    if ( ! -f "$_cudafix_a:q" || -l "$_cudafix_a:q" || ! -o "$_cudafix_a:q" ) set _cudafix_t = 0
  endif
  if ( $_cudafix_t ) then
    if ( -P22 "$_cudafix_a:q" ) set _cudafix_t = 0
  endif
  if ( $_cudafix_t ) source "$_cudafix_f:q"
  if ( $_cudafix_fresh ) source "$_cudafix_a:q"
  # cold path: python writes the cache (when it can) and the same code to a new private file
  # (mkdtemp), prints that file's directory, and the file is sourced and removed.  No cache is
  # needed: HOME unset or an unwritable cache still gets the fix, as in sh and fish.  (/bin/sh
  # to send python's stderr to /dev/null, as csh cannot capture stdout without stderr, and to
  # start python in `/`: `-m` would import a cudafix/ planted in the current directory.)
  if ( ! $_cudafix_fresh ) then
    set _cudafix_p = ''
    if ( -x "$CONDA_PREFIX:q/bin/python" ) then
      set _cudafix_p = `/bin/sh -c 'cd / && exec "$0" -m cudafix shell --shell csh --activate --write-cache --print-dir </dev/null 2>/dev/null' "$CONDA_PREFIX:q/bin/python"`
    endif
    if ( "$_cudafix_p:q" == "" ) then
""" + _indent(_echo("cudafix: skipped (the env's python could not run cudafix; run: python -m cudafix status)"), 6) + r"""    else
      set _cudafix_a = "$_cudafix_p:q/activate.csh"
      set _cudafix_t = 0
      if ( -d "$_cudafix_p:q" && ! -l "$_cudafix_p:q" && -o "$_cudafix_p:q" && -f "$_cudafix_a:q" && ! -l "$_cudafix_a:q" && -o "$_cudafix_a:q" ) then
        if ( ! -P077 "$_cudafix_p:q" && ! -P077 "$_cudafix_a:q" ) set _cudafix_t = 1
      endif
      if ( $_cudafix_t ) then
        source "$_cudafix_a:q"
        /bin/rm -f -- "$_cudafix_a:q" >& /dev/null
        /bin/rmdir -- "$_cudafix_p:q" >& /dev/null
      else
""" + _indent(_echo("cudafix: skipped (the file the env's python wrote is not a private file of this user)"), 8) + r"""      endif
    endif
    unset _cudafix_p
  endif
  unset _cudafix_fresh _cudafix_fmt _cudafix_d _cudafix_e _cudafix_f _cudafix_t _cudafix_a
endif
unset _cudafix_run
"""
    )


def _indent(code: str, n: int) -> str:
    return "".join(" " * n + line + "\n" for line in code.splitlines())


def static_deactivate() -> str:
    return (
        "# cudafix conda deactivation hook: csh / tcsh, builtins only.  Generated by\n"
        "# cudafix/activation/shells/csh.py; docs/activation.md explains it.\n" + deactivate()
    )
