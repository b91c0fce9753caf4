"""Runnable examples: Pydantic models with relations, their contexts and sample prompts."""
