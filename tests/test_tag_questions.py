"""A turn that states something and closes with a tag or a request ("His coach is called
Gareth, I think?", "... can you remember those for me?") is a statement: auto returns it,
not the assistant's reply after it (half E, tune part: "What's Rhys's football coach called
again?" and "Remind me when Ffion's and Nia's birthdays are?" lost their answer turns to
the replies)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from memroute import RetrievalAgent, Scope
from memroute.nlp import asks_itself
from memroute.planners.offline.planner import OfflinePlanner

TOLD = ("Also Kit joined the Harbour Hawks. His coach is called Dominic, I think? Everyone "
        "calls him Dom.")
ASKED = "Who is Kit's swimming coach, do you remember?"


@pytest.mark.parametrize(("sentence", "asks"), [
    ("His coach is called Dominic, I think?", False),
    ("Her birthday is 3 June and his is the day after, can you remember those for me?", False),
    ("Nice, is she still at Tidewave?", True),
    ("So, where are you going?", True),
    ("Could you, maybe, remind me?", True),
    ("You're moving?", True),
])
def test_a_statement_closed_by_a_tag_does_not_ask(sentence: str, asks: bool) -> None:
    assert asks_itself(sentence) is asks


async def test_the_turn_that_tells_is_returned_not_its_reply(memory) -> None:
    turns = [("user", TOLD),
             ("assistant", "Harbour Hawks on Saturdays then. Shall I remind you each week?"),
             ("user", ASKED),
             ("assistant", "I don't have a swimming coach for Kit saved."),
             ("user", "Kit's football boots are too small again."),
             ("assistant", "Want me to add boots to the shopping list?")]
    start = datetime(2025, 3, 1, 12, tzinfo=timezone.utc)
    scope = Scope(org_id=f"tag-{uuid.uuid4().hex[:8]}", project_id="chat", user_id="u")
    await memory.add(scope, [{"content": text, "producer": who, "session_id": "s1",
                              "produced_at": start + timedelta(minutes=i)}
                             for i, (who, text) in enumerate(turns)])
    agent = RetrievalAgent(memory, planner=OfflinePlanner(), context=(0, 0))
    result = await agent.aretrieve("What's Kit's football coach called again?", scope=scope,
                                   k=2)
    assert TOLD in [r.nucleus.content for r in result.results]
