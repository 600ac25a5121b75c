"""Pure detection: no database, no framework, every parameter passed in.

A detector turns one series (per-commit samples in first-parent order) into change points. The pipeline
stores what a detector returns as findings stamped with the detector's name and version.
"""

from service.detect.types import ChangePoint, Detector, SeriesPoint

__all__ = ["ChangePoint", "Detector", "SeriesPoint"]
