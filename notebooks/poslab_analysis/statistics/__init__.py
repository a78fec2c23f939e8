"""Layer 2: intervals over seeds (seeds.py), the gate, paired differences, proportions (Wilson),
the relative effective context length (recl.py) and the paired bootstrap (bootstrap.py)."""
