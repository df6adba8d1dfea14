"""The data the pipeline passes along: Snapshot (what probes read), Finding/Rule (what rules say), Fix/EnvPatch (what to change)."""
