"""An object's change history (Django's LogEntry, the admin's *History* page) as its reader may read it (Z12).

A shared server's or tool's history lists every admin who changed it, and each change message names the inline
rows it added or removed (a grant to tenant B's group or person): a non-superuser reads who acted only where they
may see that person, and what changed without the names of the rows. Superusers read the history as Django
writes it."""

import json

from django import template
from django.contrib.auth import get_user_model

from governance.constants import OTHER_TENANT_PERSON
from governance.selectors import users_visible_to_operator

register = template.Library()
ROW_NOT_NAMED = "(not named here)"


@register.simple_tag(takes_context=True)
def history_as_seen(context, actions) -> list[tuple]:
    """``(action, who, message)`` for each of ``actions``, as the page's reader may read them: one query for the
    whole page's people, never one per row."""
    viewer = context["request"].user
    actions = list(actions)
    if viewer.is_superuser:
        return [(action, _name(action.user), action.get_change_message()) for action in actions]
    people = get_user_model().objects.filter(users_visible_to_operator(user=viewer))
    visible = set(people.filter(pk__in={action.user_id for action in actions}).values_list("pk", flat=True))
    return [
        (action, _name(action.user) if action.user_id in visible else OTHER_TENANT_PERSON, _unnamed_rows(action))
        for action in actions
    ]


def _name(user) -> str:
    full = user.get_full_name()
    return f"{user.get_username()} ({full})" if full else user.get_username()


def _unnamed_rows(action) -> str:
    """The change message with every row it names (``object``) left unnamed."""
    if not action.change_message or action.change_message[0] != "[":
        return action.get_change_message()
    try:
        parts = json.loads(action.change_message)
    except json.JSONDecodeError:
        return action.get_change_message()
    for part in parts:
        for detail in part.values():
            if isinstance(detail, dict) and "object" in detail:
                detail["object"] = ROW_NOT_NAMED
    shown = type(action)(change_message=json.dumps(parts))
    return shown.get_change_message()
