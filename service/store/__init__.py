"""Persistence: SQLAlchemy 2 models, engine/session helpers, and repositories returning plain dataclasses."""
