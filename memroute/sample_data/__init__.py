"""A small bundled sample: 40 assistant/support turns in 3 sessions, and questions over them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from memroute.memory.models import Episode

SESSIONS_FILE = "assistant_sessions.jsonl"
QUESTIONS_FILE = "questions.json"


@dataclass(frozen=True)
class SampleQuestion:
    kind: str  # direct | split | chain
    question: str
    evidence: tuple[str, ...]  # uids of the turns that answer it


def path(name: str = SESSIONS_FILE) -> Path:
    """The path of a bundled sample file."""
    return Path(str(resources.files(__package__).joinpath(name)))


def episodes() -> list[Episode]:
    """The sample turns, in order, each with its fixed uid."""
    lines = path(SESSIONS_FILE).read_text(encoding="utf-8").splitlines()
    return [Episode(**json.loads(line)) for line in lines if line.strip()]


def questions() -> list[SampleQuestion]:
    """Questions over the sample, with their kind and the uids of their evidence."""
    raw = json.loads(path(QUESTIONS_FILE).read_text(encoding="utf-8"))
    return [SampleQuestion(q["kind"], q["question"], tuple(q["evidence"])) for q in raw]
