"""memroute as a service: REST (FastAPI) and MCP over the same `Memory` and
`RetrievalAgent`, keyed to tenants. A face over the library; the library never imports it.

Needs the ``serve`` extra: ``pip install 'memroute[serve]'``. The names load on first use, so
the MCP server over stdio (`memroute.service.mcp_server`) starts without FastAPI.
"""

from typing import TYPE_CHECKING, Any

__all__ = ["KeyGrant", "KeyStore", "create_app", "openapi_schema"]

_LAZY = {"create_app": "memroute.service.app", "openapi_schema": "memroute.service.app",
         "KeyGrant": "memroute.service.keys", "KeyStore": "memroute.service.keys"}

if TYPE_CHECKING:
    from memroute.service.app import create_app, openapi_schema
    from memroute.service.keys import KeyGrant, KeyStore


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memroute.service' has no attribute {name!r}")
