"""Recall: the ranked context entry point, the session-start view, excerpts, citations and their verification, what read tools withhold."""
