"""The machine's probes: the host, the cluster node and its network interfaces, the NVIDIA driver
and its libcuda, NVML and the GPUs, the PCI bus, WSL 2, and the driver / GPU what-ifs (assume).

Nothing is imported here: importing one module of the section does not import the others.
"""
