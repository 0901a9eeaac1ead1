"""The results contract: JSON Lines records, their schema, a durable writer and a reader.

Schema history (loaders accept every version listed):
  fabbench/1  first version: run, collective, train, halo, summary records.
"""

SCHEMA = "fabbench/1"
SUPPORTED_SCHEMAS = ("fabbench/1",)
