"""Evaluation: benchmark loaders, the pooled store, metrics and the ``memroute eval`` runner."""
