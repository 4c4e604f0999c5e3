"""Catalog write services. Import from the submodules, e.g. ``catalog.services.apply``."""
