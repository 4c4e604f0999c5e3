"""REST API for governance: who is calling (tokens, sessions), tools as a caller may see them, approvals,
tokens and the audit trail."""
