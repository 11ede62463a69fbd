FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY sleepmem ./sleepmem
COPY models ./models
COPY pipelines ./pipelines
COPY tasks ./tasks
COPY workers ./workers
COPY schedules ./schedules
RUN pip install . && useradd --system --create-home sleepmem && mkdir -p /data \
    && chown sleepmem /data

USER sleepmem
EXPOSE 8787
# One image, three roles: docker-compose.yml picks `api`, `worker` or `scheduler`.
CMD ["sleepmem", "api"]
