#!/bin/bash
# cudafix's conda post-link script, installed as $PREFIX/bin/.cudafix-post-link.sh.  conda runs it
# after linking cudafix.  A previous cudafix's pre-unlink script may have left copies of the
# deactivate scripts (deactivate.d/cudafix-unlinked.*, see pre-unlink.sh); this cudafix's own
# deactivate.d/cudafix.* now does their work.
rm -f "$PREFIX"/etc/conda/deactivate.d/cudafix-unlinked.sh \
      "$PREFIX"/etc/conda/deactivate.d/cudafix-unlinked.fish \
      "$PREFIX"/etc/conda/deactivate.d/cudafix-unlinked.csh
exit 0
