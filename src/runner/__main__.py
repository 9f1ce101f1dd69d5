import sys

from runner.command import main

sys.exit(main())
