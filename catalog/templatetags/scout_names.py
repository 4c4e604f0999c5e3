"""Names in templates that break where a reader would (catalog.admin.display.breakable_id)."""

from django import template
from django.utils.safestring import SafeString

from catalog.admin.display import breakable_id

register = template.Library()


@register.filter
def breakable(value) -> SafeString:
    """A tool id or server slug that wraps after "::" and "_", and a long run of letters anywhere: one such name
    otherwise widened its table past the page."""
    return breakable_id(str(value))
