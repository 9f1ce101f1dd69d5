"""StoreClient: the LightningStore contract over HTTP, on its own keep-alive connections."""

from lightningstore.client.store_client import StoreClient

__all__ = ["StoreClient"]
