"""Studies: a matrix of cells (fabric x primitive x GPUDirect x workload x nodes) kept as data,
run cell by cell into one directory, answered by `fabbench report DIR`.

spec      the TOML format, validated once (file, line and key in every error); the cells
locate    the line of a key in TOML text (tomllib keeps no positions)
host      where the study runs (this host, a Slurm allocation) and why a cell cannot run here
manifest  DIR/study.json: every cell, its status and why; written atomically, schema-checked
run       every cell as its own `fabbench run` launch, with a deadline; resume
"""
