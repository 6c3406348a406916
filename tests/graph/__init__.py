"""The knowledge graph: entities, relations, observations, the official server's format."""
