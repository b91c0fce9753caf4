import datetime as dt

from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation


class Calendar(BaseModel):
    opens: dt.date
    closes: dt.date
    blackout: list[dt.date]
    arrival_week: dt.date  # a Monday
    nights: int


class Booking(BaseModel):
    guest: str = Field(max_length=30)
    check_in: dt.date
    nights: int = Field(ge=1, le=28)
    check_out: dt.date

    @relation
    def nights_match(self) -> bool:
        return (self.check_out - self.check_in).days == self.nights

    @relation
    def in_season(self, cal: Calendar) -> bool:
        return cal.opens <= self.check_in and self.check_out <= cal.closes

    @relation
    def avoids_blackouts(self, cal: Calendar) -> bool:
        return self.check_in not in cal.blackout and self.check_out not in cal.blackout

    @relation
    def as_asked(self, cal: Calendar) -> bool:
        """A Friday arrival in the requested week, for the nights asked."""
        week_end = cal.arrival_week + dt.timedelta(days=6)
        friday = self.check_in.weekday() == 4
        return (
            friday and cal.arrival_week <= self.check_in <= week_end and self.nights == cal.nights
        )


cal = Calendar(
    opens=dt.date(2026, 12, 1),
    closes=dt.date(2027, 3, 31),
    blackout=[dt.date(2026, 12, 24), dt.date(2026, 12, 25)],
    arrival_week=dt.date(2027, 1, 4),
    nights=4,
)
client = Client()  # the embedded engine and its default model
booking = client.generate(
    Booking, "Book 4 nights for Ingrid, arriving on Friday in the week of 4 January.", context=cal
)
print(f"{booking.guest}: {booking.check_in} to {booking.check_out}")  # the relations fix both
print("dates ok:", (booking.check_out - booking.check_in).days == booking.nights == 4)
client.close()
