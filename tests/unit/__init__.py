"""Unit tests: fast, no ranks, no daemons (make test-fast)."""
