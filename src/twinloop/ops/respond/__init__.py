"""Respond: policies (data) map incidents to actions; guard rails bound them; adapters carry them out."""
