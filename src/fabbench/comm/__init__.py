"""Communicators: one small interface over MPI (mpi4py), torch.distributed (Gloo, NCCL) and
Horovod. Each library is imported only by the communicator that uses it."""
