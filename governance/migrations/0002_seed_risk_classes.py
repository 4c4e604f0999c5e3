from datetime import timedelta

from django.db import migrations

RISK_CLASSES = [
    # name, rank, every call needs approval, mutating calls need approval, approval usable for, description
    ("low", 1, False, False, timedelta(hours=1), "Read-only or trivially reversible; no approval"),
    ("moderate", 2, False, True, timedelta(minutes=30), "Reversible changes; mutating calls need approval"),
    ("high", 3, True, True, timedelta(minutes=15), "Irreversible or broad effect; every call needs approval"),
    ("critical", 4, True, True, timedelta(minutes=5), "Production-critical; every call needs approval"),
]


def seed(apps, schema_editor):
    RiskClass = apps.get_model("governance", "RiskClass")
    PolicyVersion = apps.get_model("governance", "PolicyVersion")
    for name, rank, every_call, mutating, ttl, description in RISK_CLASSES:
        RiskClass.objects.update_or_create(
            name=name,
            defaults={
                "rank": rank,
                "requires_approval": every_call,
                "requires_approval_for_mutating": mutating,
                "approval_ttl": ttl,
                "description": description,
            },
        )
    PolicyVersion.objects.get_or_create(number=1, defaults={"reason": "initial policy"})


class Migration(migrations.Migration):
    dependencies = [("governance", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
