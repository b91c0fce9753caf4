"""The bench stage of the FactorSpec pipeline."""
