"""Scout's inline sections (templates/admin/edit_inline/scout_tabular.html)."""

import json

from django import template
from django.utils.translation import gettext

register = template.Library()


@register.simple_tag
def inline_formset_data(inline_admin_formset) -> str:
    """Django's data for an inline's script, with its "Add another …" link naming the row as the inline does:
    "Add another alias", not Django's capitalised "Add another Alias" mid-sentence."""
    data = json.loads(inline_admin_formset.inline_formset_data())
    name = inline_admin_formset.opts.verbose_name
    data["options"]["addText"] = gettext("Add another %(verbose_name)s") % {"verbose_name": name}
    return json.dumps(data)  # escaped by simple_tag, as Django's own attribute is
