"""The thin Typer CLI over the library: one module per command group, all sharing :data:`app`."""
