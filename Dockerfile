FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY sleepmem ./sleepmem
COPY models ./models
COPY pipelines ./pipelines
COPY tasks ./tasks
COPY workers ./workers
COPY schedules ./schedules
# constraints.txt pins every runtime dependency to the version the tests ran against
# (scripts/lock-deps), so a rebuild months later installs the same stack.
RUN pip install . -c constraints.txt && useradd --system --create-home sleepmem && mkdir -p /data \
    && chown sleepmem /data

USER sleepmem
EXPOSE 8787
# One image, four roles: docker-compose.yml picks `migrate` (once), `api`, `worker` or
# `scheduler`.
CMD ["sleepmem", "api"]
