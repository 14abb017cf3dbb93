"""Incident classification: features at first report, labeled twin data, rule-based and learned classifiers."""

from twinloop.ops.classify import learned, rule_based
from twinloop.ops.classify.base import LABELS, REGISTRY, IncidentClassifier, make_classifier

__all__ = ["LABELS", "REGISTRY", "IncidentClassifier", "learned", "make_classifier", "rule_based"]
