"""The operational loop over live or simulated telemetry: collect → detect → classify → respond → learn.

``events`` holds the shared vocabulary (event classes, detections, incidents, severity); ``detect`` holds the
streaming detectors, the cross-signal rules, topology grouping, the per-step pipeline and the offline runner.
"""
