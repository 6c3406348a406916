"""Recall and ranking: lexical and vector search, fusion, excerpts, citations."""
