"""Drafts (certain tokens and guesses), the width policy, verification and the decoding loop."""
