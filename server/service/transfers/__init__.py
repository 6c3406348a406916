"""Import, export and ingest as service calls: other memory servers' data in, notes and JSON out, a workspace ingested."""
