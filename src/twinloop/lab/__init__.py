"""Studies apart from the product: code that tests and benchmarks use to evaluate twinloop, never the CLI or web.

``classifier_dataset`` (labelled incidents from twin runs) and ``classifier_metrics`` (scoring a classifier),
``fault_scenarios`` and ``forecast_scenarios`` (seeded random halls), ``feedback_eval`` (the feedback learners on
twin runs), ``detector_data`` (synthetic fleets with injected faults) and ``nab_windows`` (scoring alarms against
labelled windows), ``fp8_anchors`` and ``nccl_anchors`` (published cells the planner is compared with),
``gemm_fit`` (the GEMM curves fitted on measured GEMMs), ``power_validation``, ``soak`` and ``thermal_poles``
(the power and thermal models against real GPU readings), ``phases`` (labelling a replayed recording by its
workload's phases), ``operator_cap`` (the operator-cap decision scenario). A module here may import the twin
and ``ops`` alike; nothing in the product imports this package (``tests/test_lab.py``).
"""
