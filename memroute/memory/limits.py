"""The documented limits of one memory call, declared once (every face imports them)."""

MAX_QUERY_CHARS = 8192  # of one query
MAX_K = 1000  # results of one search
MAX_CONTEXT = 50  # neighbours on either side of a hit
MAX_EXTRA_QUERIES = 16  # queries of one multi-query rerank besides the first
MAX_LIST = 1000  # episodes, uids or scopes of one lookup (get, recent, list_scopes)
MAX_OFFSET = 100_000  # rows skipped by one paged lookup
