"""The paper builder: ``paper/paper.md`` from ``paper/paper.template.md`` and the results.

``render`` fills the template's placeholders (see its docstring for their
syntax), ``tables`` shows a record's table and values with their intervals,
``intervals`` says how the records' intervals were computed, ``provenance``
where each record comes from, ``recorded`` what an older record may lack,
``quoted`` holds the one table quoted from elsewhere and ``gpu`` the GPU
section. ``python -m experiments paper`` runs ``write_paper``.
"""

from paper.builder.render import (
    DEFAULT_PAPER_DIR,
    DEFAULT_TEMPLATE,
    load_results,
    render_paper,
    write_paper,
)
from paper.builder.tables import PaperError

__all__ = [
    "DEFAULT_PAPER_DIR",
    "DEFAULT_TEMPLATE",
    "PaperError",
    "load_results",
    "render_paper",
    "write_paper",
]
