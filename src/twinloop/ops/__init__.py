"""The operational loop over live or simulated telemetry: collect → detect → classify → respond → learn.

It knows no twin: ``ports`` is its one view of a cluster (simulated in ``twinloop.closedloop``, or live), and
``runner`` drives every stage over that port. ``events`` holds the shared vocabulary (event classes, detections,
incidents, severity); ``detect`` holds the streaming detectors, the cross-signal rules, topology grouping, the
per-step pipeline and the offline runner; ``classify``, ``respond`` and ``learn`` the later stages.
"""
