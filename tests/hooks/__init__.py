"""The prompt gate and the hooks' service side: what is injected and when nothing is."""
