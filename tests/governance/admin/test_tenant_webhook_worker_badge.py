"""The tenant webhook's badges read this web server's environment; with a Celery worker (REDIS_URL) the worker sends
the webhook from its own, which the web server cannot read: the page says so instead of "Not sent" (or "set") as if
it knew, and points at the notification log, where the worker's attempts say what it found."""

import pytest
from django.urls import reverse

from tests.governance.admin.test_tenant_webhook_admin import SECRET_ENV, URL_ENV, _badges, acme  # noqa: F401

pytestmark = pytest.mark.django_db


def test_with_a_worker_the_badges_say_whose_environment_they_read(client, superuser, acme, settings):  # noqa: F811
    settings.CELERY_TASK_ALWAYS_EAGER = False  # tasks go to a worker (REDIS_URL set)
    client.force_login(superuser)
    page = client.get(reverse("admin:governance_tenant_change", args=[acme.pk])).content.decode()
    assert "Sent by the Celery worker, from its own environment" in page
    assert "In this web server:" in page and "Not sent until every variable is set" not in page
    assert _badges(page) == [f"{URL_ENV} set here", f"{SECRET_ENV} not set here"]
    # What this web server lacks is no failure (the worker sends): grey, never the red of a failed notification.
    assert "s-failed webhook-env" not in page and page.count('class="scout-badge s-unknown webhook-env"') == 2
    assert "Whether each is set is read from this web server's environment only." in page
    acme.approval_webhook_url_env = acme.approval_webhook_secret_env = ""
    acme.save()
    page = client.get(reverse("admin:governance_tenant_change", args=[acme.pk])).content.decode()
    assert "the Celery worker, which sends it, reads its own environment" in page


def test_without_a_worker_this_web_server_sends_and_its_badges_decide(client, superuser, acme, settings):  # noqa: F811
    settings.CELERY_TASK_ALWAYS_EAGER = True
    client.force_login(superuser)
    page = client.get(reverse("admin:governance_tenant_change", args=[acme.pk])).content.decode()
    assert "Not sent until every variable is set:" in page and "Sent by the Celery worker" not in page
    assert 'class="scout-badge s-failed webhook-env">' + f"{SECRET_ENV} not set<" in page  # here it is a failure
