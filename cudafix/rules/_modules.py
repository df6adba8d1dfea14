"""Which modules contribute rules, in report order."""

from cudafix.rules import arch, driver, env, extensions, gpu_driver, libs, nccl, toolkit, torch, wsl  # noqa: F401

MODULES = (driver, wsl, gpu_driver, torch, arch, extensions, libs, toolkit, env, nccl)
