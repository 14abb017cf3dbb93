"""Hardware specifications (GPUs, links) loaded from the catalog, and the shared GPU power model."""
