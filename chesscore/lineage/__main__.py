"""`python -m chesscore.lineage audit ...`: see chesscore.lineage.audit."""

import sys

from chesscore.lineage.audit import main

sys.exit(main())
