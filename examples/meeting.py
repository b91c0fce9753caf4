"""Meeting scheduling (NATURAL PLAN calendar style): a slot that fits everyone's calendar.

The model, its context and a sample request live in the packaged domain
`factorspec_sdk.domains.meeting`. ``python -m examples.meeting`` validates a hand-written slot
for the sample request.
"""

from __future__ import annotations

from factorspec_sdk.domains.meeting import (
    SAMPLE_CONTEXT,
    SAMPLE_PROMPT,
    Busy,
    Meeting,
    MeetingContext,
    Weekday,
)

__all__ = [
    "SAMPLE_CONTEXT",
    "SAMPLE_PROMPT",
    "Busy",
    "Meeting",
    "MeetingContext",
    "Weekday",
    "main",
]


def main() -> None:
    """Validate a hand-written slot for the sample request and print it."""
    print(SAMPLE_PROMPT, end="\n\n")
    meeting = Meeting.model_validate(
        {"day": "Tuesday", "start_hour": 12, "end_hour": 14}, context=SAMPLE_CONTEXT
    )
    print(f"{meeting.day} {meeting.start_hour}:00-{meeting.end_hour}:00")


if __name__ == "__main__":
    main()
