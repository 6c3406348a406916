"""The knowledge-graph and lesson services of a store, and their read-only views."""
