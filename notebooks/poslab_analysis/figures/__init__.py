"""Layer 4: the figures. In import order: style.py (one colour, label and legend order per
encoding), figure_sets.py (which figures a study gets: one description for both backends),
plots.py, plots_extension.py, plots_passkey.py, plots_bench.py (static: matplotlib, PNG and
SVG), charts.py, charts_extension.py (interactive: Vega-Lite for the report), and the two
backends, plots_backend.py and charts_backend.py (each: figure kind -> drawing function)."""
