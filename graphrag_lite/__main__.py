from graphrag_lite.cli import main

main()
