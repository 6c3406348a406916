"""Time and updates in ranking: time expressions in a query, the time prior, tense, and update links between records.

Imports: `retrieval.storage`, `retrieval.fulltext`, `retrieval.regexes`, `retrieval` (errors, records) and this folder.
"""
