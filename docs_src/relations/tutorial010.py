from factorspec_sdk import Client
from factorspec_sdk.domains.trip import SAMPLE_CONTEXT, Itinerary
from factorspec_sdk.graph import SpecCompiler, compile_spec

compiler = SpecCompiler(max_specs=16)  # caches of its own: it shares no spec
spec = compiler.compile_spec(Itinerary, SAMPLE_CONTEXT)
print(compiler.compile_spec(Itinerary, SAMPLE_CONTEXT) is spec, compiler.specs)
print("the shared default's:", compile_spec(Itinerary, SAMPLE_CONTEXT) is spec)

client = Client(compiler=compiler)  # its records' specs are compiled, and kept, here
print(client.compiler is compiler)  # (the model loads on the first generate)
