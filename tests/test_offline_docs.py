"""`memroute serve`'s /docs and /redoc load every asset from the server itself: they work with
no network."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlparse

import httpx
import pytest



@pytest.mark.parametrize("page,kinds", [("/docs", {"javascript", "css"}),
                                        ("/redoc", {"javascript"})])
async def test_docs_pages_load_their_assets_from_the_server(served, page, kinds) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        html = await client.get(page)
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]
        assets = re.findall(r"""(?:src|href)=["']([^"']+\.(?:js|css))["']""", html.text)
        assert assets, html.text[:500]
        loaded = set()
        for asset in assets:
            url = urljoin(served.url + page, asset)
            assert urlparse(url).netloc == urlparse(served.url).netloc, f"{asset} is remote"
            response = await client.get(url)
            assert response.status_code == 200 and len(response.content) > 10_000, asset
            loaded.add(response.headers["content-type"].split(";")[0].split("/")[-1])
        assert kinds <= loaded
        assert (await client.get("/openapi.json")).json()["info"]["title"] == "memroute"
