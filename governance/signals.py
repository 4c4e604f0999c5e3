"""Signals other apps react to (dependencies point upward: governance never imports them)."""

from django.dispatch import Signal

# Something that can alter who may discover or execute what changed (``visibility_invalidate``: a grant, an
# entitlement, a membership, a person, a token, a tenant, a tool's or server's state). Sent INSIDE the change's
# transaction, possibly many times per transaction: a receiver schedules its work on commit, once.
visibility_changed = Signal()
