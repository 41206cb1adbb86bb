"""Benchmarks for Cascade's data plane, run on the emulated fabric (`cascade bench ...`).

Benchmarks are not tests: they take minutes, need root and the local cluster's fabric, and
print a table and write JSON. Pure pieces (bounds, aggregation, plans, tables) are unit-tested.
"""
