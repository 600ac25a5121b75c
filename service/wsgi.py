"""WSGI entry for gunicorn (`gunicorn service.wsgi:app`): the app built from the environment's settings."""

import gc

from service.app import create_app

app = create_app()

# Everything imported and built so far lives as long as the process. Frozen, the garbage collector's full
# passes stop re-scanning it: a request that makes tens of thousands of objects (a comparison of a whole
# suite) spent about a third of its time in collections that walked the app's modules (bench/README.md).
gc.freeze()
