"""The model gateway: agents call the LLM through `/proxy/...`; every call becomes one LLM span.

`lightningstore.server.build_app` mounts it on the store server's app. FastAPI and httpx are imported here.
"""

from lightningstore.proxy.config import ProxyConfig
from lightningstore.proxy.gateway import Gateway
from lightningstore.proxy.routing import endpoint_order

__all__ = ["Gateway", "ProxyConfig", "endpoint_order"]
