"""Which modules contribute rules, in report order."""

from cudafix.rules import arch, driver, env, libs, nccl, toolkit, torch  # noqa: F401

MODULES = (driver, torch, arch, libs, toolkit, env, nccl)
