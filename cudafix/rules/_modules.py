"""Which modules contribute rules, in report order."""

from cudafix.rules import arch, driver, env, extensions, libs, toolkit, torch  # noqa: F401

MODULES = (driver, torch, arch, extensions, libs, toolkit, env)
