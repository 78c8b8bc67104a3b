"""Alembic environment: runs on the connection that :func:`cmrkit.assess.server.db.migrate`
hands over (``config.attributes["connection"]``), online only."""

from alembic import context

from cmrkit.assess.server.db import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run the migrations with `cmrkit assess migrate --db URL`")
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
