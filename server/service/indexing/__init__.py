"""The session indexer: transcripts become searchable exchanges, incrementally and safely."""
