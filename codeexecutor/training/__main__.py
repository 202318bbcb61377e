import sys

from codeexecutor.training.loop import main

sys.exit(main())
