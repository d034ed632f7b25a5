"""The offline planner: question syntax, entity bridging and sufficiency heuristics, no LLM."""
