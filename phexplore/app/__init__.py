"""The Streamlit application's own logic, below the pages: session state, charts, naming, report.

:mod:`.state` (the session's working budget, scenarios and runs), :mod:`.charts` (Plotly figures),
:mod:`.naming` (words for codes), :mod:`.guide` (the Start page's walk-through) and :mod:`.report`
(the one-file HTML session report). Pages import these and :mod:`phexplore.api`, never ``engine``.
"""
