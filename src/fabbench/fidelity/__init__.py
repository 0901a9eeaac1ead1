"""Fidelity: fabbench's figures held against the bare loops of the libraries it drives.

A benchmark is worth its fidelity. For one path (fabric x primitive, local ranks or the emulated
cluster this runs under) the same operation is timed by fabbench (`fabbench run`, everything a
rank imports, spawns and polls included) and by reference loops that do nothing else
(``loops/``: a C MPI loop, mpi4py, torch.distributed and Horovod loops), started by the same
launcher with the same environment and MCA parameters. The two sides alternate round by round
and the best time of each side is kept, so that a noisy neighbour does not pick the winner.

The verdict is a band, not a floor: fabbench faster than the reference is as wrong as slower.
"""
