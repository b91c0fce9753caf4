import datetime as dt

from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation


class Office(BaseModel):
    day: dt.date
    opens: dt.time
    closes: dt.time
    minutes: int


class Meeting(BaseModel):
    title: str = Field(max_length=40)
    start: dt.datetime
    end: dt.datetime
    reminder: dt.time

    @relation
    def as_asked(self, office: Office) -> bool:
        length = dt.timedelta(minutes=office.minutes)
        return self.start.date() == office.day and self.end - self.start == length

    @relation
    def in_office_hours(self, office: Office) -> bool:
        return office.opens <= self.start.time() and self.end.time() <= office.closes

    @relation
    def on_the_hour(self) -> bool:
        return self.start.minute == 0 and self.start.second == 0

    @relation
    def reminder_before(self) -> bool:
        return self.reminder == (self.start - dt.timedelta(minutes=15)).time()


office = Office(day=dt.date(2026, 12, 7), opens=dt.time(9), closes=dt.time(17), minutes=90)
client = Client()  # the embedded engine and its default model
meeting = client.generate(
    Meeting, "Schedule a 90-minute design review on Monday 7 December.", context=office
)
print(meeting.title, meeting.start, meeting.end, meeting.reminder)
print("length:", meeting.end - meeting.start)  # the relations fix it: 1:30:00
print("in hours:", dt.time(9) <= meeting.start.time() and meeting.end.time() <= dt.time(17))
client.close()
