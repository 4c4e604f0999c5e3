"""Governance constants: token format, scopes, permission codenames."""

# API tokens: "scout_" + 43 url-safe characters (256 random bits). The prefix makes leaked tokens easy to
# find with secret scanners; only a SHA-256 of the whole string is stored.
TOKEN_PREFIX = "scout_"
TOKEN_SECRET_BYTES = 32
TOKEN_DISPLAY_CHARS = 10  # how much of the raw token the admin keeps to tell tokens apart
# The last hop of every token principal's delegation chain: the gateway that acts for the user and agents.
GATEWAY_HOP = "scout-gateway"

# Token scopes. "server:<slug>" scopes, when present, restrict the token to those servers.
SCOPE_DISCOVER = "discover"
SCOPE_EXECUTE = "execute"
SCOPE_APPROVE = "approve"
# The REST API (/api/v1/) accepts a token only with this scope; the others still narrow what it may do there
# (discover: tools and search; approve: the approval inbox). execute is never used by the API.
SCOPE_API = "api"
BASE_SCOPES = frozenset({SCOPE_DISCOVER, SCOPE_EXECUTE, SCOPE_APPROVE, SCOPE_API})
SERVER_SCOPE_PREFIX = "server:"
# Most "server:<slug>" scopes one token names. Each search and call filters on the token's servers, so a token naming
# thousands (any token with the api scope mints one over REST) slowed every one of its searches (12,000: 1.6-2x). A
# token naming more is refused at creation, and one stored before this limit is refused when verified.
MAX_TOKEN_SERVER_SCOPES = 100
# A scope's slug is a server's (catalog.Server.slug, 200 characters at most).
MAX_SCOPE_SLUG_CHARS = 200

# Object-permission codenames declared on catalog.Server and catalog.Tool, by action.
PERMISSION_ACTIONS = ("discover", "execute", "approve")


# Approval ids: "apr_" + 22 url-safe characters (128 random bits), never guessable (T12).
APPROVAL_ID_PREFIX = "apr_"
APPROVAL_ID_BYTES = 16
# How long a pending request waits for a decision before it expires.
APPROVAL_PENDING_TTL_SECONDS = 24 * 3600

# Canonical arguments: limits so a hostile payload fails with a clear error, not a RecursionError.
MAX_ARGUMENT_DEPTH = 64
MAX_ARGUMENT_BYTES = 1024 * 1024

# Z8: how many agents may stand between the human and the gateway (settings.SCOUT_DELEGATION_MAX_AGENTS).
# A token whose agent sits deeper is refused when verified; agents cannot be created deeper.
DEFAULT_DELEGATION_MAX_AGENTS = 3


def delegation_max_agents() -> int:
    from django.conf import settings

    return int(getattr(settings, "SCOUT_DELEGATION_MAX_AGENTS", DEFAULT_DELEGATION_MAX_AGENTS))


def delegation_max_chain() -> int:
    """Entries in a delegation chain at most: the human, the agents, the gateway."""
    return delegation_max_agents() + 2


# Visibility cache: entries live this long at most even if an invalidation were missed.
VISIBILITY_CACHE_TTL_SECONDS = 300
VISIBILITY_VERSION_KEY = "governance:visibility:version"

# How an admin or API page names a person of a tenant the reader does not act in (Z12: for them, that tenant's
# people do not exist): who made a grant or a token, who asked for an approval, whose audit event it is.
OTHER_TENANT_PERSON = "someone in another tenant"
# Likewise an agent or a group of another tenant (its name is that tenant's business), and the tenant itself.
OTHER_TENANT_AGENT = "an agent in another tenant"
OTHER_TENANT_GROUP = "a group in another tenant"
OTHER_TENANT = "another tenant"
