"""Trace replay: production arrival patterns against Cascade's OpenAI-compatible gateway.

`cascade bench replay` reads a request trace (`trace`), turns it into a schedule the small
models on these machines can serve and says how (`scale`), builds token-exact request
bodies (`prompts`), sends them open-loop at their arrival times and records every token's
arrival (`client`, `sse`), then summarizes latency, throughput and SLO attainment per
request class (`metrics`) into a table and JSON (`report`). `run` ties them together.

Everything but `client` and `run` is pure and unit-tested without a server.
"""
