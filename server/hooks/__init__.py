"""The client-hook face: the hook client run by each client event (:mod:`.hookclient`,
standard library only), the daemon's hook routes (:mod:`.routes`), the installer of the hooks
into a client's settings (:mod:`.install`) and the session indexer's client
(:mod:`.session_client`).

Nothing is imported here: the hook client loads only the standard library."""
