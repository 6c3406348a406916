"""The secret scanner: rule tables, value checks, assignments, spellings, and files whose diffs are never kept.

Imports: `retrieval.regexes`, `retrieval` and this folder.
"""
