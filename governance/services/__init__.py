"""Governance writes. Each module documents the errors its services raise."""
