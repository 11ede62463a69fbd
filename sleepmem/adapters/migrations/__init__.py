"""Alembic migrations of the SQL schema (``env.py``, ``versions/``).

Run them with ``sleepmem migrate`` (or :func:`sleepmem.adapters.migrate.upgrade`); add a
revision with ``alembic revision --autogenerate -m "..."`` from the repository root
(``alembic.ini`` points here), then review it: autogenerate does not see triggers.
"""
