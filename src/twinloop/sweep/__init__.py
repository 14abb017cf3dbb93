"""Scenario x seed x policy sweeps and big searches on Ray (a local Ray by default, a cluster by address).

:mod:`~twinloop.sweep.spec` (the typed sweep file and its cells), :mod:`~twinloop.sweep.cell` (one run, one
row), :mod:`~twinloop.sweep.runner` (cells as Ray tasks, retry once), :mod:`~twinloop.sweep.sink` (Parquet and
the store), :mod:`~twinloop.sweep.summary` (t-intervals across seeds), :mod:`~twinloop.sweep.report` (HTML) and
:mod:`~twinloop.sweep.chunked` (a chunked map over Ray for the planner search and the reliability Monte-Carlo).
"""
