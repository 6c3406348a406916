"""Sessions: every client's transcripts, exchanges, the session indexer."""
