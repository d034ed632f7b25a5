"""The limits of time reading, declared once (no imports: the CLI's cold path reads them)."""

MAX_WINDOW_DAYS = 31  # days a window search looks for in the sentences (a month's)
