"""Other libraries' call shapes over a FactorSpec server.

`openai_compat.from_openai` wraps an ``openai.OpenAI`` (or ``AsyncOpenAI``) client in
Instructor's shape: ``client.chat.completions.create(response_model=Model, context=...,
max_retries=...)`` returns a ``Model`` instance whose relations hold.
"""
