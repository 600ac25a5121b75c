"""Runners: execute a kernel suite at a commit, time it, and produce a manifest.

Runners import ``service.contract`` and ``runners.*`` only; they never touch the database.
"""
