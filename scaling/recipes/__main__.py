import sys

from scaling.recipes.run import main

sys.exit(main())
