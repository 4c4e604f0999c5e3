from django.apps import AppConfig


class McpgatewayConfig(AppConfig):
    name = "mcpgateway"
    default_auto_field = "django.db.models.BigAutoField"
