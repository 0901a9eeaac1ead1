"""`fabbench tune`: find the library settings that bring a primitive closer to the wire, judged
with statistics, and write them where every tool reads them (docs/tuning.md).

  library  what Open MPI accepts (ompi_info), a search space checked before anything runs
  search   the coordinate search: alternating launches of `fabbench run`, compare's rule,
           refusal of a changed transport, resumable
  outputs  the formats the libraries read: coll_tuned rules, NCCL's tuner CSV
  publish  the tuned site profile and the table of gains
"""
