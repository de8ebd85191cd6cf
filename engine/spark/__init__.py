"""The Spark backend: where a run's units of work and data live when one machine is not enough.

A backend of the one run pipeline, not a second engine (docs/science.md §8):
:mod:`engine.spark.session` makes the session (classic master or Spark Connect),
:mod:`engine.spark.phsafe` does PHSafe's truncate-and-join and grouped counts as DataFrame
operations with the engine's own hash and cell definitions. Everything uses the DataFrame API with
Arrow, never RDDs, so it runs over Spark Connect. Importing this package does not import pyspark.
"""
