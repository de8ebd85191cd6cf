"""The histogram schemas TopDown measures: attributes, marginal queries and their answer cells.

:mod:`.attributes` is the one declaration of the attributes, recodes and schemas (production's
``redistricting2020`` HHGQ × VOTINGAGE × HISPANIC × CENRACE, 2,016 cells; RI 2010's VOTINGAGE ×
RACEETH, 16 cells; the housing units' OCCUPANCY); every other module here derives its view from it:
:mod:`.marginals` parses a marginal query (``HISPANIC*CENRACE``) into its answer cells;
:mod:`.query_cells` counts a query's cells from its name; :mod:`.ri_fold` says how RI's RACEETH
folds production's HISPANIC × CENRACE (TDA §5.1, Tables 6–7).
"""
