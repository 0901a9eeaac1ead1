"""Reports and comparisons built from results files only (never a comm library).

load     files and directories -> Series (one per run), schema-checked by results.reader
stats    the one stability rule, Mann-Whitney U and a bootstrap CI of the median ratio (numpy only)
link     the link speed a run's fabric had (from its provenance) and busbw efficiency
tables   the nccl-tests layout for the console, and CSV export
plots    busbw/latency vs size per op, samples/s vs ranks (matplotlib, Agg; PNG and SVG)
compare  A vs B per op and size: ratio, CI, verdict; differing provenance
html     one self-contained HTML file (inline SVG)
"""
