from django.contrib.admin.apps import AdminConfig


class ScoutAdminConfig(AdminConfig):
    """The stock admin with Scout's site: role homes and navigation grouped by job (scoutsite/admin_site.py)."""

    default_site = "scoutsite.admin_site.ScoutAdminSite"

    def ready(self) -> None:
        super().ready()
        from scoutsite import checks  # noqa: F401 - registers Scout's system checks (scoutsite is wiring, no app)
