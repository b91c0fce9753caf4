import datetime as dt

from pydantic import BaseModel

from factorspec_sdk import Client, relation


class Busy(BaseModel):
    start: dt.time
    end: dt.time


class Day(BaseModel):
    """The context: the day, its opening hours, the meeting's length, the busy hours."""

    date: dt.date
    opens: dt.time
    closes: dt.time
    length: dt.timedelta
    busy: list[Busy]


class Slot(BaseModel):
    start: dt.datetime
    end: dt.datetime

    @relation
    def on_the_day_for_its_length(self, day: Day) -> bool:
        return (
            self.start.date() == self.end.date() == day.date  # not past midnight
            and self.end - self.start == day.length
        )

    @relation
    def in_opening_hours(self, day: Day) -> bool:
        return day.opens <= self.start.time() and self.end.time() <= day.closes

    @relation
    def on_a_quarter_hour(self) -> bool:
        return self.start.minute % 15 == 0 and self.start.second == 0

    @relation
    def everyone_free(self, day: Day) -> bool:
        return all(self.end.time() <= b.start or b.end <= self.start.time() for b in day.busy)


day = Day(
    date=dt.date(2026, 12, 7),
    opens=dt.time(9),
    closes=dt.time(17),
    length=dt.timedelta(minutes=45),
    busy=[Busy(start=dt.time(9), end=dt.time(12)), Busy(start=dt.time(13), end=dt.time(17))],
)
client = Client("scripted")  # a random test model; Client() for the default model
slot = client.generate(Slot, "Find 45 minutes for a review on Monday.", context=day)
print(slot.start, "to", slot.end)  # 12:00 to 12:45 or 12:15 to 13:00: the only free slots
Slot.model_validate(slot.model_dump(), context=day)  # the same relations, in Python
