import sys

from examples.clickstream.run import main

sys.exit(main())
