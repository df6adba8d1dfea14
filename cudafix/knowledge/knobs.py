"""cudafix's own settings (the CUDAFIX_* variables a user sets), defined once.

One truthiness rule for every on/off setting, in every place that reads one: the startup
module (`_cudafix_startup.py`, whose stdlib-only literal tests/test_knobs.py holds equal to
:data:`FALSE_WORDS`), the import-torch path (cudafix/hook/runtime.py), the activation run-time
and the shell scripts, into which :func:`sh_off_patterns`, :func:`fish_off_words` and
:func:`csh_off_test` compile the same words (so `CUDAFIX_DISABLE=yes` switches off
`conda activate` as it switches off the hook).  docs/env-vars.md's second table is generated
from :data:`KNOBS`.
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Optional, Tuple

# A flag is off when unset or set to one of these words, in any letter case; any other value
# (1, yes, true, on, ...) turns it on.  No trimming: every shell can test exactly this.
FALSE_WORDS: Tuple[str, ...] = ("", "0", "no", "false", "off")

FLAG = "flag"  # on/off by the rule above
CHOICE = "choice"  # one of `values`
LIST = "list"  # comma-separated
VALUE = "value"  # free text (a version, a GPU name)


# One setting: its name, kind, what it does, which part of cudafix reads it (``read_by``), the
# values of a choice and its default.  A named tuple, not a dataclass: `status` reads
# CUDAFIX_SERIAL before it forks (cudafix.probes.ahead), and a dataclass would add its compiling to
# that path, and the inspect import a class without a docstring brings on 3.8-3.11 (docs/benchmarks.md).
Knob = collections.namedtuple("Knob", ("name", "kind", "meaning", "read_by", "values", "default"), defaults=((), ""))


KNOBS: Tuple[Knob, ...] = (
    Knob("CUDAFIX_DISABLE", FLAG, "switch cudafix's automatic paths off: the startup hook and `conda activate` do nothing",
         "startup hook, import-torch check, activate.d scripts, `cudafix shell --activate`"),
    Knob("CUDAFIX_MODE", CHOICE, "`fix`: apply the safe corrections and warn; `warn`: only warn; `off`: do nothing",
         "startup hook, import-torch check", ("fix", "warn", "off"), "fix"),
    Knob("CUDAFIX_SKIP", LIST, "rule ids that are neither corrected nor announced at `import torch`",
         "import-torch check"),
    Knob("CUDAFIX_DEBUG", FLAG, "one line on stderr per decision the hook makes; tracebacks from the CLI",
         "startup hook, import-torch check, CLI"),
    Knob("CUDAFIX_QUIET", FLAG, "no summary line at `conda activate`", "activation (every shell)"),
    Knob("CUDAFIX_NO_WARM", FLAG, "activation starts no background `cudafix warm`", "activation"),
    Knob("CUDAFIX_ASSUME_DRIVER", VALUE, "what-if: the driver version assumed instead of the probed one",
         "status, check, fix, activation"),
    Knob("CUDAFIX_ASSUME_GPU", VALUE, "what-if: the GPUs assumed instead of the probed ones (comma-separated)",
         "status, check, fix, activation"),
    Knob("CUDAFIX_JOBS", VALUE, "how many processes a command may run at once (1: one, no child process); unset: each "
         "command's own choice (status forks its probes where that pays, fleet reads in one process)",
         "status, check, snapshot, fix, fleet"),
    Knob("CUDAFIX_SERIAL", FLAG, "the older name of CUDAFIX_JOBS=1: probe in one process", "status, check, snapshot, fix"),
    Knob("CUDAFIX_PROLOG_CANNOT_RUN", CHOICE, "what the Slurm prolog / NHC check does when cudafix itself cannot run",
         "deploy/slurm", ("drain", "pass"), "drain"),
)
BY_NAME = {k.name: k for k in KNOBS}


def flag_on(value: Optional[str]) -> bool:
    """The one truthiness rule: unset or a FALSE_WORDS word (any case) is off."""
    return value is not None and value.lower() not in FALSE_WORDS


def flag(env: Mapping[str, str], name: str) -> bool:
    assert BY_NAME[name].kind == FLAG, name
    return flag_on(env.get(name))


def jobs(env: Mapping[str, str]) -> Optional[int]:
    """CUDAFIX_JOBS as a number of processes (a whole number from 1), else 1 where CUDAFIX_SERIAL
    is on, else None: not set, the command decides."""
    value = (env.get("CUDAFIX_JOBS") or "").strip()
    if value.isdigit() and int(value) >= 1:
        return int(value)
    return 1 if flag(env, "CUDAFIX_SERIAL") else None


def _ci(word: str) -> str:  # a case-insensitive glob for one word: no -> [Nn][Oo]
    return "".join("[%s%s]" % (c.upper(), c) if c.isalpha() else c for c in word)


def sh_off_patterns() -> str:
    """POSIX `case` patterns matching an off value: ''|0|[Nn][Oo]|..."""
    return "|".join("''" if not w else _ci(w) for w in FALSE_WORDS)


def fish_off_words() -> str:
    """fish: `contains -- (string lower -- "$X") <these>` is true for an off value."""
    return " ".join("''" if not w else w for w in FALSE_WORDS)


def csh_off_test(var: str) -> str:
    """A csh/tcsh expression, true when the (set) shell variable or env var `var` is off."""
    parts = []
    for w in FALSE_WORDS:
        if not w:
            parts.append('"$%s:q" == ""' % var)
        else:
            parts.append('"$%s:q" =~ %s' % (var, _ci(w)))
    return " || ".join(parts)
