"""Files cudafix owns: cache locations (paths), the one trust check and file access (safefs),
the one cache format (cachefile), atomic writes of user-chosen files (fsutil)."""
