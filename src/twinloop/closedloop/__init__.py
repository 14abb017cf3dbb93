"""The closed loop: the twin as a cluster, the loop-off and loop-on passes of ``twinloop run``, and scoring
against the injected ground truth. It sits above both ``twinloop.twin`` and ``twinloop.ops`` (which knows no twin).

Its modules: ``cluster`` (the twin behind the :class:`~twinloop.ops.ports.Cluster` port), ``adapter`` (actions as twin
commands), ``passes`` (:func:`~twinloop.closedloop.passes.run_pass`, ``compare``, ``outcome_metrics``), ``scenario_run``
(:func:`~twinloop.closedloop.scenario_run.run_scenario`: ``twinloop run``'s passes, store, records and report),
``labels`` (ground truth), ``twin_history`` (rack heat and the queue's known-ahead changes). The studies built on
it (classifier data sets, seeded random halls, the feedback learners on twin runs) live in :mod:`twinloop.lab`.
"""
