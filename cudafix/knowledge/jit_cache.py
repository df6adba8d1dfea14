"""The driver's PTX JIT cache: CUDA_CACHE_MAXSIZE's bounds, one copy for probes and rules.

NVIDIA, "CUDA Environment Variables"
(https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html):
the maximum is 4294967296 (4 GiB) in every edition.  The default is 268435456 (256 MiB) in the
older Programming Guide table and 1073741824 (1 GiB) on desktop/server (256 MiB on embedded) in the
current page; which driver release changed it is not stated, so an unset value is judged against
both, and the probe records the floor both editions guarantee.
"""

from __future__ import annotations

ENV_DOC = "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html"
MAX_BYTES = 4294967296
DEFAULT_OLDER_DOCS_BYTES = 268435456
DEFAULT_CURRENT_DOCS_BYTES = 1073741824
