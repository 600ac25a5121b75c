"""Webhooks from other services (GitHub), outside /api/v1: they authenticate by signature, not by token."""
