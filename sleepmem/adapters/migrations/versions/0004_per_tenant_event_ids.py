"""raw_event is keyed by (tenant, event_id): an event id is unique within its tenant only

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from alembic import op
from sqlalchemy.exc import SAWarning

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# PostgreSQL's default name for the key 0001 created; SQLite's is unnamed and batch mode
# rebuilds the table with the new key instead.
_PKEY = "raw_event_pkey"


def upgrade() -> None:
    # Existing ids were unique across all tenants, so they are unique per tenant too.
    # SQLite's batch copy warns that the key it copies differs from the new one: by design.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*_alembic_tmp_raw_event", category=SAWarning)
        _rekey()


def _rekey() -> None:
    with op.batch_alter_table("raw_event") as batch:
        # The tenant now leads the primary key, which serves the lookups this index did.
        batch.drop_index("ix_raw_event_tenant")
        if op.get_bind().dialect.name != "sqlite":
            batch.drop_constraint(_PKEY, type_="primary")
        batch.create_primary_key(_PKEY, ["tenant", "event_id"])


def downgrade() -> None:
    # Only possible while no event id is used by two tenants.
    with op.batch_alter_table("raw_event") as batch:
        if op.get_bind().dialect.name != "sqlite":
            batch.drop_constraint(_PKEY, type_="primary")
        batch.create_primary_key(_PKEY, ["event_id"])
        batch.create_index("ix_raw_event_tenant", ["tenant"], unique=False)
