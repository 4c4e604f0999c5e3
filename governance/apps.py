from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _seed_defaults(**kwargs) -> None:
    from .services.policy import policy_defaults_ensure

    policy_defaults_ensure()


class GovernanceConfig(AppConfig):
    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Governance"

    def ready(self) -> None:
        from . import receivers

        receivers.connect()
        # Seeds come back after a flush (transactional tests) as well as after migrate.
        post_migrate.connect(_seed_defaults, sender=self, dispatch_uid="governance-seed-defaults")
