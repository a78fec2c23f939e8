"""One module per paper: its name, its metrics, and the rows it adds to the claims table of each
study that tests it (a function named for the study, registered in claims/tables.py)."""
