from django.db import models


class IdempotencyStatus(models.TextChoices):
    RUNNING = "running", "Running"
    DONE = "done", "Done"


class Exposure(models.TextChoices):
    AUTO = "auto", "Meta-tools while the index is ready, direct listing otherwise"
    META = "meta", "Meta-tools"
    DIRECT = "direct", "The caller's tools listed directly"
