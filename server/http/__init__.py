"""The HTTP face: the daemon (:mod:`.daemon`, the one process that owns a store), the stdio
bridge (:mod:`.bridge`) and its static handshake (:mod:`.handshake`), the daemon's request
authentication (:mod:`.auth`) and Host/Origin guard (:mod:`.hostguard`), per-scope routing to
other stores (:mod:`.routing`), and the files by which a daemon is found (:mod:`.daemonfiles`).

Nothing is imported here: the bridge and the hook client load only the standard library."""
