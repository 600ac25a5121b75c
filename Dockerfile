FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY kernelwatch ./kernelwatch
COPY service ./service
COPY runners ./runners
COPY kernels_under_test ./kernels_under_test
COPY migrations ./migrations
COPY web ./web
RUN pip install --no-cache-dir .
# Not root: a runner executes a repository's benchmark code (sandboxed, but a sandbox run as root is weaker), and
# Celery warns of a superuser worker. /data is made the user's here, so that a new named volume mounted there
# starts owned by it.
RUN useradd --create-home --uid 10001 kernelwatch && mkdir -p /data && chown kernelwatch:kernelwatch /data
USER kernelwatch
ENV KERNELWATCH_HOME=/data
VOLUME /data
