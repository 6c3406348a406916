"""Workspace ingestion."""
