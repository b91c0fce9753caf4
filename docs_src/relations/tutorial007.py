from typing import Literal

from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation


class Order(BaseModel):
    total: int
    days_since: int
    lost: bool


class Refund(BaseModel):
    kind: Literal["refund"]
    amount: int = Field(ge=1, le=500)


class Escalate(BaseModel):
    kind: Literal["escalate"]
    team: Literal["billing", "shipping"]


class Reply(BaseModel):
    kind: Literal["reply"]
    text: str = Field(max_length=60)


class Decision(BaseModel):
    summary: str = Field(max_length=60)
    action: Refund | Escalate | Reply

    @relation
    def refund_rules(self, order: Order) -> bool:
        if isinstance(self.action, Refund):
            return order.days_since <= 30 and self.action.amount <= order.total
        return True

    @relation
    def lost_parcels_go_to_shipping(self, order: Order) -> bool:
        return not order.lost or (self.action.kind == "escalate" and self.action.team == "shipping")


order = Order(total=80, days_since=12, lost=True)
client = Client()  # the embedded engine and its default model
decision = client.generate(
    Decision, "My parcel never arrived and tracking stopped a week ago.", context=order
)
print(decision.summary)
print(repr(decision.action))  # the relations fix the branch and the team
client.close()
