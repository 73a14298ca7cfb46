from samsa.cli import main

main()
