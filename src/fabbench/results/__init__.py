"""The results contract: JSON Lines records, their schema, a durable writer and one loader.

Records are built as typed records (results.records), checked against the schema of SCHEMA
before a byte is written (results.writer), and read back by one loader (results.reader) that
also reads every older version listed below, renaming old fields on load. What every reader of
results shares (the report, the scaling model, studies) sits here too: files and directories as
runs (results.runs) and the link a run's bytes crossed (results.link).

Schema history (the loader reads every version listed):
  fabbench/1  first version: run, collective, train, halo, summary records; later ceiling
              records and the run's interface and emulation (schema-1.json).
  fabbench/2  units in every rate's name: GB/s (1e9 bytes/s) fields end in ``_gbyte_s``,
              Gbit/s fields in ``_gbit_s``, Mbit/s in ``_mbit_s``; NaN and Infinity are refused
              (in every version); each collective point records the stability rule it was judged
              by (``stable``, ``stable_rule``, ``median_ci95_rel``); unknown fields are refused
              (schema.json); the run records GPUDirect RDMA asked and got (``gpudirect``),
              the library's own report (``library_report``) and the ``timing_method``;
              later the container runtime of each rank (``rank_containers``, optional), and
              a pairs record measured again after the rounds (``recheck``, optional).
              Renamed from fabbench/1 (RENAMED below, applied on load):
                collective  algbw_gbps -> algbw_gbyte_s, busbw_gbps -> busbw_gbyte_s,
                            busbw_mean_gbps -> busbw_mean_gbyte_s
                halo        exchange_gbps -> exchange_gbyte_s
                train       net.tx_gbps -> net.tx_gbit_s, net.rx_gbps -> net.rx_gbit_s,
                            net.peak_gbps -> net.peak_gbit_s, net.link_gbps -> net.link_gbit_s
                run         provenance.nics[].speed_mbps -> provenance.nics[].speed_mbit_s,
                            provenance.rdma[].rate_gbps -> provenance.rdma[].rate_gbit_s
"""

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
