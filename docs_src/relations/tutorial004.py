from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation


class Listing(BaseModel):
    headline: str = Field(max_length=30)
    summary: str = Field(max_length=80)

    @relation
    def headline_length(self) -> bool:
        """A headline of 10 to 30 characters."""
        return len(self.headline) >= 10

    @relation
    def summary_says_more(self) -> bool:
        """The summary is at least twice as long as the headline."""
        return len(self.summary) >= 2 * len(self.headline)


client = Client()  # the embedded engine and its default model
listing = client.generate(Listing, "Write a listing for a used red bicycle.")
h, s = len(listing.headline), len(listing.summary)
print(f"{listing.headline!r}: {h} characters, summary {s}")
print("lengths ok:", 10 <= h <= 30 and 2 * h <= s <= 80)
client.close()
