"""Groups an admin may see (Z12)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db.models import Q

from catalog.models import Server

from ..models import ServerGroupObjectPermission, ToolGroupObjectPermission
from ..roles import ROLE_PERMISSIONS
from .people import users_visible_to_operator
from .tools import servers_visible_to_operator


def groups_visible_to_operator(*, user: AbstractBaseUser) -> Q:
    """Groups an admin may see and pick (the group list, page and autocomplete; a grant's group; the groups of an
    entitlement or a person; a grant's holder in the audit trail): all for a superuser, else the preset role
    groups (governance.roles: the same Approvers, Curators and Operators serve every tenant, each tenant's
    operators grant them per server), groups with a member the admin may see, and groups that are nobody's yet
    (no member and no grant on another tenant's server or tool). A group whose members are all another tenant's
    people, or that holds grants only there, is that tenant's (Z12). A filter on Group."""
    if getattr(user, "is_superuser", False):
        return Q()
    people = get_user_model().objects.filter(users_visible_to_operator(user=user))
    managed = Server.objects.filter(servers_visible_to_operator(user=user)).values("pk")
    with_members = Group.objects.filter(user__isnull=False).values("pk")
    foreign_grants = (
        ServerGroupObjectPermission.objects.exclude(content_object__in=managed).values("group_id"),
        ToolGroupObjectPermission.objects.exclude(content_object__server__in=managed).values("group_id"),
    )
    nobodys = ~Q(pk__in=with_members) & ~Q(pk__in=foreign_grants[0]) & ~Q(pk__in=foreign_grants[1])
    return Q(name__in=list(ROLE_PERMISSIONS)) | Q(pk__in=Group.objects.filter(user__in=people).values("pk")) | nobodys
