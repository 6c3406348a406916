"""Read-only views for the dashboard, the review inbox, and the warnings of writes no person asked for."""
