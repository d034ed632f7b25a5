"""The memory search tool's description and arguments, apart from `memroute.tools` (and
LangChain): the MCP server describes its tools with them before anything else loads."""

from __future__ import annotations

from pydantic import BaseModel, Field

DESCRIPTION = (
    "Search long-term memory (earlier conversations and stored notes) for facts that help "
    "answer a question. Returns numbered results, {page_size} per page, best first. If what "
    "you need is not on the page, call again with the same query and page=1, 2, ..."
)


class MemorySearchInput(BaseModel):
    """The arguments the model fills in."""

    query: str = Field(description="What to look for: a question or a few keywords.")
    page: int = Field(default=0, ge=0, description="Which page of results; 0 is the first.")
