"""Fidelity: fabbench's figures held against the bare loops of the libraries it drives.

A benchmark is worth its fidelity. For one path (fabric x primitive, local ranks or the emulated
cluster this runs under) the same operation is timed by fabbench (`fabbench run`, everything a
rank imports, spawns and polls included) and by reference loops that do nothing else
(``loops/``: a C MPI loop, mpi4py, torch.distributed and Horovod loops), started by the same
launcher with the same environment and MCA parameters. Each side runs once per round, the order
reversed every other round, and the verdict takes the median of the rounds' paired ratios, so
that neither a drift of the machine nor one noisy run picks the winner.

The verdict is a band, not a floor: fabbench faster than the reference is as wrong as slower.
"""
