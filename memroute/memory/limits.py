"""The documented limits of one memory call, declared once (every face imports them)."""

from memroute.time.limits import MAX_WINDOW_DAYS  # noqa: F401  (time declares it)

DEFAULT_PROJECT = "default"  # the project of a scope that names none
MAX_QUERY_CHARS = 8192  # of one query
MAX_LEXICAL_TERMS = 32  # distinct terms (after stemming and stop words) the lexical lane uses
LEXICAL_CANDIDATES = 800  # matching sentences the lexical lane ranks, at most
LEXICAL_RARE_TERMS = 8  # of those terms, the rarest the lexical lane searches
LEXICAL_COMMON_FREQ = 0.01  # a term in more than this share of sentences is too common to search
ENTITY_CANDIDATES_PER_KEY = 1000  # sentences naming one of a query's entities the entity lane ranks
MAX_EPISODES_PER_CALL = 5000  # episodes of one add or upsert (one transaction)
MAX_CHARS_PER_CALL = 10_000_000  # content characters of one add or upsert, all episodes
MAX_K = 1000  # results of one search
MAX_ID_CHARS = 256  # of an episode's uid, producer or session id
MAX_CONTEXT = 50  # neighbours on either side of a hit
MAX_EXTRA_QUERIES = 16  # queries of one multi-query rerank besides the first
MAX_LIST = 1000  # episodes, uids or scopes of one lookup (get, recent, list_scopes)
MAX_OFFSET = 100_000  # rows skipped by one paged lookup
