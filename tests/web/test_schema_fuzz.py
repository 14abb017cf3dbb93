"""Schemathesis against the app's OpenAPI schema: generated inputs never cause a server error, every response
matches its declared schema and status codes, and schema-invalid input is rejected. Bounded: a few examples per
operation (the whole file runs in well under a minute).

``positive_data_acceptance`` is left out: some schema-valid requests are rightly refused with 422 by checks a
schema cannot state (``since_s`` after ``until_s``, a model that does not fit in the GPUs' memory).
"""

from __future__ import annotations

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis import checks

from .conftest import AUTH


@pytest.fixture
def api_schema(app: FastAPI) -> schemathesis.Schema:
    return schemathesis.openapi.from_asgi("/api/openapi.json", app)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.exclude(path="/api/live").parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_never_fails_on_generated_input(case: schemathesis.Case) -> None:
    case.call_and_validate(headers=AUTH, excluded_checks=[checks.positive_data_acceptance])
