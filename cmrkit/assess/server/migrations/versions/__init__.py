"""Alembic revisions, oldest first (``down_revision`` chains them)."""
