"""The documented limits of one memory call, declared once (every face imports them)."""

MAX_QUERY_CHARS = 8192  # of one query
MAX_K = 1000  # results of one search
MAX_CONTEXT = 50  # neighbours on either side of a hit
MAX_EXTRA_QUERIES = 16  # queries of one multi-query rerank besides the first
