from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _seed_defaults(**kwargs) -> None:
    from .services.policy import policy_defaults_ensure

    policy_defaults_ensure()


def _roles_ensure(app_config=None, using="default", **kwargs) -> None:
    from django.apps import apps

    # Once per migrate or flush, after the last app: every app's permissions exist by then.
    if app_config is not list(apps.get_app_configs())[-1]:
        return
    from .services.roles import roles_ensure

    roles_ensure()


class GovernanceConfig(AppConfig):
    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Governance"

    def ready(self) -> None:
        from catalog.scope import (
            server_claim_set,
            server_fields_locked_set,
            server_scope_set,
            servers_fields_locked_set,
            tool_count_scope_set,
        )

        from . import receivers
        from .api.selectors import (
            server_claim_for_request,
            server_fields_locked_for_request,
            servers_fields_locked_for_request,
            servers_in_api_scope,
            tools_counted_for_request,
        )

        receivers.connect()
        server_scope_set(servers_in_api_scope)  # the catalog API's servers: shared ones and the caller's tenant's
        server_fields_locked_set(server_fields_locked_for_request)  # what the caller may not set on them
        servers_fields_locked_set(servers_fields_locked_for_request)  # the same for a list, in a few queries
        server_claim_set(server_claim_for_request)  # a tenant's caller registers their tenant's servers
        tool_count_scope_set(tools_counted_for_request)  # an agent's token counts only its agent's tools
        # Seeds come back after a flush (transactional tests) as well as after migrate.
        post_migrate.connect(_seed_defaults, sender=self, dispatch_uid="governance-seed-defaults")
        # Role groups span apps (catalog, search): set them once the last app has migrated.
        post_migrate.connect(_roles_ensure, dispatch_uid="governance-roles-ensure")
