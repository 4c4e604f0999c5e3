"""OpenAPI services as upstream servers: their operations become catalog tools, called over HTTP.

Part of the one module that talks to upstream servers (with ``catalog.upstream`` for MCP): sync lists
operations with ``openapi_list_tools``, the gateway calls one with ``openapi_call``.
"""

from catalog.egress import EgressRefused, egress_check

from .document import BINDING_KEY, OperationListing, openapi_document_load, openapi_list_tools, openapi_operations
from .execute import openapi_call, openapi_target

__all__ = [
    "BINDING_KEY",
    "EgressRefused",
    "OperationListing",
    "egress_check",
    "openapi_call",
    "openapi_document_load",
    "openapi_list_tools",
    "openapi_operations",
    "openapi_target",
]
