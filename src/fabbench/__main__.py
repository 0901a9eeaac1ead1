from fabbench.cli.main import main

main()
