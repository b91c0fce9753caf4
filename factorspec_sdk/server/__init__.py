"""The server stage of the FactorSpec pipeline."""
