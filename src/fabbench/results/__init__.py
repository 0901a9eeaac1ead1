"""The results contract: JSON Lines records, their schema, a durable writer and one loader.

Records are typed (results.records), checked against the schema of SCHEMA before a byte is
written (results.writer), and read back by one loader (results.reader) that reads every version
in SCHEMA_FILES, renaming old fields (RENAMED) on load. What every reader shares sits here too:
files and directories as runs (results.runs) and the link a run's bytes crossed (results.link).
The history of the versions is written beside SCHEMA."""

# Versions (the loader reads every one of SCHEMA_FILES):
#   fabbench/1  run, collective, train, halo, summary records; later ceiling records and the
#               run's interface and emulation (schema-1.json).
#   fabbench/2  units in every rate's name (GB/s = 1e9 bytes/s fields end in _gbyte_s, Gbit/s
#               in _gbit_s, Mbit/s in _mbit_s; the fabbench/1 names are RENAMED on load); NaN
#               and Infinity refused (every version); each collective point's stability rule
#               (stable, stable_rule, median_ci95_rel); unknown fields refused; the run's
#               gpudirect, library_report and timing_method; later the optional
#               rank_containers of the run and recheck of a pairs record; later the replay
#               kind (--workload replay: a recorded job's communication replayed, per step and
#               per operation), a kind added (schema-1.json has none: no fabbench/1 file holds
#               one).
SCHEMA = "fabbench/2"
SCHEMA_FILES = {"fabbench/1": "schema-1.json", "fabbench/2": "schema.json"}
SUPPORTED_SCHEMAS = tuple(SCHEMA_FILES)

# old name -> new name per kind, applied to records of the version that keys the entry when
# they are loaded ("a.b": field b of object a; "a[].b": field b of each object in list a)
RENAMED = {
    "fabbench/1": {
        "collective": {"algbw_gbps": "algbw_gbyte_s", "busbw_gbps": "busbw_gbyte_s",
                       "busbw_mean_gbps": "busbw_mean_gbyte_s"},
        "halo": {"exchange_gbps": "exchange_gbyte_s"},
        "train": {"net.tx_gbps": "tx_gbit_s", "net.rx_gbps": "rx_gbit_s",
                  "net.peak_gbps": "peak_gbit_s", "net.link_gbps": "link_gbit_s"},
        "run": {"provenance.nics[].speed_mbps": "speed_mbit_s",
                "provenance.rdma[].rate_gbps": "rate_gbit_s"},
    },
}
