"""The database's refusals that the pipeline tells apart, named here so that service/pipeline/ needs no SQLAlchemy
of its own: a duplicate (``IntegrityError``: a concurrent writer won a race) and a value the schema refuses
(``DataError``). An unreachable database is ``kernelwatch.errors.Transient`` already (``db.unit_of_work``)."""

from __future__ import annotations

from sqlalchemy.exc import DataError, IntegrityError

__all__ = ["DataError", "IntegrityError"]
