"""The dashboard and the review inbox."""
