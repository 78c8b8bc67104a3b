"""Alembic migrations of the assessment database (run by ``db.migrate``)."""
