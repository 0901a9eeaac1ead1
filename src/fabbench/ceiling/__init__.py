"""The wire's practical ceiling: a raw transport tool (iperf3, ucx_perftest, fi_pingpong,
ib_write_bw) run between two nodes before the collectives, recorded as ``ceiling`` records."""
