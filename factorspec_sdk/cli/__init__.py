"""The `factorspec` command line."""
