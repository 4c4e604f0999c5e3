"""The preset roles: what each job may do in the admin, as model permissions (``app_label.codename``).

Approving is not a model permission: it is the object permission ``approve`` on a server or tool, held by a
user or group through a grant (governance.services.permissions). The Approvers group gets it per server from an
operator (Access → Server group grants → add: group Approvers, permission approve, the server)."""

CURATORS = "Curators"
APPROVERS = "Approvers"
OPERATORS = "Operators"

_PHRASES = ("toolalias", "toolkeyword", "toolexample", "toolnegativeexample")
_GRANTS = ("servergroupobjectpermission", "serveruserobjectpermission", "toolgroupobjectpermission",
           "tooluserobjectpermission")  # fmt: skip

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    # Make tools findable: curate titles, purposes and phrases, read the query log, promote learned requests,
    # and accept or reject held definition changes (a curator reads what changed before agents see it).
    CURATORS: (
        "catalog.view_tool",
        "catalog.change_tool",
        "catalog.view_server",
        "catalog.view_toolrevision",
        *(f"catalog.{verb}_{model}" for model in _PHRASES for verb in ("view", "add", "change", "delete")),
        "search.view_querylogentry",
        "search.view_learnedrequest",
        "search.change_learnedrequest",
        "search.view_searchevent",
        "search.view_indexgeneration",
        "governance.view_toolreview",
        "governance.change_toolreview",
        "governance.view_toolpolicy",
        "auth.view_user",  # the search preview runs as a chosen user (what that user's MCP client gets)
    ),
    # Decide risky calls. The inbox lists only tools the person holds ``approve`` on; the decide page shows the
    # tool's description, annotations and risk without catalog permissions.
    APPROVERS: ("governance.view_approvalrequest",),
    # Register servers, grant access, watch sync and health, issue tokens, classify risk, read the audit trail.
    OPERATORS: (
        *(f"catalog.{verb}_server" for verb in ("view", "add", "change", "delete")),
        "catalog.view_tool",
        "catalog.view_syncrun",
        "catalog.view_toolrevision",
        # Watch the index as they watch syncs: each build, whether it ran degraded or failed (read-only; while the
        # install has tenants only a superuser reads it, search.admin.InstallWideAdmin).
        "search.view_indexgeneration",
        *(f"governance.{verb}_{model}" for model in _GRANTS for verb in ("view", "add", "delete")),
        *(
            f"governance.{verb}_{model}"
            for model in ("agent", "agentgrant", "servertenant")
            for verb in ("view", "add", "change", "delete")
        ),
        "governance.view_tenant",
        "governance.view_apitoken",
        "governance.add_apitoken",
        "governance.change_apitoken",
        "governance.view_toolreview",
        "governance.change_toolreview",
        "governance.view_toolpolicy",
        "governance.change_toolpolicy",
        "governance.view_riskclass",
        "governance.view_policyversion",
        "governance.view_entitlement",
        "governance.view_auditevent",
        "governance.view_notificationattempt",
        "auth.view_group",
        "auth.view_user",
    ),
}

ROLE_SUMMARIES = {
    CURATORS: "make tools findable: the search workbench and preview, curation, held changes",
    APPROVERS: "decide risky calls waiting for approval",
    OPERATORS: "register and sync servers, grant access, issue tokens, watch health",
}
