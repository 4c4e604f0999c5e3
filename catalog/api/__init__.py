"""REST API for the catalog's operator side: servers and their sync runs.

Tools (read, filter, curate) are served from ``governance.api``: who may see a tool is governance's
decision, and catalog never imports upward. Access checks come from the API's default permission class
(settings REST_FRAMEWORK), configured by the ``required_*`` attributes of each view."""
