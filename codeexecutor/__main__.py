import sys

from codeexecutor.cli import main

sys.exit(main())
