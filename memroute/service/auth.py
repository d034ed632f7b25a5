"""Who is calling, and whether the scope they ask for lies inside their key.

Both faces (REST and MCP over HTTP) take the key as ``Authorization: Bearer <key>``; the MCP
server over stdio takes it from ``MEMROUTE_API_KEY`` or ``--api-key``. A request is checked
before anything is read or written.
"""

from __future__ import annotations

from collections.abc import Mapping

from memroute.errors import NotAuthenticatedError, ScopeForbiddenError
from memroute.memory.models import Scope
from memroute.service.keys import KeyGrant, KeyStore, unbound_store_org


def bearer_token(headers: Mapping[str, str] | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, if any."""
    value = (headers or {}).get("authorization") or ""
    scheme, _, token = value.partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


async def authenticate(keys: KeyStore, token: str | None) -> KeyGrant:
    """The grant of ``token``, or `NotAuthenticatedError`."""
    if not token:
        raise NotAuthenticatedError("missing API key: send 'Authorization: Bearer <key>' "
                                    "(create one with `memroute keys create`)")
    grant = await keys.verify(token)
    if grant is None:
        raise NotAuthenticatedError("invalid or revoked API key")
    return grant


def authorize(grant: KeyGrant, scope: Scope) -> Scope:
    """``scope`` if the key reaches it, else `ScopeForbiddenError` (naming what it reaches);
    no key reaches the org of the LangGraph store built without a tenant (`unbound_store_org`)."""
    if problem := unbound_store_org(scope.org_id):
        raise ScopeForbiddenError(problem)
    if not grant.allows(scope):
        reach = [f"org {grant.org_id!r}"]
        if grant.project_ids is not None:
            reach.append(f"projects {list(grant.project_ids)}")
        if grant.user_ids is not None:
            reach.append(f"users {list(grant.user_ids)}")
        raise ScopeForbiddenError(
            f"this API key does not reach scope {scope.org_id}/{scope.project_id}"
            f"{'/' + scope.user_id if scope.user_id else ''}; it is bound to {', '.join(reach)}")
    return scope
