"""The row-filter options ``report``, ``compare`` and ``whatif`` share (``toolkit/filters.py``), declared once."""

from __future__ import annotations

from typing import Annotated

import typer

Model = Annotated[str | None, typer.Option(help="Only this model.")]
Vantage = Annotated[
    str | None, typer.Option(help="Only records measured at this vantage (server, client, gateway).")
]
SourceFormat = Annotated[str | None, typer.Option(help="Only records of this source format.")]
Service = Annotated[str | None, typer.Option(help="Only this service.")]
Replica = Annotated[str | None, typer.Option(help="Only this replica.")]
Tenant = Annotated[str | None, typer.Option(help="Only this tenant.")]
AllowMixed = Annotated[
    bool,
    typer.Option(
        help="Compare sides of different vantage, source format or model anyway (every output says so)."
    ),
]
