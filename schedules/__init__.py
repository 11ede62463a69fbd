"""APScheduler jobs behind a leader lock; each job only enqueues Celery tasks."""
