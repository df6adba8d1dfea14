"""Facts as data: every row carries its source and how sure we are of it.

Modules:
- :mod:`cudafix.knowledge.cuda_driver` — CUDA release -> minimum driver, driver branch -> CUDA,
  minor-version-compatibility floors.
- :mod:`cudafix.knowledge.gpus` — GPU product -> compute capability, SM -> first/last CUDA.
- :mod:`cudafix.knowledge.arch` — binary-compatibility rules (SASS / PTX) as functions.
- :mod:`cudafix.knowledge.torch_builds` — official torch releases: CUDA variants, torchvision,
  Python range, arch lists.
- :mod:`cudafix.knowledge.alloc_conf` — PYTORCH_CUDA_ALLOC_CONF keys per torch version (the fallback for snapshots without names read
  from torch's libraries), and every allocator option name cudafix knows.

- :mod:`cudafix.knowledge.alloc_syntax` — how each torch parser generation splits and checks
  PYTORCH_CUDA_ALLOC_CONF (proved against torch's own parser: docs/alloc-conf.md).
- :mod:`cudafix.knowledge.gpu_peaks` — nominal peak throughput (for ``cudafix verify``).
- :mod:`cudafix.knowledge.interconnect` — NVLink / PCIe bandwidth per direction (for ``cudafix verify --nccl``).
- :mod:`cudafix.knowledge.env_vars` — the environment variables cudafix reads, who reads them,
  and the ones activation manages (docs/env-vars.md).

Status values used by every table (``status`` field of a row):
"""

from cudafix.model.versions import major_minor as _major_minor
from cudafix.model.versions import release

PRIMARY = "primary"  # read in a primary source (vendor docs, the project's own code/scripts, local artifact)
DERIVED = "derived"  # follows from primary rows by a stated rule (e.g. GA toolkit driver -> branch)
SECONDARY = "secondary"  # seen only in third-party copies / user reports
INFERRED = "inferred"  # inferred from dated evidence (PR merge dates, build scripts unchanged between releases)
UNCONFIRMED = "unconfirmed"  # not verified: never rely on it without saying so

STATUSES = (PRIMARY, DERIVED, SECONDARY, INFERRED, UNCONFIRMED)
CONFIRMED = (PRIMARY, DERIVED)



def version_tuple(v: str) -> tuple:
    """"12.1.1" -> (12, 1, 1), "2.4.1+cu121" -> (2, 4, 1): cudafix.model.versions.release."""
    return release(v)


def major_minor(v: str) -> tuple:
    """(major, minor), () for junk (sorts before every version)."""
    return _major_minor(v) or ()
