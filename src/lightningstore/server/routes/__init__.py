"""The API routers, one per noun."""
