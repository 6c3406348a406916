"""The agent clients: each client's hooks, the installer, the plugins, the shell as a client."""
