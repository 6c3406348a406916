"""Time and updates: time expressions and the time prior, update links, write-time candidates."""
