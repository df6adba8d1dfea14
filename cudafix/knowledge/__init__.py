"""Facts as data: every row carries its source and how sure we are of it.

Modules:
- :mod:`cudafix.knowledge.cuda_driver` — CUDA release -> minimum driver, driver branch -> CUDA,
  minor-version-compatibility floors.
- :mod:`cudafix.knowledge.gpus` — GPU product -> compute capability, SM -> first/last CUDA.
- :mod:`cudafix.knowledge.arch` — binary-compatibility rules (SASS / PTX) as functions.
- :mod:`cudafix.knowledge.torch_builds` — official torch releases: CUDA variants, torchvision,
  Python range, arch lists.
- :mod:`cudafix.knowledge.alloc_conf` — PYTORCH_CUDA_ALLOC_CONF keys per torch version.
- :mod:`cudafix.knowledge.gpu_peaks` — nominal peak throughput (for ``cudafix verify``).
- :mod:`cudafix.knowledge.env_vars` — the environment variables cudafix reads, who reads them,
  and the ones activation manages (docs/env-vars.md).

Status values used by every table (``status`` field of a row):
"""

PRIMARY = "primary"  # read in a primary source (vendor docs, the project's own code/scripts, local artifact)
DERIVED = "derived"  # follows from primary rows by a stated rule (e.g. GA toolkit driver -> branch)
SECONDARY = "secondary"  # seen only in third-party copies / user reports
INFERRED = "inferred"  # the reference infers it (e.g. from PR dates, unchanged build scripts)
UNCONFIRMED = "unconfirmed"  # not verified: never rely on it without saying so

STATUSES = (PRIMARY, DERIVED, SECONDARY, INFERRED, UNCONFIRMED)
CONFIRMED = (PRIMARY, DERIVED)

# Citation prefixes for the team's research notes (copied into rows next to the original URL).
FACTS_DRIVER = "shared/reference/facts-driver.md"
FACTS_TORCH = "shared/reference/facts-torch.md"


def is_confirmed(status: str) -> bool:
    return status in CONFIRMED


def version_tuple(v: str) -> tuple:
    """"12.1.1" -> (12, 1, 1); non-numeric tails are dropped ("2.4.1+cu121" -> (2, 4, 1))."""
    out = []
    for part in str(v).split("+", 1)[0].strip().split("."):
        digits = ""
        for ch in part:
            if ch.isdigit():
                digits += ch
            else:
                break
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out)


def major_minor(v: str) -> tuple:
    t = version_tuple(v)
    return (t + (0, 0))[:2] if t else ()
