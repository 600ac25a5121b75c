"""WSGI entry for gunicorn (`gunicorn service.wsgi:app`): the app built from the environment's settings."""

from service.app import create_app

app = create_app()
