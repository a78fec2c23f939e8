"""Layer 4: the figures (style.py: one colour, label and legend order per encoding)."""
