"""One-off measurements behind docs/benchmarks.md's "What changed" (search speed): kept in git
history only (docs/research.md says where)."""
