"""Integration tests: real ranks, real transports, real Slurm, real namespaces, the image."""
