"""What-if predictions from measured records only (never a comm library).

quantities  bandwidth ("25Gbit", "100G", "12.5GB/s") and latency ("5us") parsing
costs       α-β-γ cost formulas of the collective algorithms, in nccl-tests' size convention
fit         α and β per (op, transport, ranks) from collective records, with the fit's quality
whatif      Zhang et al. (NetAI 2020): a training step's overhead and scaling factor at N nodes
hierarchy   Won et al. (2021): multi-dimensional collectives, T = max_d t_d, best split B_d ∝ m_d
predict     the whole `fabbench model` answer from results files
"""
