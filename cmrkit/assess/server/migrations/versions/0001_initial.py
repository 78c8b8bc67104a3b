"""The first schema: settings, users, pairs, assignments (with their judgments).

Revision ID: 0001
Revises:
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "settings",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("password_hash", sa.String(255), nullable=False),
        sa.Column("disabled", sa.Boolean, nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("flag", sa.Text, nullable=True),
        sa.Column("handed", sa.Integer, nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "pairs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("pair_id", sa.String(32), nullable=False, unique=True),
        sa.Column("qid", sa.Text, nullable=False),
        sa.Column("docno", sa.Text, nullable=False),
        sa.Column("is_gold", sa.Boolean, nullable=False),
        sa.Column("gold", sa.Integer, nullable=True),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("taken", sa.Integer, nullable=False),
        sa.Column("judged", sa.Integer, nullable=False),
        sa.Column("display", sa.Text, nullable=False),
    )
    op.create_index("ix_pairs_queue", "pairs", ["is_gold", "active", "taken", "seq"])
    op.create_table(
        "assignments",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("pair_ref", sa.Integer, sa.ForeignKey("pairs.id"), nullable=False),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
        sa.Column("leased_at", sa.Float, nullable=False),
        sa.Column("lease_until", sa.Float, nullable=False),
        sa.Column("label", sa.Integer, nullable=True),
        sa.Column("judged_at", sa.Float, nullable=True),
        sa.Column("changed_at", sa.Float, nullable=True),
        sa.UniqueConstraint("pair_ref", "user_id", name="uq_assignment_pair_user"),
    )
    op.create_index("ix_assignments_user", "assignments", ["user_id", "judged_at"])
    op.create_index("ix_assignments_open", "assignments", ["judged_at", "lease_until"])


def downgrade() -> None:
    op.drop_table("assignments")
    op.drop_table("pairs")
    op.drop_table("users")
    op.drop_table("settings")
