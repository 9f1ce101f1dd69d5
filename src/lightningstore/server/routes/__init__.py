"""The store API's endpoints, one module per noun; `server.route_table` gives each its method and path."""
