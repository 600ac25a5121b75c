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
ENV KERNELWATCH_HOME=/data
VOLUME /data
