"""Data only: gpus.yaml, links.yaml and models/*.json, each number with its source."""

from pathlib import Path

CATALOG_DIR = Path(__file__).resolve().parent
