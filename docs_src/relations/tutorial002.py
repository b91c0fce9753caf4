from factorspec_sdk.domains.trip import SAMPLE_CONTEXT, Itinerary
from factorspec_sdk.graph import AtLeast, compile_spec

spec = compile_spec(Itinerary, SAMPLE_CONTEXT)
print(spec.describe())  # variables, factors, components, list bounds

oracle = spec.new_oracle()
# With at least one stay, which cities can the first stay be in?
print(oracle.feasible_values((("len(stays)", AtLeast(1)),), "stays[0].city"))
# And once the first stay is in Copenhagen, what is determined?
facts = (("len(stays)", AtLeast(1)), ("stays[0].city", "Copenhagen"))
for var, (value, _why) in sorted(oracle.determined(facts).items())[:6]:
    print(f"{var} = {value!r}")
