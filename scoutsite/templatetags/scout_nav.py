"""The breadcrumb after "Home" on a model's admin pages: the job group the navigation lists the model under
(scoutsite/admin_site.py NAVIGATION), not the Django app, whose index page is a flat list the navigation never shows."""

from django import template
from django.utils.html import format_html

from scoutsite.admin_site import navigation_group

register = template.Library()


@register.simple_tag
def nav_group_crumb(opts) -> str:
    title, url = navigation_group(opts.label)
    return format_html('<a href="{}">{}</a>', url, title)
