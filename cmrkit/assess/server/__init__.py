"""The assessment server (``cmrkit assess``): accounts, assignments, gold checks, adaptive rounds.

- :mod:`~cmrkit.assess.server.db`: the schema (SQLAlchemy Core tables), engines for SQLite and
  PostgreSQL, and the Alembic migrations that create and change it;
- :mod:`~cmrkit.assess.server.auth`: accounts, argon2 password hashes, the login rate limit;
- :mod:`~cmrkit.assess.server.work`: loading a pool, handing out pairs (N assessors each, gold
  interleaved, leases), saving judgments, rounds of the adaptive strategies, progress, export;
- :mod:`~cmrkit.assess.server.api` and :mod:`~cmrkit.assess.server.app`: the JSON API and pages
  (Starlette, sessions, CSRF), served by uvicorn.

Everything here imports SQLAlchemy or Starlette: import it only inside the ``assess`` commands.
The API and the choices are described in docs/assess.md.
"""
