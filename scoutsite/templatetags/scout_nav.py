"""Breadcrumbs that name the navigation's job groups (scoutsite/admin_site.py NAVIGATION), not the Django app, whose
index page is a flat list the navigation never shows: ``nav_group_crumb`` after "Home" on a model's admin pages,
``nav_crumbs`` at the start of every page that is not a model's own (dashboard, workbench, decide, ...)."""

from django import template
from django.urls import reverse
from django.utils.html import format_html

from scoutsite.admin_site import navigation_group, navigation_page

register = template.Library()


@register.simple_tag
def nav_group_crumb(opts) -> str:
    title, url = navigation_group(opts.label)
    return format_html('<a href="{}">{}</a>', url, title)


@register.simple_tag(takes_context=True)
def nav_crumbs(context, anchor: str) -> str:
    """Home › the job group › the list or page this page belongs to, as the navigation names them. ``anchor``: a model
    ("app_label.ModelName", its list) or a navigation page's URL name (left out on that page itself, which its title
    names; a model's list is never a page of this kind, though an action's page is posted to its URL)."""
    group, group_url, name, url = navigation_page(anchor)
    crumbs = format_html('<a href="{}">Home</a> &rsaquo; <a href="{}">{}</a>', reverse("admin:index"), group_url, group)
    if "." not in anchor and url == context["request"].path:
        return crumbs
    return format_html('{} &rsaquo; <a href="{}">{}</a>', crumbs, url, name)
