"""People lists narrowed to an admin's tenants (Z12): the auth user list, the user autocomplete every form's
person field asks (grants, tokens, agents) and the people those forms accept show shared people (in no tenant)
and members of the admin's tenants; superusers see everyone (``governance.selectors.users_visible_to_operator``).
Django's auth admin knows nothing of tenants, so this module re-registers the user admin with the filter."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin as AuthUserAdmin

from ..selectors import users_visible_to_operator


def people_for(request):
    """The people ``request.user`` may see and pick."""
    return get_user_model().objects.filter(users_visible_to_operator(user=request.user))


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
