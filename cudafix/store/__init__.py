"""Files cudafix owns: cache locations, atomic writes, stat-validated cache files."""
