"""Layer 2: intervals over seeds (seeds.py), the gate, paired differences, proportions (Wilson),
the relative effective context length (recl.py), the paired bootstrap (bootstrap.py) and a
passkey curve's reads against training steps (budget_curve.py)."""
