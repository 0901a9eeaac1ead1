"""What this host has: network interfaces, RDMA devices, GPUs, libraries. Reads only."""
