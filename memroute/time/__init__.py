"""Time in memroute: when a question is asked (`as_of`), read the same way on every face."""

from memroute.time.as_of import (
    AS_OF_HELP,
    AS_OF_RANGE,
    AsOf,
    as_of_text,
    from_wall_clock,
    parse_as_of,
    wall_clock,
)

__all__ = ["AS_OF_HELP", "AS_OF_RANGE", "AsOf", "as_of_text", "from_wall_clock", "parse_as_of",
           "wall_clock"]
