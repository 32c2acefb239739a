"""``python -m toold`` is the ``toold`` command."""

from toold.cli import main

raise SystemExit(main())
