"""TopDown's constrained least squares: the multi-pass non-negative weighted least squares of each
family (TDA §7.2, eq. 7.5–7.6). :mod:`.route` runs the passes and holds the routing table; the
problem (:mod:`.problem`, :mod:`.general`), the solvers (:mod:`.closed_form`, :mod:`.family_admm`,
:mod:`.projected_cg`, PIQP and Clarabel) and their one KKT verifier (:mod:`.kkt`) and settings
(:mod:`.settings`) live beside it; docs/topdown.md "The least-squares routes" has the measurements.
"""
