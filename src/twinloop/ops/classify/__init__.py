"""Incident classification: features at first report, rule-based and learned classifiers.

The labeled data they are trained on comes from twin runs: ``twinloop.lab.classifier_dataset``.
"""

from twinloop.ops.classify import learned, rule_based
from twinloop.ops.classify.base import LABELS, REGISTRY, IncidentClassifier, make_classifier

__all__ = ["LABELS", "REGISTRY", "IncidentClassifier", "learned", "make_classifier", "rule_based"]
