"""The store: SQLite and its integrity, the engine, the vector index in its child, the embedding model, PostgreSQL mode."""
