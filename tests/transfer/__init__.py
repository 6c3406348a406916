"""Import, export and ingest: other memory servers, files out, a workspace in."""
