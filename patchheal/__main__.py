from patchheal.cli import main

main()
