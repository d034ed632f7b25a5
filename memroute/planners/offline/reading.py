"""One reading of a question, made once (`read`) and read by every decision of the offline
planner: its parse, the thing it describes, the event it is asked around and whether it asks
how things stand now. Route, judge and rerank signals take these instead of reading the
question again.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from memroute.planners.offline.events import event_of
from memroute.planners.offline.question_parse import QuestionParse, read_question
from memroute.planners.offline.resolve import Descriptor, descriptor
from memroute.time.events import EventRef
from memroute.time.windows import asks_now

READINGS_KEPT = 1024  # questions whose reading is kept


@dataclass(frozen=True)
class QuestionReading:
    """What a question says, read once."""

    text: str
    parse: QuestionParse
    described: Descriptor | None  # the innermost thing it describes but does not name
    event: EventRef | None  # the event it is asked around ("before my trip to Norway")
    asks_now: bool  # it asks how things stand now ("now", "still", the present tense)


@lru_cache(maxsize=READINGS_KEPT)
def read(question: str) -> QuestionReading:
    """The reading of ``question`` (kept: each decision about the same question reads it)."""
    parse = read_question(question)
    return QuestionReading(question, parse, descriptor(question, parse.named),
                           event_of(question), asks_now(question))
