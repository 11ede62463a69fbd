"""store_value: values kept exactly as given (the LangGraph store), by scope, namespace and key

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05 12:26:14.684908
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | Sequence[str] | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('store_value',
    sa.Column('tenant', sa.String(length=128), nullable=False),
    sa.Column('agent', sa.String(length=128), nullable=False),
    sa.Column('user', sa.String(length=128), nullable=False),
    sa.Column('project', sa.String(length=128), nullable=False),
    sa.Column('session', sa.String(length=128), nullable=False),
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('scope_key', sa.String(length=700), nullable=False),
    sa.Column('namespace', sa.String(length=1032), nullable=False),
    sa.Column('key', sa.String(length=512), nullable=False),
    sa.Column('value', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ttl_s', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('store_value', schema=None) as batch_op:
        batch_op.create_index('ix_store_value_expires', ['expires_at'], unique=False)
        batch_op.create_index('ix_store_value_namespace', ['tenant', 'namespace'], unique=False)
        batch_op.create_index(batch_op.f('ix_store_value_tenant'), ['tenant'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('store_value', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_store_value_tenant'))
        batch_op.drop_index('ix_store_value_namespace')
        batch_op.drop_index('ix_store_value_expires')

    op.drop_table('store_value')
