"""`python -m lightningstore.server --db URL --port P`: the store server without the lightningrl CLI."""

import sys

from lightningstore.server.run import main

sys.exit(main())
