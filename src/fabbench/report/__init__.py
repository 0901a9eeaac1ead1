"""Reports and comparisons built from results files only (never a comm library); runs are
loaded by results.runs, a run's link by results.link.

significance   the one stability rule, Mann-Whitney U and a bootstrap CI of the median ratio
               (numpy only), over samples
tables         the nccl-tests layout for the console, and CSV export
plots          busbw/latency vs size per op, samples/s vs ranks (matplotlib, Agg; PNG and SVG)
compare        A vs B per op and size: ratio, CI, verdict; differing provenance
compare_text   a comparison's console tables
long_table     a Rich table of many rows, written as Rich writes it without its work per cell
html           one self-contained HTML file (inline SVG)

late           ranks that arrive late
drift          a series' Theil-Sen slope, exact Mann-Kendall test and verdict against a floor
trend          each node's and link's figure across runs, judged as floors verify judges one
trend_report   the library call behind `fabbench report DIR --trend`
runs_report    the library calls behind `fabbench report` and `fabbench compare`
study/         a study directory's views: its answer, text, HTML, plots, study against study
"""
