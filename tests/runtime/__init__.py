"""The running product: daemon, bridge, CLI, packaging, docs, and the architecture test."""
