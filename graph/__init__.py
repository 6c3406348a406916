"""Knowledge graph and lessons."""
