"""Options shared by several CLI subcommands: ``--seed``, ``--workers``, ``--max-bytes``,
``--data-format``, ``--noise-method``.

Each keeps its command's default and help text; the valid ranges are :data:`engine.core.numbers.RANGES`.
"""

from __future__ import annotations

from typing import Any

from engine.core.numbers import option_type

MAX_BYTES_HELP = (
    "size limit per input file in bytes, 1 – 2^40 (default 200 MB, docs/reliability.md)"
)


def add_data_format_option(parser: Any) -> None:
    """Add ``--data-format``: the TopDown input format when the file's header does not tell."""
    parser.add_argument(
        "--data-format",
        choices=("ri2010", "ppmf", "pl94171", "block_csv"),
        help="format of --data when its header is not enough to tell (default: sniffed)",
    )


def add_noise_method_option(parser: Any) -> None:
    """Add ``--noise-method fast|exact`` of the engine runs (recorded in metrics.json 'noise')."""
    parser.add_argument(
        "--noise-method",
        choices=("fast", "exact"),
        default="fast",
        help="fast: counter-based noise keyed by (seed, level, geounit, query), the same numbers "
        "for the same seed whatever the workers (default); exact: OpenDP's exact samplers, "
        "release-grade, OS randomness (the seed does not reproduce them); recorded in "
        "metrics.json 'noise'",
    )


def add_seed_option(parser: Any, help: str, **kwargs: Any) -> None:
    """Add ``--seed`` (a whole number, 0 – 2^63-1); ``kwargs``: its default or ``required``."""
    parser.add_argument("--seed", type=option_type("whole", "seed", "--seed"), help=help, **kwargs)


def add_workers_option(parser: Any, help: str, default: int | None = 1) -> None:
    """Add ``--workers`` (worker processes, 1 – 256)."""
    parser.add_argument(
        "--workers", type=option_type("whole", "workers", "--workers"), default=default, help=help
    )


def add_max_bytes_option(parser: Any, help: str = MAX_BYTES_HELP) -> None:
    """Add ``--max-bytes`` (size limit per input file, 1 – 2^40; default: no option = 200 MB)."""
    parser.add_argument(
        "--max-bytes",
        type=option_type("whole", "max_bytes", "--max-bytes"),
        default=None,
        help=help,
    )
