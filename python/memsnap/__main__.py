"""``python -m memsnap``: the same command line as ``memsnap``."""

from memsnap._cli import main

raise SystemExit(main())
