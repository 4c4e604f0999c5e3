"""People and group lists narrowed to an admin's tenants (Z12): the auth user list, the user autocomplete every
form's person field asks (grants, tokens, agents) and the people those forms accept show shared people (in no
tenant) and members of the admin's tenants; superusers see everyone (``selectors.users_visible_to_operator``).
Groups likewise (``selectors.groups_visible_to_operator``). Rows naming a person or group the admin may not see
(grants, tokens, agents of another tenant's people, another tenant's group's grants) are left out of their lists
and pages (``rows_of_people_for``, ``rows_of_groups_for``). Django's auth admin knows nothing of tenants, so this
module re-registers the user and group admins with the filter."""

import copy

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin as AuthGroupAdmin
from django.contrib.auth.admin import UserAdmin as AuthUserAdmin
from django.contrib.auth.forms import ReadOnlyPasswordHashWidget
from django.contrib.auth.models import Group, Permission
from django.db.models import Q, QuerySet

from catalog.admin.titles import TitledAdminMixin

from ..constants import OTHER_TENANT_PERSON
from ..selectors import groups_visible_to_operator, person_visible_to, users_visible_to_operator


def people_for(request):
    """The people ``request.user`` may see and pick."""
    return get_user_model().objects.filter(users_visible_to_operator(user=request.user))


def groups_for(request):
    """The groups ``request.user`` may see and pick (``groups_visible_to_operator``)."""
    return Group.objects.filter(groups_visible_to_operator(user=request.user))


def rows_of_groups_for(request, queryset: QuerySet, field: str = "group") -> QuerySet:
    """``queryset`` without the rows whose ``field`` is a group ``request.user`` may not see (another tenant's group
    holding a grant on a shared server): left out, not counted, as that tenant's people are."""
    if request.user.is_superuser:
        return queryset
    return queryset.filter(**{f"{field}__in": groups_for(request).values("pk")})


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


def _choosable(request, model) -> QuerySet | None:
    if model is get_user_model():
        return people_for(request)
    if model is Group:
        return groups_for(request)
    return None


class PeopleChoicesMixin:
    """A ModelAdmin or inline whose person and group fields offer, and accept, only the people and groups the admin
    may see (one posted from outside the list is refused as an invalid choice). Saving a ModelAdmin's form keeps
    the people and groups it did not offer (another tenant's members of an entitlement, a person's other groups)."""

    def choosable(self, request, db_field) -> QuerySet | None:
        """What ``db_field`` offers ``request.user``, or None for its default choices."""
        return _choosable(request, db_field.related_model)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        choosable = self.choosable(request, db_field)
        if choosable is not None and "queryset" not in kwargs:
            kwargs["queryset"] = choosable
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        choosable = self.choosable(request, db_field)
        if choosable is not None and "queryset" not in kwargs:
            kwargs["queryset"] = choosable
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_related(self, request, form, formsets, change) -> None:
        kept = {}
        if change and not request.user.is_superuser:
            for field in form.instance._meta.many_to_many:
                choosable = self.choosable(request, field)
                if choosable is not None and field.name in form.cleaned_data:
                    related = getattr(form.instance, field.name)
                    kept[field.name] = list(related.exclude(pk__in=choosable.values("pk")).values_list("pk", flat=True))
        super().save_related(request, form, formsets, change)
        for name, pks in kept.items():
            getattr(form.instance, name).add(*pks)


class PasswordSummaryWidget(ReadOnlyPasswordHashWidget):
    """The password's summary without Django's "Reset password" button, for those who may only view the person:
    the button led operators and curators (who read people, never change them) to a "not part of your role" page."""

    template_name = "admin/auth/password_summary.html"


def permissions_held_by(user) -> QuerySet:
    """The model permissions ``user`` holds, directly or through a group (whether or not active)."""
    held = Permission.objects.filter(Q(user=user) | Q(group__user=user)).values("pk")
    return Permission.objects.filter(pk__in=held)


def _outranks(person, admin_user) -> bool:
    """Whether ``person`` holds more than ``admin_user``: is a superuser, or holds a model permission they lack."""
    if admin_user.is_superuser:
        return False
    return person.is_superuser or permissions_held_by(person).exclude(pk__in=permissions_held_by(admin_user)).exists()


class UserAdmin(TitledAdminMixin, PeopleChoicesMixin, AuthUserAdmin):
    """Django's user admin over the people this admin may see (the list, each page and the autocomplete); a
    person's groups offer only the groups the admin may see, and so does the list's group filter (the groups of the
    people listed: Django's offered every group).

    Nobody is raised above the admin (T-escalation): a non-superuser with ``auth.change_user`` only reads (no
    change, password reset or delete) a person who outranks them, never sets ``is_superuser``, and grants only the
    permissions and groups they hold; those a person holds beyond them are kept on save."""

    list_filter = ("is_staff", "is_superuser", "is_active", ("groups", admin.RelatedOnlyFieldListFilter))
    list_title = "People — staff sign in here; everyone calls tools with API tokens"

    def object_title(self, request, obj) -> str:
        return f"Person {obj.get_username()}"

    def get_queryset(self, request):
        return super().get_queryset(request).filter(users_visible_to_operator(user=request.user))

    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and not (obj and _outranks(obj, request.user))

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and not (obj and _outranks(obj, request.user))

    def get_readonly_fields(self, request, obj=None):
        readonly = super().get_readonly_fields(request, obj)
        return readonly if request.user.is_superuser else (*readonly, "is_superuser")

    def choosable(self, request, db_field) -> QuerySet | None:
        if request.user.is_superuser:
            return super().choosable(request, db_field)
        if db_field.name == "groups":
            return groups_for(request).filter(pk__in=request.user.groups.values("pk"))
        if db_field.name == "user_permissions":
            return permissions_held_by(request.user)
        return super().choosable(request, db_field)

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        if obj is not None and not self.has_change_permission(request, obj):
            # A copy: the declared field is shared by every form class made from UserChangeForm.
            password = copy.deepcopy(form.base_fields["password"])
            password.widget = PasswordSummaryWidget()
            form.base_fields["password"] = password
        return form


class GroupAdmin(TitledAdminMixin, PeopleChoicesMixin, AuthGroupAdmin):
    """Django's group admin over the groups this admin may see (the list, each page and the autocomplete of every
    grant form): never another tenant's group (``groups_visible_to_operator``). A non-superuser adds to a group
    only permissions they hold (its members would get them: a way to grant oneself any permission through one's own
    group); the group's others are kept on save."""

    list_title = "Groups — roles (Curators, Approvers, Operators) and teams that hold grants"

    def object_title(self, request, obj) -> str:
        return f"Group {obj.name}"

    def get_queryset(self, request):
        return super().get_queryset(request).filter(groups_visible_to_operator(user=request.user))

    def choosable(self, request, db_field) -> QuerySet | None:
        if db_field.name == "permissions" and not request.user.is_superuser:
            return permissions_held_by(request.user)
        return super().choosable(request, db_field)


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), UserAdmin)
admin.site.unregister(Group)
admin.site.register(Group, GroupAdmin)
