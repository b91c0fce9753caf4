"""The tokens stage of the FactorSpec pipeline."""
