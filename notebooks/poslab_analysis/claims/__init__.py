"""Layer 3: the claims tables. In import order: rules.py (the rules of every verdict),
studies/ (each kind of study: how it is read, the frame of its table), papers/ (one module per
paper: its rows in each study that tests it), tables.py (the registry: which papers each study's
table holds) and paper_metrics.py (the paper-metric values the docs quote)."""
