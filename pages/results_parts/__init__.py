"""Parts of the Results page (``pages/results.py``), one job per module; not pages themselves.

app.py registers pages explicitly with ``st.navigation``, so nothing here is shown as a page.
"""
