"""Acceptance floors: rules over measured figures (floors files), baselines made from runs,
and the verdict, node by node; peer tools' output (nccl-tests, OSU) is read as points by
floors.peer_output, so their figures are judged as fabbench's are."""
