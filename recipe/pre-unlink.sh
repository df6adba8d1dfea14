#!/bin/bash
# cudafix's conda pre-unlink script, installed as $PREFIX/bin/.cudafix-pre-unlink.sh.  conda runs it
# (bash, with PREFIX set) before it removes or replaces cudafix's files (conda/core/link.py,
# run_script(..., "pre-unlink")).
#
# Shells that activated this env still hold cudafix's corrections (CUDA_HOME, ...) and the
# _CUDAFIX_* state that says how to undo them.  Once conda has removed deactivate.d/cudafix.*,
# `conda deactivate` would find nothing to undo them with.  So keep a copy of those pure-shell
# scripts under names conda does not own: deactivate.d/cudafix-unlinked.{sh,fish,csh}.  They do
# nothing in a shell without _CUDAFIX_VARS; `cudafix hooks install` (and the next install of
# cudafix, through its post-link script) removes them; docs/install.md says what they are.
d="$PREFIX/etc/conda/deactivate.d"
for ext in sh fish csh; do
  if [ -f "$d/cudafix.$ext" ] && [ ! -L "$d/cudafix.$ext" ]; then
    cp -f "$d/cudafix.$ext" "$d/cudafix-unlinked.$ext" 2>/dev/null || true
  fi
done
exit 0
