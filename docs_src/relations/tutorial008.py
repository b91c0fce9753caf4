from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation


class Site(BaseModel):
    taken: list[str]


class Signup(BaseModel):
    username: str = Field(min_length=3, max_length=12)
    password: str = Field(min_length=8, max_length=16)
    confirm_password: str = Field(max_length=16)

    @relation
    def username_is_free(self, site: Site) -> bool:
        return self.username not in site.taken and self.username != self.password

    @relation
    def passwords_match(self) -> bool:
        return self.confirm_password == self.password


site = Site(taken=["admin", "root", "alice"])
client = Client()  # the embedded engine and its default model
result = client.generate(
    Signup, "Sign up Alice Liddell to the forum.", context=site, return_result=True
)
signup = result.value
print(signup.username, signup.username not in site.taken)
print("confirmed:", signup.confirm_password == signup.password)  # copied: certain tokens
print(result.stats.summary())
client.close()
