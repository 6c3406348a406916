"""Facts that changed: update links at write time (supersede), write-time candidates and the client's model as their judge."""
