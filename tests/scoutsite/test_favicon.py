"""Scout serves its own small icon: /favicon.ico and every page's icon link name the same static file (no 404, no
external fetch)."""

import re

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.urls import reverse

ICON = "scout/favicon.svg"


def test_favicon_ico_leads_to_the_static_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == static(ICON)
    path = finders.find(ICON)
    assert path is not None
    with open(path, encoding="utf-8") as icon:
        svg = icon.read()
    assert svg.startswith("<svg") and "http" not in svg.replace("http://www.w3.org/2000/svg", "")  # self-contained


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["home", "admin:login"])
def test_pages_link_the_icon(client, page):
    html = client.get(reverse(page)).content.decode()
    assert re.search(rf'<link rel="icon" href="{re.escape(static(ICON))}"', html)


@pytest.mark.django_db
def test_error_pages_link_the_icon(client):
    html = client.get("/no-such-page/").content.decode()
    assert f'<link rel="icon" href="{static(ICON)}"' in html
