"""One module per kind of study: how its claims are read from its results (the selections the
papers' rows share) and the frame of its table (the lines around the papers' rows)."""
