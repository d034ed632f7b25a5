"""memroute as a service: REST (FastAPI) and MCP over the same `Memory` and
`RetrievalAgent`, keyed to tenants. A face over the library; the library never imports it.

Needs the ``serve`` extra: ``pip install 'memroute[serve]'``.
"""

from memroute.service.app import create_app, openapi_schema
from memroute.service.keys import KeyGrant, KeyStore

__all__ = ["KeyGrant", "KeyStore", "create_app", "openapi_schema"]
