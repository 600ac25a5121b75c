"""Alembic migrations. Never imports application models and never calls the network."""

from pathlib import Path

MIGRATIONS_DIR = Path(__file__).resolve().parent
