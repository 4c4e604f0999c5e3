"""People lists narrowed to an admin's tenants (Z12): the auth user list, the user autocomplete every form's
person field asks (grants, tokens, agents) and the people those forms accept show shared people (in no tenant)
and members of the admin's tenants; superusers see everyone (``governance.selectors.users_visible_to_operator``).
Rows naming a person the admin may not see (grants, tokens, agents of another tenant's people) are left out of
their lists and pages (``rows_of_people_for``). Django's auth admin knows nothing of tenants, so this module
re-registers the user admin with the filter."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin as AuthUserAdmin
from django.db.models import QuerySet

from ..constants import OTHER_TENANT_PERSON
from ..selectors import person_visible_to, users_visible_to_operator


def people_for(request):
    """The people ``request.user`` may see and pick."""
    return get_user_model().objects.filter(users_visible_to_operator(user=request.user))


def rows_of_people_for(request, queryset: QuerySet, field: str = "user") -> QuerySet:
    """``queryset`` without the rows whose ``field`` is a person ``request.user`` may not see (another tenant's
    grant holder on a shared server, another tenant's user on a tenant-less token): such rows are left out, not
    counted, as those people are everywhere else."""
    if request.user.is_superuser:
        return queryset
    return queryset.filter(**{f"{field}__in": people_for(request).values("pk")})


def with_person_visible(request, queryset: QuerySet, field: str) -> QuerySet:
    """``queryset`` annotated with ``<field>_visible``: whether ``request.user`` may read the name of the person in
    ``field`` (one subquery for the whole list, not a query per row); read it with ``person_name``."""
    return queryset.annotate(**{f"{field}_visible": person_visible_to(viewer=request.user, field=field)})


def person_name(obj, field: str) -> str:
    """The person in ``obj.<field>`` (who made a grant, a token) by name, or as someone in another tenant where
    the admin may not see them (``with_person_visible``)."""
    person = getattr(obj, field)
    if person is None:
        return "-"
    return str(person) if getattr(obj, f"{field}_visible", False) else OTHER_TENANT_PERSON


class PeopleChoicesMixin:
    """A ModelAdmin or inline whose person fields offer, and accept, only the people the admin may see (a
    person posted from outside the list is refused as an invalid choice)."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.related_model is get_user_model() and "queryset" not in kwargs:
            kwargs["queryset"] = people_for(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.related_model is get_user_model() and "queryset" not in kwargs:
            kwargs["queryset"] = people_for(request)
        return super().formfield_for_manytomany(db_field, request, **kwargs)


class UserAdmin(AuthUserAdmin):
    """Django's user admin over the people this admin may see (the list, each page and the autocomplete)."""

    def get_queryset(self, request):
        return super().get_queryset(request).filter(users_visible_to_operator(user=request.user))


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), UserAdmin)
