"""Layer 1: a study's result files as tables, and the encodings' names (no statistics)."""
