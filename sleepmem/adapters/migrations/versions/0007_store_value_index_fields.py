"""store_value.index_fields: the field paths a query matches (LangGraph's index on put)

NULL (every existing row) keeps the old behaviour, the whole value; [] is a value put with
index=False, which no query finds.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("store_value") as batch:
        batch.add_column(sa.Column("index_fields", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("store_value") as batch:
        batch.drop_column("index_fields")
