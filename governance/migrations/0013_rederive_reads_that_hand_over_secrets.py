from django.db import migrations


def rederive_unclassified_reads(apps, schema_editor):
    """Unclassified read policies were derived before reads that hand over secrets (everything::get-env) became
    high-risk reads: re-derive them on upgrade, not at the tool's next change. Only ever makes a policy stricter
    (classification_derive never returns less than the hints)."""
    from governance.classification import classification_derive

    ToolPolicy = apps.get_model("governance", "ToolPolicy")
    RiskClass = apps.get_model("governance", "RiskClass")
    risks = {risk.name: risk for risk in RiskClass.objects.all()}
    policies = ToolPolicy.objects.filter(classified_by_admin=False, operation_class="read").exclude(
        risk_class__name="high"
    )
    for policy in policies.select_related("tool").iterator():
        tool = policy.tool
        derived = classification_derive(
            annotations=tool.annotations, name=tool.name, title=tool.upstream_title, description=tool.description
        )
        if not derived.note or derived.risk not in risks:
            continue
        policy.operation_class = derived.operation_class
        policy.reversibility = derived.reversibility
        policy.risk_class = risks[derived.risk]
        policy.classification_note = derived.note
        policy.save(update_fields=["operation_class", "reversibility", "risk_class", "classification_note"])


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0012_tenant_approval_webhook"),
        ("catalog", "0001_initial"),
    ]

    operations = [migrations.RunPython(rederive_unclassified_reads, migrations.RunPython.noop)]
