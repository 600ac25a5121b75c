"""Orchestration: ingest, detect. Imports no Flask and no Celery; faces call these functions."""
