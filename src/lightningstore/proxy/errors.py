"""ProxyError: a refusal of the gateway, answered as an OpenAI-style error body with its status."""

from __future__ import annotations

import orjson
from fastapi.responses import Response

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    503: "service_unavailable",
}


class ProxyError(Exception):
    """The gateway refuses or cannot complete a call; `status` is the HTTP status the agent gets."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    def response(self) -> Response:
        """The OpenAI-shaped error body (clients raise their usual typed errors from it)."""
        return error_response(self.status, self.message, self.param)


def error_response(status: int, message: str, param: str | None = None) -> Response:
    """`{"error": {message, type, param, code}}` with `status`."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")
