"""The preset role groups. Their permissions are set by governance.services.roles.roles_ensure after migrate
(permissions rows exist only once every app has migrated), and again after every flush."""

from django.db import migrations

ROLES = ("Curators", "Approvers", "Operators")


def create_groups(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("governance", "0007_visibility_version"),
    ]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
