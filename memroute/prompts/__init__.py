"""Prompt templates, one file each, loaded by name and versioned by the sha256 of the file.

A prompt file has a ``## system`` section and a ``## user`` section. Placeholders are
``string.Template`` names (``$query``), so JSON braces in examples need no escaping.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

from memroute.errors import InvalidInputError

_SECTIONS = ("## system\n", "## user\n")


@dataclass(frozen=True)
class Prompt:
    """A loaded prompt: its name, the version hash of its file, and its two sections."""

    name: str
    sha256: str
    system: str
    user: str

    def render(self, **values: str) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled; a missing value is an error."""
        try:
            system = string.Template(self.system).substitute(values)
            user = string.Template(self.user).substitute(values)
        except KeyError as exc:
            raise InvalidInputError(f"prompt {self.name!r} needs a value for {exc}") from exc
        messages = [{"role": "system", "content": system.strip()},
                    {"role": "user", "content": user.strip()}]
        return [m for m in messages if m["content"]]


@lru_cache(maxsize=None)
def load_prompt(name: str, package: str = __package__) -> Prompt:
    """The prompt ``<name>.md`` in ``package``: by default ``memroute.prompts``; another
    package's prompt folder (the evaluation's, say) loads the same way."""
    resource = files(package).joinpath(f"{name}.md")
    if not resource.is_file():
        raise InvalidInputError(f"no prompt named {name!r} in {package}")
    raw = resource.read_bytes()
    text = raw.decode("utf-8")
    head, user_marker, user = text.partition(_SECTIONS[1])
    _, system_marker, system = head.partition(_SECTIONS[0])
    if not system_marker or not user_marker:
        raise InvalidInputError(f"prompt {name!r} needs a '## system' and a '## user' section")
    return Prompt(name, hashlib.sha256(raw).hexdigest(), system, user)
