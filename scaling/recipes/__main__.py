import sys

from scaling.recipes.run import main

if __name__ == "__main__":
    sys.exit(main())
