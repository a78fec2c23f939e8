"""The encodings by name, as every table and figure shows them: one order (the families of
docs/05-beyond.md: no encoding, absolute, relative with a learned table, relative bias,
rotation) and one label each. Figures add a colour per encoding (figures/style.py)."""

ENCODING_ORDER = ["none", "sinusoidal", "learned", "shaw", "transformer_xl", "deberta",
                  "t5_bias", "alibi", "kerple", "fire", "rope", "xpos",
                  "example_distance_bias"]

ENCODING_LABELS = {
    "none": "NoPE", "sinusoidal": "sinusoidal", "learned": "learned", "shaw": "Shaw",
    "transformer_xl": "Transformer-XL", "deberta": "DeBERTa", "t5_bias": "T5 bias",
    "alibi": "ALiBi", "kerple": "KERPLE", "fire": "FIRE", "rope": "RoPE", "xpos": "xPos",
    "example_distance_bias": "example",
}


def ordered(values):
    """Encodings in the fixed order, anything else after them alphabetically."""
    values = list(dict.fromkeys(v for v in values if v == v))
    known = [v for v in ENCODING_ORDER if v in values]
    return known + sorted((v for v in values if v not in known), key=str)


def label(name):
    return ENCODING_LABELS.get(name, str(name))
