"""KernelWatch service: ingest, store, detect and present kernel benchmark results.

Importing this package does nothing: no engine, no app, no network.
"""

__version__ = "0.1.0"
