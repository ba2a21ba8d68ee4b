"""Archival to S3-compatible storage: a run's history before its retention deletion, read back on demand.

`layout` names and frames the objects (pure), `s3` talks to the store, `history` archives, verifies and
reads a run's history. The visibility archive is a SQL index (visibility.models.ArchivedVisibilityRecord).
"""
