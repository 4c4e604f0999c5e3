"""REST API wiring shared by every app's ``api`` package: error shape, pagination, routes and schema."""
