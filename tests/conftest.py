"""Shared fixtures. Personas (owner, approver, member, outsider, superuser) are added by governance."""
