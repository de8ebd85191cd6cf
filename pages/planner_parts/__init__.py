"""Parts of the planner pages (TopDown, PHSafe) and of the Scenarios comparison, one job per module:
the baseline bar (baseline, pin, reset, scale by ±x%), the committee's table, the TopDown share
editors and the TopDown heatmap and table. Not pages themselves: app.py registers pages explicitly
with ``st.navigation``.
"""
