"""A training job's communication, recorded and read (issue 62): the trace fabbench replays
(document.py, the fabbench-trace/1 format), PyTorch's execution traces read into it, and
`fabbench trace -- COMMAND`, which records a job as it runs."""
